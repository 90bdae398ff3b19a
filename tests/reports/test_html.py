"""The HTML report: escaping, the item data the filters work on, media caps, determinism, and
what is left out when the manifest or instruction set is gone."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mmverify.reports import render_html, write_html_report
from mmverify.reports.html import script_json
from mmverify.reports.items import MEDIA_NOTE_CAP, media_selection
from mmverify.reports.rundata import load_run
from tests.reports.synthetic import PAYLOAD, write_synthetic_run

BLOB = re.compile(r'<script type="application/json" id="items-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_run(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture(scope="module")
def page(synthetic_run: Path) -> str:
    return write_html_report(synthetic_run, synthetic_run / "page.html").read_text(encoding="utf-8")


def blob_of(text: str) -> dict[str, Any]:
    match = BLOB.search(text)
    assert match is not None
    return json.loads(match.group(1))


def items_of(text: str) -> list[dict[str, Any]]:
    return blob_of(text)["items"]


def test_script_json_cannot_close_the_script_element() -> None:
    text = script_json({"reason": PAYLOAD, "x": "a & b <!-- c -->\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"reason": PAYLOAD, "x": "a & b <!-- c -->\u2028"}


def test_script_json_replaces_non_finite_numbers() -> None:
    assert json.loads(script_json({"a": float("nan"), "b": [float("inf"), 1.5]})) == {"a": None, "b": [None, 1.5]}


def test_payload_in_results_stays_text(page: str) -> None:
    assert "<img src=x" not in page  # nowhere as markup: escaped in the static HTML and in the blob
    assert page.count("</script>") == 2  # the item blob and the page script, nothing from the data
    assert "&lt;/script&gt;&lt;img src=x onerror=" in page  # the overview notes and the errors section show it as text
    items = items_of(page)
    assert any(item["reason"] == PAYLOAD for item in items)
    replies = [q["reply"] for item in items for q in item["judge"]]
    assert any(PAYLOAD in reply for reply in replies)


def test_items_carry_what_the_filters_use(page: str, synthetic_run: Path) -> None:
    items = items_of(page)
    rows = load_run(synthetic_run).rows
    assert len(items) == len(rows) == 18
    assert [item["n"] for item in items] == list(range(18))
    assert {item["model"] for item in items} == {"model-a", "model-b"}
    assert {item["status"] for item in items} == {"scored", "error"}
    for item, row in zip(items, rows):
        assert (item["task"], item["id"], item["score"], item["passed"]) == (row["task"], row["instance_id"], row["score"], row["passed"])
    for control in ("f-task", "f-model", "f-status", "f-min", "f-max", "f-order", "f-limit"):
        assert f'id="{control}"' in page
    for task in {row["task"] for row in rows}:
        assert f'data-task="{task}"' in page


def test_item_details(page: str) -> None:
    media = blob_of(page)["media"]
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items_of(page):
        if item["status"] == "scored":
            items.setdefault((item["task"], item["model"]), item)  # the first of each pair
    include = items[("i_object_include", "model-a")]
    assert include["instruction"] == "Generate a beach with one umbrella."
    assert [q["step"] for q in include["judge"]] == ["scene", "umbrella"]
    edit = items[("i_edit_object_add", "model-a")]
    generated, source = edit["media"]
    assert (generated["w"], generated["h"], source["w"], source["h"]) == (320, 240, 640, 480)
    assert {b["kind"]: b["box"] for b in generated["boxes"]} == {"edit": [50, 40, 150, 120], "widened": [34, 24, 166, 136]}
    assert {b["kind"]: b["box"] for b in source["boxes"]} == {"edit": [100, 80, 300, 240], "widened": [68, 48, 332, 272]}
    assert media[generated["src"]].startswith(("data:image/png;base64,", "data:image/jpeg;base64,"))
    assert source["src"] == items[("i_edit_object_add", "model-b")]["media"][1]["src"]  # one copy of a shared image
    intensity = items[("a_music_intensity", "model-a")]["media"][0]
    assert media[intensity["src"]].startswith(("data:audio/mpeg;base64,", "data:audio/wav;base64,"))
    assert media[intensity["plot"]].startswith("data:image/svg+xml;base64,") and "measured fade in" in intensity["caption"]
    alignment = items[("a_speech_retrieve", "model-a")]["alignment"]
    assert alignment["unit"] == "word" and alignment["error_rate"] == pytest.approx(0.5)
    assert {"op": "substitute", "ref": "sat", "hyp": "sit"} in alignment["ops"]
    missing = next(i for i in items_of(page) if i["error"] and i["error"]["code"] == "missing_media")
    assert missing["media"][0]["problem"]


def test_media_cap_prefers_extreme_scores(synthetic_run: Path) -> None:
    data = load_run(synthetic_run)
    chosen = media_selection(data, 1)
    per_task: dict[str, int] = {}
    for index in chosen:
        per_task[data.rows[index]["task"]] = per_task.get(data.rows[index]["task"], 0) + 1
    assert set(per_task.values()) == {1}
    # i_object_include rows with media: scored 0.5 (model-a), 0.75 (model-b), and two error rows
    with_media = [i for i, r in enumerate(data.rows) if r["task"] == "i_object_include" and r["instance_id"].endswith(("-1", "-8", "-10", "-17"))]
    low, high = (i for i in with_media if data.rows[i]["status"] == "scored")
    assert (data.rows[low]["score"], data.rows[high]["score"]) == (0.5, 0.75)
    assert low in chosen and high not in chosen
    assert {low, high} <= media_selection(data, 2)
    assert not set(with_media) - {low, high} & media_selection(data, 2)  # error rows come after the scored ones
    assert media_selection(data, 0) == set()


def test_media_cap_in_the_page(synthetic_run: Path, tmp_path: Path) -> None:
    items = items_of(write_html_report(synthetic_run, tmp_path / "capped.html", max_media=1).read_text(encoding="utf-8"))
    by_task: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_task.setdefault(item["task"], []).append(item)
    for task, members in by_task.items():
        assert sum(bool(item["media"]) for item in members) <= 1, task
    assert sum(item["media_note"] == MEDIA_NOTE_CAP for item in items) >= 6
    with pytest.raises(ValueError):
        write_html_report(synthetic_run, tmp_path / "bad.html", max_media=-1)


def test_same_run_same_bytes(synthetic_run: Path, page: str) -> None:
    assert render_html(load_run(synthetic_run)) == page


ENCODE = """
import sys
import numpy as np
from mmverify.reports.media import encode_audio, encode_thumbnail
t = np.arange(22050) / 22050
print(encode_audio((0.4 * np.sin(2 * np.pi * 440 * t)).astype(np.float32))[-64:])
print(encode_thumbnail(np.arange(300 * 200 * 3, dtype=np.uint64).reshape(200, 300, 3).astype(np.uint8))[-64:])
"""


def test_media_encoding_is_the_same_in_another_process() -> None:
    root = Path(__file__).resolve().parents[2]
    runs = [subprocess.run([sys.executable, "-c", ENCODE], check=True, capture_output=True, text=True, cwd=root).stdout for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].count("\n") == 2


@pytest.mark.slow
def test_same_run_same_bytes_in_another_process(synthetic_run: Path, page: str, tmp_path: Path) -> None:
    out = tmp_path / "again.html"
    code = "import sys; from pathlib import Path; from mmverify.reports import write_html_report; write_html_report(Path(sys.argv[1]), Path(sys.argv[2]))"
    subprocess.run([sys.executable, "-c", code, str(synthetic_run), str(out)], check=True, cwd=Path(__file__).resolve().parents[2])
    assert out.read_text(encoding="utf-8") == page


def test_degrades_without_manifest_and_instructions(synthetic_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "copy"
    shutil.copytree(synthetic_run, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["config"].update(manifest=str(tmp_path / "gone.jsonl"), instructions=str(tmp_path / "gone"))
    (run / "summary.json").write_text(json.dumps(summary))
    items = items_of(render_html(load_run(run)))
    assert len(items) == 18
    assert all(not item["media"] and item["media_note"] is None for item in items)
    assert all(item["instruction"] is None and item["alignment"] is None for item in items)


def test_results_jsonl_alone_is_enough(synthetic_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "old"
    shutil.copytree(synthetic_run, run)
    (run / "results.latest.jsonl").unlink()
    assert len(load_run(run).rows) == 18


def test_missing_summary_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="summary.json"):
        write_html_report(tmp_path)


def test_rows_of_another_manifest_get_no_media(synthetic_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "appended"
    shutil.copytree(synthetic_run.parent, root)
    manifest = root / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    first = json.loads(lines[0])
    first["instance_id"] = "something/else"  # line 1 now names another generation than row 0 scored
    manifest.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    summary = json.loads((root / "run" / "summary.json").read_text())
    summary["config"]["manifest"] = str(manifest)
    (root / "run" / "summary.json").write_text(json.dumps(summary))
    items = items_of(render_html(load_run(root / "run")))
    assert items[0]["media"] == [] and items[0]["instruction"] is None
    assert items[2]["media"] and items[2]["instruction"]


def test_relative_manifest_path_is_found_from_above_the_run(synthetic_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    shutil.copytree(synthetic_run.parent, root / "runs" / "x")
    summary = json.loads((root / "runs" / "x" / "run" / "summary.json").read_text())
    summary["config"].update(manifest="runs/x/manifest.jsonl", instructions="runs/x/instructions")
    (root / "runs" / "x" / "run" / "summary.json").write_text(json.dumps(summary))
    monkeypatch.chdir(tmp_path)  # not the folder `score` ran in
    data = load_run(root / "runs" / "x" / "run")
    assert data.base_dir == (root / "runs" / "x").resolve() and data.instructions is not None


def test_lone_surrogates_in_the_manifest_do_not_stop_the_page(synthetic_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "surrogate"
    shutil.copytree(synthetic_run.parent, root)
    manifest = root / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    second = json.loads(lines[1])
    second["parts"] = [{"type": "text", "text": "broken \\ud800 text"}]
    lines[1] = json.dumps(second).replace("\\\\ud800", "\\ud800")  # a JSON escape of a lone surrogate
    manifest.write_text("\n".join(lines) + "\n")
    summary = json.loads((root / "run" / "summary.json").read_text())
    summary["config"]["manifest"] = str(manifest)
    (root / "run" / "summary.json").write_text(json.dumps(summary))
    text = write_html_report(root / "run").read_text(encoding="utf-8")
    assert items_of(text)[1]["texts"] == ["broken ? text"]


def test_the_page_allows_only_its_own_script(page: str) -> None:
    import base64
    import hashlib

    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy is not None and "default-src 'none'" in policy.group(1)
    executable = re.findall(r"<script>(.*?)</script>", page, flags=re.S)  # the data blob is application/json
    assert len(executable) == 1
    digest = base64.b64encode(hashlib.sha256(executable[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy.group(1)
