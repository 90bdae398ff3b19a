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

from mmverify.core import decoding
from mmverify.core.decoding import INLINE, DecodePool
from mmverify.core.media import MediaError, MediaLimits, MediaReason
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout
from tests.waiting import wait_until


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
    return (array.tobytes(), array.dtype.str, array.shape, array.flags.c_contiguous, array.flags.writeable, rate)


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
        ("image", (tmp_path / "absent.png",)), ("audio", (tmp_path,)), ("image", (".",)),
    ]  # fmt: skip
    for kind, args in cases:
        here, there = _outcome(getattr(INLINE, kind), *args), _outcome(getattr(pool, kind), *args)
        assert there == here, (kind, args)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # a working folder deleted under the caller: relative paths name nothing, in either place
    assert _outcome(pool.audio, "clip.wav") == _outcome(INLINE.audio, "clip.wav")
    assert _outcome(pool.audio, tmp_path / "clip.wav") == _outcome(INLINE.audio, tmp_path / "clip.wav")
    reasons = {_outcome(INLINE.audio, tmp_path / "clip.wav", None, small)[1], _outcome(INLINE.audio, "absent.wav")[1]}
    assert reasons == {MediaReason.TOO_LARGE, MediaReason.MISSING}  # the cases above do reach the errors


def _as_audio(clip) -> tuple:
    return clip.samples, clip.rate


def _resamplings(clip) -> dict:
    """``_outcome`` of the whole clip at each of a few rates (the clip's own included)."""
    return {rate: _outcome(lambda: (clip.whole_at(rate), None)) for rate in (8_000, 16_000, 22_050, 44_100, 48_000)}


def test_whole_clips_resampled_in_a_process_are_the_bytes_resampling_here_gives(pool):
    """The rates asked for at decoding are made in the worker (and shipped with the clip); every
    rate, asked for or not, gives the bytes resampling the decoded clip here gives."""
    rng = np.random.default_rng(11)
    rates = [8_000, 16_000, 22_050, 44_100, 48_000]
    for case in range(24):
        native = int(rng.choice(rates))
        data = _wav(float(rng.choice([1 / native, 0.05, 0.7, 1.3])), native, channels=int(rng.integers(1, 3)), seed=case)
        sample_rate = None if case % 3 == 0 else int(rng.choice(rates))
        whole_at = tuple(int(rate) for rate in rng.choice(rates, size=int(rng.integers(0, 3)), replace=False))
        here, there = INLINE.clip(data, sample_rate, whole_at=whole_at), pool.clip(data, sample_rate, whole_at=whole_at)
        assert _outcome(lambda: _as_audio(there)) == _outcome(lambda: _as_audio(here)), case
        assert _resamplings(there) == _resamplings(here), case
        assert set(there.resampled) == {rate for rate in whole_at if rate != there.rate}, case  # made there, and only those
        assert not here.resampled  # here they are made when asked for
    for name, data in AUDIO.items():  # refusals are those of decoding alone
        assert _outcome(lambda: _as_audio(pool.clip(data, 22_050, whole_at=(48_000,)))) == _outcome(INLINE.audio, data, 22_050), name


def test_parts_resampled_in_a_process_are_the_bytes_resampling_here_gives(pool, monkeypatch):
    """Signals sent to a worker come back as resampling them here makes them; a failure there is
    met here, as resampling here always met it."""
    rng = np.random.default_rng(5)
    rates = [8_000, 16_000, 22_050, 44_100, 48_000]
    cases = []
    for case in range(16):
        dtype = np.float32 if case % 4 else np.float64
        signals = [rng.standard_normal(int(n)).astype(dtype) for n in rng.choice([1, 7, 2_205, 30_001], size=int(rng.integers(0, 4)))]
        cases.append((signals, int(rng.choice(rates)), int(rng.choice(rates))))
    assert sum(bool(signals) and rate != target for signals, rate, target in cases) >= 8  # cases that reach a worker
    expected = [[_outcome(lambda: (made, None)) for made in INLINE.resample(*case)] for case in cases]
    # resampling in this process fails from here on: what comes back was made in a worker
    monkeypatch.setattr(decoding, "resample", lambda *args: pytest.fail("resampled in the calling process"))
    for case, wanted in zip(cases, expected):
        if case[1] != case[2] and case[0]:
            assert [_outcome(lambda: (made, None)) for made in pool.resample(*case)] == wanted, case[1:]
    monkeypatch.undo()
    signal = np.ones(10, np.float32)
    with pytest.raises(ValueError) as here:  # a rate of 0: resample_poly refuses it
        INLINE.resample([signal], 0, 48_000)
    with pytest.raises(ValueError) as there:
        pool.resample([signal], 0, 48_000)
    assert str(there.value) == str(here.value)


def _within_a_minute(decode, *args) -> tuple:
    """``_outcome`` of a decode that must not block (a hang fails the test instead of stalling it)."""
    done: list = []
    thread = threading.Thread(target=lambda: done.append(_outcome(decode, *args)), daemon=True)
    thread.start()
    thread.join(60)
    assert done, f"decoding {args} blocked"
    return done[0]


def test_what_is_not_a_readable_regular_file_is_missing_media_in_either_place(pool, tmp_path):
    fifo = tmp_path / "pipe.wav"
    os.mkfifo(fifo)  # nobody writes it: reading it as a file would wait for ever
    (tmp_path / "clip.wav").write_bytes(AUDIO["wav 44.1 kHz"])
    sources = [fifo, "/dev/zero", tmp_path / "clip.wav" / "inside.wav", tmp_path / ("x" * 300 + ".wav"), f"{tmp_path}/nul\0.wav", tmp_path]
    for source in sources:
        here, there = _within_a_minute(INLINE.audio, source), _within_a_minute(pool.audio, source)
        assert here == there and here[:2] == ("MediaError", MediaReason.MISSING), (source, here, there)
    assert "not a regular file" in _outcome(INLINE.audio, fifo)[2]


def test_a_worker_whose_own_folder_was_removed_still_decodes_in_the_caller_s(tmp_path, monkeypatch):
    (tmp_path / "first").mkdir()
    (tmp_path / "first" / "clip.wav").write_bytes(AUDIO["wav 44.1 kHz"])
    (tmp_path / "second").mkdir()
    (tmp_path / "second" / "clip.wav").write_bytes(AUDIO["flac 16 kHz"])
    with DecodePool(1) as solo:
        monkeypatch.chdir(tmp_path / "first")
        assert _outcome(solo.audio, "clip.wav") == _outcome(INLINE.audio, "clip.wav")  # the worker is in "first" now
        monkeypatch.chdir(tmp_path / "second")
        (tmp_path / "first" / "clip.wav").unlink()
        (tmp_path / "first").rmdir()
        assert _outcome(solo.audio, "clip.wav") == _outcome(INLINE.audio, "clip.wav")
        assert _outcome(INLINE.audio, "clip.wav")[0] != "MediaError"


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


def _processes(pool: DecodePool) -> list:
    return [worker.process for worker in pool._workers]


# Media reading refuses named pipes (a blocking open no deadline interrupts).  These tests need a
# decode that stays inside its worker for as long as they like: their workers read pipes as files.
_PIPES_AS_FILES = "import os, types, mmverify.core.media as m; m._OPEN_FLAGS = os.O_RDONLY; m.stat = types.SimpleNamespace(S_ISREG=bool); "


@pytest.fixture
def pipes_as_files(monkeypatch: pytest.MonkeyPatch) -> None:
    anchor = "from mmverify.core.decode_worker import main"
    assert anchor in decoding.BOOTSTRAP
    monkeypatch.setattr(decoding, "BOOTSTRAP", decoding.BOOTSTRAP.replace(anchor, _PIPES_AS_FILES + anchor))


def _decoding_a_fifo(pool: DecodePool, fifo: Path) -> tuple[threading.Thread, dict, int]:
    """Start decoding ``fifo`` in a thread and return once the worker is inside the decode: the
    test holds the FIFO's write end open and writes nothing, so the worker waits in its read."""
    outcome: dict = {}

    def decode() -> None:
        try:
            outcome["result"] = pool.audio(fifo)
        except BaseException as exc:  # noqa: BLE001
            outcome["error"] = exc

    thread = threading.Thread(target=decode)
    thread.start()

    def writer() -> int | None:
        try:  # succeeds once a reader has the FIFO open: the worker is reading it
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None

    return thread, outcome, wait_until(writer, message="the worker never opened the FIFO")


@pytest.mark.parametrize(
    "ending, blamed",
    [(signal.SIGKILL, True), (signal.SIGTERM, False)],  # a crash or a kill for memory; a service stopping
)
def test_a_worker_that_dies_while_decoding_fails_only_its_own_input(tmp_path, pipes_as_files, ending, blamed):
    fifo = tmp_path / "held"
    os.mkfifo(fifo)
    with DecodePool(1) as solo:
        thread, outcome, writer = _decoding_a_fifo(solo, fifo)
        [process] = _processes(solo)
        process.send_signal(ending)
        thread.join()
        os.close(writer)
        error = outcome["error"]
        assert f"signal {int(ending)}" in str(error)
        if blamed:  # the input's own: undecodable media
            assert isinstance(error, MediaError) and error.reason == MediaReason.UNDECODABLE
        else:  # not the input's doing: an error of the run, not a fault of the generation
            assert type(error) is RuntimeError
        assert _outcome(solo.audio, AUDIO["flac 16 kHz"], 48_000) == _outcome(INLINE.audio, AUDIO["flac 16 kHz"], 48_000)


def test_a_worker_that_died_between_requests_is_replaced_unseen():
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])
        [process] = _processes(solo)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert _outcome(solo.audio, AUDIO["wav 44.1 kHz"], 48_000) == _outcome(INLINE.audio, AUDIO["wav 44.1 kHz"], 48_000)
        assert _processes(solo)[0].pid != process.pid


def test_a_deadline_ends_a_hung_decode_and_its_worker(tmp_path, pipes_as_files):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)  # reading it blocks until a writer comes: the decode hangs for good
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])
        [process] = _processes(solo)
        with pytest.raises(ItemTimeout):
            with deadline(0.2):
                solo.audio(fifo)
        wait_until(lambda: process.poll() is not None, message="the hung worker was not ended")
        assert _outcome(solo.audio, AUDIO["stereo 22.05 kHz"]) == _outcome(INLINE.audio, AUDIO["stereo 22.05 kHz"])


def test_deadlines_while_waiting_for_a_worker_leave_the_pool_whole():
    """Many items, one worker, deadlines firing while they wait for it or while it decodes theirs:
    afterwards the pool still decodes, with a worker of its own count."""
    long_clip = _wav(20.0, 44_100)
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])

        def impatient(seconds: float) -> None:
            try:
                with deadline(seconds):
                    solo.audio(long_clip, 48_000)
            except ItemTimeout:
                pass

        threads = [threading.Thread(target=impatient, args=(0.005 * (1 + i % 8),)) for i in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert _outcome(solo.audio, AUDIO["wav 44.1 kHz"], 48_000) == _outcome(INLINE.audio, AUDIO["wav 44.1 kHz"], 48_000)
        assert len(_processes(solo)) == 1


@pytest.mark.parametrize("cut", ["after its reply", "while it waits for its reply"])
def test_a_decode_cut_short_while_giving_its_worker_back_keeps_nobody_waiting(monkeypatch, cut):
    """A deadline can land inside the giving back, and a caller can keep the timeout (and with it
    the decode's frame and its claim on the worker) as long as it likes: the next decode still
    gets a worker -- the same one after a finished reply, a fresh one after a cut request."""
    from mmverify.core import decoding

    kept: list[BaseException] = []
    with DecodePool(1) as solo:
        solo.audio(AUDIO["wav 44.1 kHz"])
        first = _processes(solo)
        give_back, reply = DecodePool._give_back, decoding._Worker.reply
        cuts = {"give back": 1, "reply": 1 if cut == "while it waits for its reply" else 0}

        def cut_short(name: str, real):
            def step(*args):
                if cuts[name]:
                    cuts[name] -= 1
                    raise ItemTimeout()  # where a deadline may land
                return real(*args)

            return step

        monkeypatch.setattr(DecodePool, "_give_back", cut_short("give back", give_back))
        monkeypatch.setattr(decoding._Worker, "reply", cut_short("reply", reply))
        try:
            solo.audio(AUDIO["wav 44.1 kHz"])
        except ItemTimeout as exc:
            kept.append(exc)  # its traceback keeps the decode's frame, and its token, alive
        outcome: dict = {}
        thread = threading.Thread(target=lambda: outcome.update(got=_outcome(solo.audio, AUDIO["wav 44.1 kHz"], 48_000)), daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "the next decode waited for a worker that nobody uses any more"
        assert kept and outcome["got"] == _outcome(INLINE.audio, AUDIO["wav 44.1 kHz"], 48_000)
        replaced = _processes(solo) != first
        assert replaced == (cut == "while it waits for its reply") and len(_processes(solo)) == 1


def test_a_worker_that_cannot_start_is_an_error_not_a_bad_input(monkeypatch):
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("no-such-python")))
    with DecodePool(1) as solo:
        with pytest.raises(Exception) as failed:
            solo.audio(AUDIO["wav 44.1 kHz"])
        assert isinstance(failed.value, (RuntimeError, OSError)) and not isinstance(failed.value, MediaError)


def test_resampling_where_no_worker_can_start_is_done_here(monkeypatch):
    """Resampling is no input's fault: where workers cannot start (an OSError from the process
    start), the signals are resampled in the calling thread."""
    signal = np.random.default_rng(2).standard_normal(3_001).astype(np.float32)
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("no-such-python")))
    with DecodePool(1) as solo:
        [made] = solo.resample([signal], 22_050, 48_000)
    assert _outcome(lambda: (made, None)) == _outcome(lambda: (INLINE.resample([signal], 22_050, 48_000)[0], None))


def test_a_python_that_exits_at_once_is_a_failed_start(monkeypatch, tmp_path):
    quits = tmp_path / "quits"
    quits.write_text("#!/bin/sh\nexit 3\n")
    quits.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(quits))
    with DecodePool(1) as solo:
        with pytest.raises(RuntimeError, match="failed to start .*exit status 3"):
            solo.audio(AUDIO["wav 44.1 kHz"])


def test_what_a_worker_prints_or_finds_in_the_callers_folder_changes_nothing(tmp_path, monkeypatch):
    noisy = tmp_path / "site"
    noisy.mkdir()
    (noisy / "sitecustomize.py").write_text("print('hello from start-up')\n")  # would land in a stdout protocol
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "json.py").write_text("raise ImportError('a json.py of the user')\n")  # would shadow the standard library
    (folder / "clip.wav").write_bytes(AUDIO["wav 44.1 kHz"])
    monkeypatch.setenv("PYTHONPATH", str(noisy))
    monkeypatch.chdir(folder)
    with DecodePool(1) as solo:
        assert _outcome(solo.audio, "clip.wav", 48_000) == _outcome(INLINE.audio, AUDIO["wav 44.1 kHz"], 48_000)


def test_a_forked_child_decodes_with_workers_of_its_own(pool):
    import warnings

    pool.audio(AUDIO["wav 44.1 kHz"])  # the parent's workers are running
    expected = _outcome(INLINE.audio, AUDIO["flac 16 kHz"], 48_000)
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking beside threads: the child only decodes
        child = os.fork()
    if child == 0:
        try:
            os.write(write, b"same" if _outcome(pool.audio, AUDIO["flac 16 kHz"], 48_000) == expected else b"differ")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        said = answer.read()
    os.waitpid(child, 0)
    assert said == b"same"
    assert _outcome(pool.audio, AUDIO["flac 16 kHz"], 48_000) == expected  # the parent's pool is untouched


def test_a_closed_pool_refuses_work_and_a_pickled_one_starts_afresh(pool):
    copy = pickle.loads(pickle.dumps(pool))
    assert copy.processes == pool.processes and not _processes(copy)
    assert _outcome(copy.image, IMAGES["rgb png"]) == _outcome(INLINE.image, IMAGES["rgb png"])
    copy.close()
    with pytest.raises(RuntimeError, match="closed"):
        copy.image(IMAGES["rgb png"])
    with pytest.raises(ValueError):
        DecodePool(0)


def test_media_errors_pickle_with_their_reason_and_message():
    error = pickle.loads(pickle.dumps(MediaError(MediaReason.TOO_LARGE, "too big")))
    assert (type(error), error.reason, error.message, str(error)) == (MediaError, MediaReason.TOO_LARGE, "too big", "media_too_large: too big")
