"""Audio files are decoded from their descriptor; what comes back -- samples, or the refusal and its
words -- is what decoding the same bytes in memory gives."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.core import media
from mmverify.core.media import MediaError, MediaLimits, load_audio

LAYOUTS = [  # (format, subtype); MP3 and OGG are written at rates they support
    ("WAV", "PCM_16"), ("WAV", "PCM_24"), ("WAV", "FLOAT"), ("WAV", "PCM_U8"), ("FLAC", "PCM_16"),
    ("OGG", "VORBIS"), ("MP3", "MPEG_LAYER_III"), ("AIFF", "PCM_16"),
]  # fmt: skip


def encoded(rng: np.random.Generator) -> bytes:
    """One seeded random file: a layout, a rate, 1 to 3 channels, a length; sometimes damaged."""
    fmt, subtype = LAYOUTS[int(rng.integers(len(LAYOUTS)))]
    rate = int(rng.choice([16_000, 22_050, 44_100, 48_000]))
    channels = int(rng.integers(1, 3 if fmt == "MP3" else 4))
    frames = int(rng.integers(1, rate // 2))
    samples = (0.5 * rng.standard_normal((frames, channels))).clip(-1, 1)
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format=fmt, subtype=subtype)
    data = buffer.getvalue()
    damage = int(rng.integers(6))
    if damage == 0:  # cut short: header only, or mid-stream
        return data[: int(rng.integers(1, len(data)))]
    if damage == 1:  # a scribbled header
        return bytes(rng.integers(0, 256, size=16, dtype=np.uint8)) + data[16:]
    if damage == 2:  # not audio at all
        return bytes(rng.integers(0, 256, size=int(rng.integers(1, 400)), dtype=np.uint8))
    return data


def outcome(source, **limits) -> tuple:
    try:
        samples, rate = load_audio(source, limits=MediaLimits(**limits)) if limits else load_audio(source)
    except MediaError as exc:
        return ("refused", exc.reason, exc.message)
    return ("decoded", rate, samples.dtype.str, samples.tobytes())


def test_a_file_gives_what_its_bytes_give_on_seeded_random_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    opened: list[type] = []
    real = sf.SoundFile

    def noting(file, *args, **kwargs):
        opened.append(type(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(sf, "SoundFile", noting)
    rng = np.random.default_rng(20)
    seen = {"decoded": 0, "refused": 0}
    for case in range(120):
        data = encoded(rng)
        path = tmp_path / f"{case}.audio"
        path.write_bytes(data)
        opened.clear()
        from_file, ways = outcome(path), list(opened)
        assert from_file == outcome(data), f"case {case}"
        seen[from_file[0]] += 1
        # from the descriptor; refused, then in memory for the words
        assert ways == ([int] if from_file[0] == "decoded" else [int, io.BytesIO]), f"case {case}"
        if from_file[0] == "refused":
            assert "Error opening <data>" in from_file[2] or "Error opening" not in from_file[2]
    assert min(seen.values()) >= 20, seen  # both outcomes were compared, many times


def test_limits_refuse_a_file_as_they_refuse_its_bytes(tmp_path: Path):
    path = tmp_path / "long.wav"
    sf.write(path, np.zeros((48_000, 2), dtype=np.float32), 48_000)
    data = path.read_bytes()
    for limits in ({"max_seconds": 0.5}, {"max_samples": 1000}, {"max_sample_rate": 44_100}):
        refused = outcome(path, **limits)
        assert refused[0] == "refused" and refused == outcome(data, **limits)
    assert outcome(path, max_bytes=len(data) - 1)[:2] == ("refused", "media_too_large")
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    assert outcome(empty) == ("refused", "media_empty", "zero-length media")


def test_every_descriptor_opened_is_closed_however_decoding_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    handles = []
    real = media._opened

    def noted(path):
        handles.append(real(path))
        return handles[-1]

    monkeypatch.setattr(media, "_opened", noted)
    good, bad, empty = tmp_path / "good.wav", tmp_path / "bad.wav", tmp_path / "empty.wav"
    sf.write(good, np.zeros(100, dtype=np.float32), 16_000)
    bad.write_bytes(b"RIFF" + bytes(60))
    empty.write_bytes(b"")
    load_audio(good)
    for refused in (bad, empty):
        with pytest.raises(MediaError):
            load_audio(refused)
    assert len(handles) == 5 and all(handle.closed for handle in handles)  # good once, the others twice
