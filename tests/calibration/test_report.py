"""The calibration report: media of listed generations from the manifest, one self-contained page."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

from PIL import Image

from mmverify.calibration.report import render_report
from mmverify.calibration.thumbnails import THUMBNAIL_PIXELS, media_for_rows
from tests.conftest import save_png, scene, write_manifest


def _decode(uri: str) -> Image.Image:
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix)
    return Image.open(io.BytesIO(base64.b64decode(uri[len(prefix) :])))


def test_media_come_from_the_manifest_line_of_the_same_generation(tmp_path: Path):
    save_png(tmp_path / "wide.png", scene(150, 300))  # height, width
    buffer = io.BytesIO()
    Image.new("RGB", (10, 20), (255, 0, 0)).save(buffer, format="PNG")
    inline = base64.b64encode(buffer.getvalue()).decode("ascii")
    manifest = write_manifest(tmp_path / "m.jsonl", [
        {"task": "t", "instance_id": "t/0", "parts": [{"type": "text", "text": "hi"}, {"type": "image", "path": "wide.png"}]},
        {"task": "t", "instance_id": "t/1", "parts": [{"type": "image", "path": "missing.png"}, {"type": "audio", "path": "a.wav"}]},
        {"task": "t", "instance_id": "t/2", "parts": [{"type": "image", "data": inline}]},
        {"task": "t", "instance_id": "t/3", "parts": [{"type": "image", "path": "wide.png"}]},
    ])  # fmt: skip
    rows = [
        {"task": "t", "instance_id": "t/0", "sample": 0, "line": 1},
        {"task": "t", "instance_id": "t/1", "sample": 0, "line": 2},
        {"task": "t", "instance_id": "t/2", "sample": 0, "line": 3},
        {"task": "t", "instance_id": "t/9", "sample": 0, "line": 4},  # line 4 is another generation: skipped
        {"task": "t", "instance_id": "t/5", "sample": 0, "line": 0},  # no line recorded
    ]
    media = media_for_rows(manifest, rows)
    assert sorted(media) == [1, 2, 3]
    thumb = _decode(media[1].images[0])
    assert thumb.size == (THUMBNAIL_PIXELS, THUMBNAIL_PIXELS // 2) and media[1].paths == ["wide.png"]
    assert media[2].images == [] and media[2].paths == ["missing.png", "a.wav"]
    assert len(media[2].problems) == 1 and "missing.png" in media[2].problems[0]
    assert _decode(media[3].images[0]).size == (10, 20) and media[3].paths == ["(inline image)"]


def _metrics(**extra: object) -> dict:
    return {
        "objective": "agreement", "bootstrap": "b", "inter_annotator": None,
        "labels": {"items": 1, "ties": 0, "matching": {"total": 1, "matched": 1, "unmatched": 0, "reasons": {}}},
        "tasks": {"t": {"n": 1, "instructions": 1, "component": "score", "fit": {"threshold": 0.5, "direction": ">"},
                        "disagreements": [{"instance_id": "t/<b>", "sample": 0, "model": None, "line": 1,
                                           "value": 0.9, "label": 0, "verdict": 1}]}},
        **extra,
    }  # fmt: skip


def test_page_escapes_ids_and_shows_the_tie_policy_and_unmatched_pairs():
    pairwise = {
        "policy": "epsilon", "epsilon": 0.02, "tasks": {"t": {"accuracy": 0.75, "ci95": [0.5, 1.0], "pairs": 4}},
        "overall": {"accuracy": 0.75, "ci95": [0.5, 1.0], "pairs": 4},
        "matching": {"total": 5, "matched": 4, "unmatched": 1, "reasons": {
            "model": {"count": 1, "meaning": "no row of this model for the instance_id and sample", "examples": ["t/3 samples 0>1 models x>None"]}}},
    }  # fmt: skip
    page = render_report(_metrics(pairwise=pairwise), {})
    assert "t/&lt;b&gt;" in page and "t/<b>" not in page
    assert "score differences up to 0.02 count as ties earning 0.5" in page
    assert "4 of 5 pairs matched" in page and "t/3 samples 0&gt;1 models x&gt;None" in page
    assert "<img" not in page  # no figure without arrays, no thumbnails without media


def test_page_without_pairs_or_disagreements_has_neither_section():
    metrics = _metrics()
    metrics["tasks"]["t"]["disagreements"] = []
    page = render_report(metrics, {})
    assert "Pairwise accuracy" not in page and "disagree" not in page.split("<h2>Agreement per task</h2>")[1].split("</table>")[1]
    json.dumps(metrics)  # the metrics stay JSON-able


class _Axes:
    """Records the bands and lines a plot draws."""

    def __init__(self) -> None:
        self.bands: list[tuple[float, float, str]] = []

    def axvspan(self, low: float, high: float, **style: object) -> None:
        self.bands.append((low, high, str(style.get("label"))))

    def __getattr__(self, name: str):  # plot, axvline, labels, legend: not looked at here
        return lambda *args, **kwargs: None


def test_the_cv_band_spans_only_the_folds_that_chose_the_fitted_direction():
    from mmverify.calibration.report import _plot_curve

    result = {
        "fit": {"threshold": 0.5, "direction": ">", "objective": "agreement"},
        "curve": {"thresholds": [0.0, 1.0], "values": [0.5, 0.5]},
        "component": "score",
        "cv": {"kfold_thresholds": [0.45, 0.55, 0.05, 0.5], "kfold_directions": [">", ">", "<", ">"]},
    }
    axes = _Axes()
    _plot_curve(axes, "t", result)
    assert axes.bands == [(0.45, 0.55, "thresholds chosen in CV folds (1 other fold(s) chose <)")]
    del result["cv"]["kfold_directions"]  # a fixed direction: every fold is on this curve
    axes = _Axes()
    _plot_curve(axes, "t", result)
    assert axes.bands == [(0.05, 0.55, "thresholds chosen in CV folds")]
