"""Boxes, thumbnails, audio marks, figures and transcript alignment of the report."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from mmverify.reports.alignment import align, transcript_alignment
from mmverify.reports.audio_marks import intensity_trace, segment_spans
from mmverify.reports.figures import AudioFigure, audio_svg, histogram_counts, histogram_svg
from mmverify.reports.media import border_rects, encode_thumbnail, image_overlays
from mmverify.verifiers.audio.intensity import envelope_trend
from mmverify.verifiers.image.fill import border_strip, check_solid_border
from tests.reports.synthetic import RATE, fade_in


def test_border_rects_cover_exactly_the_pixels_the_border_check_stacks() -> None:
    height, width = 90, 130
    image = np.arange(height * width * 3, dtype=np.int64).reshape(height, width, 3)
    stacked = border_strip(image, 0.1)
    marked = np.concatenate([image[y0:y1, x0:x1].reshape(-1, 3) for x0, y0, x1, y1 in border_rects(width, height, 0.1)])
    assert sorted(map(tuple, stacked.reshape(-1, 3))) == sorted(map(tuple, marked))


def test_border_overlays_follow_the_rows_inner_box() -> None:
    image = np.zeros((200, 300, 3), np.uint8)
    evidence = check_solid_border(image, "black").evidence
    overlays = image_overlays(evidence, 300, 200)
    strips = [o["box"] for o in overlays if o["kind"] == "region"]
    bands = [o["box"] for o in overlays if o["kind"] == "penalty"]
    assert strips == [[50, 0, 250, 20], [50, 180, 250, 200], [0, 0, 30, 200], [270, 0, 300, 200]]
    x0, y0, x1, y1 = evidence["inner_box"]
    assert len(bands) == 4 and all(x0 <= b[0] and y0 <= b[1] and b[2] <= x1 and b[3] <= y1 for b in bands)


def test_region_and_penalty_boxes() -> None:
    overlays = image_overlays({"region_box": [0, 0, 128, 256], "penalty_box": [128, 0, 256, 256]}, 256, 256)
    assert [(o["kind"], o["box"]) for o in overlays] == [("region", [0, 0, 128, 256]), ("penalty", [128, 0, 256, 256])]


def test_malformed_boxes_are_ignored() -> None:
    assert image_overlays({"region_box": [0, 0, "x", 1], "widened_box": [1, 2, 3, 4], "compared_size": [0, 10]}, 10, 10) == []


def test_thumbnails_are_downscaled() -> None:
    uri = encode_thumbnail(np.random.default_rng(0).integers(0, 256, (600, 1000, 3), dtype=np.uint8))
    image = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert max(image.size) == 256 and image.size == (256, 154)


def test_intensity_trace_matches_the_verifier() -> None:
    audio = fade_in()
    trend = envelope_trend(audio, RATE, "start")
    trace = intensity_trace(audio, RATE, "start")
    assert trace is not None and trace.line is not None
    assert len(trace.points) == trend.peaks
    t0, v0, t1, v1 = trace.line
    assert (v1 - v0) / (t1 - t0) == pytest.approx(trend.slope, rel=1e-6)
    assert trace.start_s == pytest.approx(0.0, abs=0.05) and trace.end_s == pytest.approx(3.0, abs=0.05)


def test_intensity_trace_of_silence_is_none() -> None:
    assert intensity_trace(np.zeros(RATE * 3, np.float32), RATE, "start") is None


def test_segment_spans_accept_both_shapes() -> None:
    named = segment_spans({"segments_s": {"start": [0.0, 1.0], "end": [3.0, 4.0]}})
    listed = segment_spans({"segments_s": [[0.0, 1.0], [2.0, 2.5], "bad"]})
    assert [(s, e, label) for s, e, label, _ in named] == [(0.0, 1.0, "start"), (3.0, 4.0, "end")]
    assert [(s, e, label) for s, e, label, _ in listed] == [(0.0, 1.0, "segment 1"), (2.0, 2.5, "segment 2")]
    assert segment_spans({}) == []


def test_histogram_bins() -> None:
    assert histogram_counts([0.0, 0.05, 0.55, 1.0, 1.0], bins=10) == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    svg = histogram_svg([0.0, 1.0])
    assert svg.count("<rect") == 10 and "0.9–1.0: 1" in svg


def test_audio_svg_escapes_labels() -> None:
    figure = AudioFigure(duration=2.0, envelope=np.ones(4), spans=[(0.0, 1.0, "<script>x</script>", "#000")])
    svg = audio_svg(figure)
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_word_alignment() -> None:
    result = align("the cat sat on the mat", "the cat sit on mat now")
    assert result["error_rate"] == pytest.approx(0.5)
    kinds = [op["op"] for op in result["ops"]]
    assert "substitute" in kinds and kinds[0] == "equal"
    assert " ".join(op["ref"] for op in result["ops"] if op["ref"]) == "the cat sat on the mat"
    assert " ".join(op["hyp"] for op in result["ops"] if op["hyp"]) == "the cat sit on mat now"


def test_alignment_with_empty_sides() -> None:
    assert align("hello world", "")["ops"] == [{"op": "delete", "ref": "hello world", "hyp": ""}]
    assert align("", "") == {"unit": "word", "ops": [], "error_rate": 0.0}


def test_transcript_alignment_uses_the_task_normalisation() -> None:
    result = transcript_alignment("a_speech_retrieve", {"text": "Hello, World!"}, {"transcript": "hello world"})
    assert result is not None and result["error_rate"] == 0.0
    chinese = transcript_alignment("a_speech_chinese", {"text": "你好世界"}, {"transcript": "你好地界"})
    assert chinese is not None and chinese["unit"] == "char" and chinese["error_rate"] == pytest.approx(0.25)
    assert transcript_alignment("a_speech_constraint", {"text": "x"}, {"transcript": "x"}) is None
    assert transcript_alignment("a_speech_retrieve", None, {"transcript": "x"}) is None


def test_flat_images_stay_png_and_photos_become_jpeg() -> None:
    flat = np.zeros((300, 300, 3), np.uint8)
    flat[:, :150] = (0, 128, 0)
    noisy = np.random.default_rng(1).integers(0, 256, (300, 300, 3), dtype=np.uint8)
    assert encode_thumbnail(flat).startswith("data:image/png;base64,")
    assert encode_thumbnail(noisy).startswith("data:image/jpeg;base64,")
