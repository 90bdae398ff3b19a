"""Property-based tests of the parsers and loaders, and a seeded mutation fuzz of media and lines.

Parsers and loaders must be total: any input either parses or raises the one typed error the
pipeline turns into a row (ManifestError, MediaError) -- never anything else.
"""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from mmverify.core.media import MediaError, MediaLimits, load_audio, load_image
from mmverify.data.manifest import ManifestError, parse_generation, parse_line
from mmverify.verifiers.image.fill import region_boxes
from mmverify.verifiers.image.preserve import widen_box
from mmverify.verifiers.structure import modality_sequence
from tests.robustness.corpus import _border_image

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
part_dicts = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "audio", "video", 3])},
    optional={"text": st.text(max_size=10) | st.integers(), "path": st.text(max_size=10), "data": st.text(max_size=10)},
)
manifest_objects = st.fixed_dictionaries(
    {},
    optional={
        "task": st.text(max_size=12) | st.integers(),
        "instance_id": st.text(max_size=12) | st.none(),
        "sample": st.integers(-3, 3) | st.text(max_size=3) | st.booleans(),
        "model": st.text(max_size=5) | st.integers(),
        "parts": st.lists(part_dicts, max_size=3) | json_values,
        "instance": st.dictionaries(st.text(max_size=5), json_values, max_size=3) | json_values,
    },
)
@pytest.fixture(autouse=True, scope="module")
def _drop_unloadable_lazy_modules():
    """Hypothesis scans ``sys.modules`` for constants and reads each module's ``__file__``; some
    libraries (speechbrain's deprecated aliases) register lazy modules whose attribute access
    imports optional packages that are absent.  Those aliases are unused here, so drop them."""
    import sys

    for name, module in list(sys.modules.items()):
        try:
            getattr(module, "__file__", None)
        except Exception:  # ImportError subclasses and whatever a lazy loader raises
            del sys.modules[name]


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.text(max_size=200))
def test_any_text_line_parses_or_raises_manifest_error(text):
    try:
        parse_line(text, 1)
    except ManifestError:
        pass


@PROPERTY
@given(manifest_objects)
def test_structured_lines_parse_or_raise_manifest_error(obj):
    try:
        generation = parse_generation(obj, 7)
    except ManifestError:
        return
    assert generation.task.strip() == generation.task and generation.sample >= 0
    assert all(p.type in ("text", "image", "audio") for p in generation.parts)


@PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["text", "image", "audio"]), st.text(max_size=5)), max_size=12))
def test_modality_sequences_merge_text(parts):
    sequence = modality_sequence(parts)
    assert set(sequence) <= set("tia") and "tt" not in sequence
    assert sequence.count("i") == sum(kind == "image" for kind, _ in parts)


@PROPERTY
@given(
    st.sampled_from(["left", "right", "upper", "lower"]),
    st.sampled_from(["half", "third", "quarter"]),
    st.integers(1, 5000),
    st.integers(1, 5000),
)
def test_region_boxes_stay_inside_the_image(side, portion, width, height):
    for x0, y0, x1, y1 in region_boxes(f"{side} {portion}", width, height):
        assert 0 <= x0 <= x1 <= width and 0 <= y0 <= y1 <= height


@PROPERTY
@given(st.lists(st.integers(-100, 700), min_size=4, max_size=4), st.integers(1, 600), st.integers(1, 600), st.integers(1, 30))
def test_widened_boxes_are_clipped(box, width, height, divisor):
    try:
        x0, y0, x1, y1 = widen_box(box, width, height, divisor)
    except ValueError:
        assert box[2] <= box[0] or box[3] <= box[1]
        return
    assert 0 <= x0 and 0 <= y0 and x1 <= width and y1 <= height


@PROPERTY
@given(st.binary(max_size=2000))
def test_random_bytes_never_crash_the_loaders(data):
    for loader in (load_image, load_audio):
        try:
            loader(data)
        except MediaError:
            pass


def _seeds() -> list[bytes]:
    image = Image.fromarray(_border_image())
    seeds = []
    for fmt in ("PNG", "JPEG", "GIF", "BMP", "WEBP", "TIFF"):
        buffer = io.BytesIO()
        image.save(buffer, format=fmt)
        seeds.append(buffer.getvalue())
    for fmt, subtype in (("WAV", "PCM_16"), ("FLAC", None), ("OGG", None)):
        buffer = io.BytesIO()
        sf.write(buffer, (0.2 * np.sin(np.arange(4000) / 5)).astype(np.float32), 8000, format=fmt, subtype=subtype)
        seeds.append(buffer.getvalue())
    return seeds


def _mutate(data: bytes, rng: random.Random) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        choice = rng.random()
        position = rng.randrange(len(buffer)) if buffer else 0
        if choice < 0.5 and buffer:
            buffer[position] = rng.randrange(256)
        elif choice < 0.7:
            buffer[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif choice < 0.9 and buffer:
            del buffer[position : position + rng.randint(1, 64)]
        else:
            buffer = buffer[: rng.randrange(len(buffer) + 1)]
    return bytes(buffer)


@pytest.mark.slow
def test_mutation_fuzz_of_media_and_manifest_lines():
    """Seeded mutations of valid images, audio and manifest lines: zero unexpected exceptions."""
    rng = random.Random(2026)
    limits = MediaLimits(max_pixels=4_000_000, max_seconds=60)
    tried = 0
    for seed in _seeds():
        for _ in range(300):
            data = _mutate(seed, rng)
            for loader in (load_image, load_audio):
                try:
                    loader(data, limits=limits)
                except MediaError:
                    pass
            tried += 1
    line = json.dumps({"task": "i_format_border", "instance": {"color": "green"}, "sample": 1,
                       "parts": [{"type": "text", "text": "hi"}, {"type": "image", "path": "a.png"}]})  # fmt: skip
    for _ in range(3000):
        text = _mutate(line.encode(), rng).decode("utf-8", errors="replace")
        try:
            parse_line(text, 1)
        except ManifestError:
            pass
        tried += 1
    print(f"mutation fuzz: {tried} inputs, 0 crashes")
    assert tried == 9 * 300 + 3000
