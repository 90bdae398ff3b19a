"""The in-process API returns one row per item, in order, with the same scores as the CLI path."""

from __future__ import annotations

import base64
import json
import io
from pathlib import Path

from PIL import Image

from mmverify.api import score_items
from tests.conftest import save_png, scene


def test_score_items_inline_instances_paths_and_base64(tmp_path: Path):
    save_png(tmp_path / "a.png", scene())
    buffer = io.BytesIO()
    Image.fromarray(scene(seed=1)).save(buffer, format="PNG")
    inline = base64.b64encode(buffer.getvalue()).decode()
    rows = score_items(
        [
            {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "path": "a.png"}, {"type": "text", "text": "x"}]},
            {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "data": inline}]},
            {"task": "nope", "instance": {}, "parts": []},
        ],
        base_dir=tmp_path,
    )
    assert [r["score"] for r in rows] == [1.0, 0.0, None]
    assert rows[2]["error"]["code"] == "unknown_task"
    assert rows[0]["instance_id"] == "i_structure/line-1"


def test_an_item_json_cannot_hold_is_its_own_row_and_its_neighbours_are_unchanged():
    import numpy as np

    good = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "a"}]}
    alone = score_items([good, good])
    rows = score_items([good, {**good, "x": np.float32(1)}, {1, 2}, {**good, "instance": {"order": {"t"}}}])
    assert len(rows) == 4 and rows[0] == alone[0]
    assert [r["status"] for r in rows] == ["scored", "error", "error", "error"]
    assert [r["error"]["code"] for r in rows[1:]] == ["malformed_line", "malformed_line", "invalid_instance"]
    assert "float32" in rows[1]["error"]["message"] and [r["line"] for r in rows] == [1, 2, 3, 4]


def test_a_line_whose_instruction_row_feeds_two_tasks_gives_a_row_per_task_as_score_does(tmp_path: Path):
    from mmverify.pipelines.score import ScoreConfig, run_score
    from tests.conftest import write_manifest

    lines = [
        {"task": "a_music_attribute", "instance_id": "x/0", "instance": {"instrument": "piano", "tempo": 120}, "parts": [{"type": "audio", "path": "missing.wav"}]},
        {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "a"}]},
    ]
    rows = score_items(lines, base_dir=tmp_path)
    assert [(r["task"], r["line"]) for r in rows] == [("a_music_instrument", 1), ("a_music_tempo", 1), ("i_structure", 2)]
    run_score(ScoreConfig(manifest=write_manifest(tmp_path / "m.jsonl", lines), out=tmp_path / "out"))
    written = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    summary = lambda r: (r["task"], r["instance_id"], r["line"], r["status"], (r.get("error") or {}).get("code"))  # noqa: E731
    assert [summary(r) for r in rows] == [summary(r) for r in written]
