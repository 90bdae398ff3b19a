"""The in-process API returns one row per item, in order, with the same scores as the CLI path."""

from __future__ import annotations

import base64
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
