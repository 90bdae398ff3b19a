"""Decoding in worker processes gives the arrays and errors of decoding in the calling thread, and
what happens to a worker (a crash, a deadline, a failed start) belongs to its own input only."""

from __future__ import annotations

import io
import os
import pickle
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from PIL import Image

from mmverify.core.decoding import INLINE, DecodePool
from mmverify.core.media import MediaError, MediaLimits, MediaReason
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout


@pytest.fixture(scope="module")
def pool():
    with DecodePool(2) as decode_pool:
        yield decode_pool


def _wav(seconds: float, rate: int, channels: int = 1, fmt: str = "WAV", seed: int = 0) -> bytes:
    samples = np.random.default_rng(seed).uniform(-0.5, 0.5, (int(seconds * rate), channels)).astype(np.float32)
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format=fmt)
    return buffer.getvalue()


def _image(mode: str, fmt: str = "PNG") -> bytes:
    pixels = np.random.default_rng(1).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, format=fmt)
    return buffer.getvalue()


def _outcome(decode, *args):
    """An array's bytes, dtype and shape (with the rate for audio), or an error's type, reason and message."""
    try:
        result = decode(*args)
    except MediaError as exc:
        return ("MediaError", exc.reason, exc.message)
    array, rate = result if isinstance(result, tuple) else (result, None)
    return (array.tobytes(), array.dtype.str, array.shape, array.flags.c_contiguous, rate)


AUDIO = {
    "wav 44.1 kHz": _wav(1.5, 44_100),
    "stereo 22.05 kHz": _wav(1.0, 22_050, channels=2),
    "flac 16 kHz": _wav(1.0, 16_000, fmt="FLAC"),
    "not audio": b"RIFF\x00\x00\x00\x00WAVEnot really audio",
    "empty": b"",
}
IMAGES = {
    "rgb png": _image("RGB"),
    "rgba png": _image("RGBA"),
    "palette gif": _image("P", "GIF"),
    "cmyk jpeg": _image("CMYK", "JPEG"),
    "truncated png": _image("RGB")[:60],
    "not an image": b"definitely not an image",
}


@pytest.mark.parametrize("name", AUDIO)
@pytest.mark.parametrize("rate", [None, 48_000, 16_000])
def test_audio_decoded_in_a_process_is_the_same_bytes(pool, name, rate):
    assert _outcome(pool.audio, AUDIO[name], rate) == _outcome(INLINE.audio, AUDIO[name], rate)


@pytest.mark.parametrize("name", IMAGES)
def test_images_decoded_in_a_process_are_the_same_bytes(pool, name):
    assert _outcome(pool.image, IMAGES[name]) == _outcome(INLINE.image, IMAGES[name])


def test_paths_and_limits_give_the_same_results_and_messages(pool, tmp_path, monkeypatch):
    (tmp_path / "clip.wav").write_bytes(AUDIO["wav 44.1 kHz"])
    (tmp_path / "picture.png").write_bytes(IMAGES["rgba png"])
    monkeypatch.chdir(tmp_path)  # relative paths read from the caller's folder, and are named as given
    small = MediaLimits(max_seconds=1.0)
    few_pixels = MediaLimits(max_pixels=100)
    cases = [
        ("audio", ("clip.wav", 48_000)), ("audio", (tmp_path / "clip.wav", None)), ("audio", ("clip.wav", None, small)),
        ("audio", ("absent.wav",)), ("image", ("picture.png",)), ("image", ("picture.png", few_pixels)),
        ("image", (tmp_path / "absent.png",)),
    ]  # fmt: skip
    for kind, args in cases:
        here, there = _outcome(getattr(INLINE, kind), *args), _outcome(getattr(pool, kind), *args)
        assert there == here, (kind, args)
    reasons = {_outcome(INLINE.audio, "clip.wav", None, small)[1], _outcome(INLINE.audio, "absent.wav")[1]}
    assert reasons == {MediaReason.TOO_LARGE, MediaReason.MISSING}  # the cases above do reach the errors


def test_threads_sharing_a_pool_each_get_their_own_input(pool):
    clips = [_wav(0.5, 44_100, seed=seed) for seed in range(12)]
    results: dict[int, tuple] = {}

    def decode(index: int) -> None:
        results[index] = _outcome(pool.audio, clips[index], 48_000)

    threads = [threading.Thread(target=decode, args=(i,)) for i in range(len(clips))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[i] == _outcome(INLINE.audio, clips[i], 48_000) for i in range(len(clips)))
    assert len({results[i][0] for i in results}) == len(clips)


def test_a_worker_that_dies_fails_only_its_own_input(tmp_path):
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])  # starts the one worker
        [worker] = solo._workers
        worker.process.send_signal(signal.SIGKILL)  # as a crash in a native decoder would end it
        worker.process.wait()
        with pytest.raises(MediaError) as failed:
            solo.audio(AUDIO["wav 44.1 kHz"])
        assert failed.value.reason == MediaReason.UNDECODABLE and "decoding ended its process" in failed.value.message
        assert _outcome(solo.audio, AUDIO["flac 16 kHz"], 48_000) == _outcome(INLINE.audio, AUDIO["flac 16 kHz"], 48_000)


def test_a_deadline_ends_a_hung_decode_and_its_worker(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # reading it blocks until a writer comes: the decode hangs for good
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])
        [worker] = solo._workers
        with pytest.raises(ItemTimeout):
            with deadline(0.2):
                solo.audio(fifo)
        assert worker.process.poll() is not None and not solo._workers
        assert _outcome(solo.audio, AUDIO["stereo 22.05 kHz"]) == _outcome(INLINE.audio, AUDIO["stereo 22.05 kHz"])


def test_a_worker_that_cannot_start_is_an_error_not_a_bad_input(monkeypatch):
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("no-such-python")))
    with DecodePool(1) as solo:
        with pytest.raises((RuntimeError, OSError)) as failed:
            solo.audio(AUDIO["wav 44.1 kHz"])
        assert not isinstance(failed.value, MediaError)


def test_a_python_that_exits_at_once_is_a_failed_start(monkeypatch, tmp_path):
    quits = tmp_path / "quits"
    quits.write_text("#!/bin/sh\nexit 3\n")
    quits.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(quits))
    with DecodePool(1) as solo:
        with pytest.raises(RuntimeError, match="failed to start .*exit status 3"):
            solo.audio(AUDIO["wav 44.1 kHz"])


def test_a_closed_pool_refuses_work_and_a_pickled_one_starts_afresh(pool):
    copy = pickle.loads(pickle.dumps(pool))
    assert copy.processes == pool.processes and not copy._workers
    assert _outcome(copy.image, IMAGES["rgb png"]) == _outcome(INLINE.image, IMAGES["rgb png"])
    copy.close()
    with pytest.raises(RuntimeError, match="closed"):
        copy.image(IMAGES["rgb png"])
    with pytest.raises(ValueError):
        DecodePool(0)


def test_media_errors_pickle_with_their_reason_and_message():
    error = pickle.loads(pickle.dumps(MediaError(MediaReason.TOO_LARGE, "too big")))
    assert (type(error), error.reason, error.message, str(error)) == (MediaError, MediaReason.TOO_LARGE, "too big", "media_too_large: too big")
