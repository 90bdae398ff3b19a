"""Rows picked by content: digests, identical inputs sharing a row, and a real model whose CPU
kernels round a row by its position."""

from __future__ import annotations

import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from mmverify.models import rows
from mmverify.models.compute_locks import computing, owner_lock
from mmverify.models.rows import RowQueue, Staged, Waiting, compute_now, content_digest, run_rows, same_input, then

SRC = Path(__file__).resolve().parents[2] / "src"


def taken(lock: object) -> bool:
    """Whether some thread holds ``lock`` (asked from another thread: a reentrant lock lets its
    holder take it again)."""
    free: list[bool] = []

    def probe() -> None:
        if lock.acquire(blocking=False):  # type: ignore[attr-defined]
            lock.release()  # type: ignore[attr-defined]
            free.append(True)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return not free


def test_equal_inputs_have_equal_digests_and_type_dtype_and_shape_count():
    rng = np.random.default_rng(0)
    clip = rng.standard_normal(100_000).astype(np.float32)  # large: digested from a sample
    assert content_digest(clip) == content_digest(clip.copy())
    assert content_digest(("text", clip)) == content_digest(("text", clip.copy()))
    assert content_digest(clip) != content_digest(clip.astype(np.float64))
    assert content_digest(clip) != content_digest(clip.reshape(100, 1000))
    assert content_digest(clip[:1000]) != content_digest(clip[:1000] + 1e-3)  # small: every element counts
    assert content_digest(1) != content_digest(True) and content_digest("1") != content_digest(1)
    faded = clip.copy()
    faded[-10:] = 0.0  # the tail is always in the sample
    assert content_digest(faded) != content_digest(clip)


def test_digests_do_not_change_between_processes():
    code = "from mmverify.models.rows import content_digest; import numpy as np; " \
           "print(content_digest(('a prompt', np.arange(50_000, dtype=np.float32), 3, None)))"
    seen = {
        subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(SRC), "PYTHONHASHSEED": seed},
                       capture_output=True, text=True, check=True).stdout
        for seed in ("1", "2")
    }  # fmt: skip
    assert len(seen) == 1 and int(seen.pop()) == content_digest(("a prompt", np.arange(50_000, dtype=np.float32), 3, None))


def test_arrays_of_objects_and_unknown_types_go_to_one_row():
    """Their bytes (addresses) or reprs change from run to run; one fixed row keeps outputs stable."""

    class Opaque:
        pass

    assert content_digest(np.array([Opaque()], dtype=object)) == content_digest(np.array([Opaque()], dtype=object))
    assert content_digest(Opaque()) == content_digest(Opaque())


def test_tensors_digest_by_value_including_half_precision():
    torch = pytest.importorskip("torch")
    values = torch.linspace(0, 1, 40_000)
    assert content_digest(values) == content_digest(values.clone())
    assert content_digest(values) != content_digest(values + 1e-3)
    assert content_digest(values.bfloat16()) == content_digest(values.clone().bfloat16())
    assert content_digest(values.bfloat16()) != content_digest(values)


def test_same_input_is_exact():
    a = np.linspace(0, 1, 10, dtype=np.float32)
    assert same_input(a, a.copy()) and same_input(("x", a), ("x", a.copy()))
    assert not same_input(a, a.astype(np.float64)) and not same_input(a, a[:-1])
    nan = np.array([np.nan])
    assert same_input(nan, nan.copy())  # the same bits: the same input, though NaN equals nothing
    assert not same_input(np.array([0.0]), np.array([-0.0]))  # equal values, other bits
    assert not same_input(1, 1.0) and not same_input("a", "b")
    objects = np.array([None, 1], dtype=object)
    assert not same_input(objects, objects.copy())  # no exact comparison of objects: never merged


def test_inputs_sharing_a_sampled_digest_but_not_their_content_take_separate_batches():
    base = np.zeros(100_000, dtype=np.float32)
    other = base.copy()
    other[1] = 1.0  # between two sampled elements
    assert content_digest(base) == content_digest(other) and not same_input(base, other)
    queue = RowQueue(4)
    for name, item in (("base", base), ("other", other), ("again", base.copy())):
        queue.add(Waiting(item, name, content_digest(item)))
    first, second = queue.layer(), queue.layer()
    assert [[w.receiver for w in row.receivers] for row in first] == [["base", "again"]]
    assert [[w.receiver for w in row.receivers] for row in second] == [["other"]] and queue.count == 0


def test_a_bulk_of_inputs_takes_as_many_batches_as_the_most_inputs_one_row_is_wanted_by():
    """What benchmarks/row_fill.py measures: each batch takes one input per wanted row, so a bulk
    call's batch count is the largest row load, and each batch holds one input of every row left."""
    rng = np.random.default_rng(3)
    for rows, inputs in ((4, 4), (16, 32), (16, 64), (128, 256)):
        values = [int(v) for v in rng.integers(0, 2**62, size=inputs)]
        loads = np.bincount([content_digest(v) % rows for v in set(values)], minlength=rows)
        queue = RowQueue(rows)
        for v in values:
            queue.add(Waiting(v, None, content_digest(v)))
        sizes = [len(layer) for layer in queue.layers()]
        assert len(sizes) == loads.max() and sum(sizes) == len(set(values))
        assert sizes == [int((loads > k).sum()) for k in range(loads.max())]


def test_a_batch_needs_one_to_rows_inputs():
    with pytest.raises(ValueError, match="1..2 inputs"):
        run_rows(lambda batch: batch, [], 2)
    with pytest.raises(RuntimeError, match="gave 1 outputs"):
        run_rows(lambda batch: batch[:1], [(0, "a")], 2)


@pytest.mark.slow
def test_a_wavlm_speaker_embedding_is_the_same_bytes_alone_and_in_any_batch(tmp_path):
    """A narrow two-layer WavLM x-vector on 5 s clips at batch shape 4: some of its CPU kernels
    round a clip differently at row 3 than at row 0 (here, for one clip of eight, before inputs
    took the row their content picks)."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    from mmverify.models.speaker import WavLMSpeaker
    from mmverify.testing.speech_models import build_wavlm_xvector, voiced_clips

    backend = WavLMSpeaker(source=str(build_wavlm_xvector(tmp_path / "wavlm")), device="cpu", batch_size=4)
    clips = voiced_clips(8, 5.0)
    together = backend.embed(clips)
    reversed_order = backend.embed(clips[::-1])[::-1]
    alone = np.stack([backend.embed([clip])[0] for clip in clips])
    assert together.tobytes() == alone.tobytes() == np.asarray(reversed_order).tobytes()


def test_the_digest_format_is_pinned():
    """Rows, and so output bits, follow the digest: a change of format must come with a new
    fingerprint tag (``;row=content``), so this test spells the format out independently."""
    import hashlib

    def blake(*parts: bytes) -> int:
        digest = hashlib.blake2b(digest_size=8)
        for part in parts:
            digest.update(part)
        return int.from_bytes(digest.digest(), "little")

    small = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert content_digest("a bell") == blake(b"str:", b"'a bell'")
    assert content_digest(small) == blake(b"<f4(2, 3)", small.tobytes())
    assert content_digest(("x", 2)) == blake(b"(2", b"str:", b"'x'", b"int:", b"2", b")")
    big = np.arange(100_000, dtype=np.float32)  # 400 kB: a sample every 25th element (odd), and the tail
    sample = np.concatenate([big[::25][:4096], big[-64:]])
    assert content_digest(big) == blake(b"<f4(100000,)", sample.tobytes())


def test_odd_arrays_digest_without_failing_and_by_content():
    words = np.array([f"word {i}" for i in range(1000)], dtype="<U20")  # 80 kB in 1000 elements
    assert content_digest(words) == content_digest(words.copy())
    grid = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert content_digest(np.asfortranarray(grid)) == content_digest(grid) == content_digest(grid.T.copy().T)
    assert content_digest(np.float32(1.5)) == content_digest(np.float32(1.5)) != content_digest(np.float32(2.5))
    red, green = np.zeros((256, 256, 3), dtype=np.uint8), np.zeros((256, 256, 3), dtype=np.uint8)
    red[..., 0], green[..., 1] = 200, 200  # differ in two channels only: the sample sees every channel
    assert content_digest(red) != content_digest(green)


def test_pil_images_digest_by_content():
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 255, (300, 300, 3), dtype=np.uint8)
    image = Image.fromarray(pixels)
    assert content_digest(image) == content_digest(Image.fromarray(pixels.copy()))
    assert content_digest(image) != content_digest(Image.fromarray(255 - pixels))
    assert content_digest(image) != content_digest(image.convert("L"))


# -- staged computations ----------------------------------------------------------------------------
class _Recorder:
    """A staged doubling computation that logs each step and whether its owner's lock was held."""

    def __init__(self, owner: object | None = None) -> None:
        self.log: list[str] = []
        self.owner = owner
        self.batches = 0
        self.locked: dict[str, list[bool]] = {"launch": [], "finish": []}

    def launch(self, batch: list[int]) -> tuple[int, list[int]]:
        self._note("launch")
        number = self.batches
        self.batches += 1
        self.log.append(f"launch {number}")
        return number, [2 * x for x in batch]

    def finish(self, handle: tuple[int, list[int]]) -> list[int]:
        self._note("finish")
        self.log.append(f"finish {handle[0]}")
        return handle[1]

    def _note(self, step: str) -> None:
        if self.owner is not None:
            self.locked[step].append(taken(owner_lock(self.owner)))


def test_a_staged_bulk_call_launches_each_batch_before_it_finishes_the_last():
    recorder = _Recorder()
    inputs = list(range(10))
    staged = compute_now(inputs, Staged(recorder.launch, recorder.finish), 4, by_content=False)
    assert staged == [2 * x for x in inputs]
    # three batches of 4, 4, 2: never more than two started, each finished in order
    assert recorder.log == ["launch 0", "launch 1", "finish 0", "launch 2", "finish 1", "finish 2"]


def test_staged_and_plain_computations_give_the_same_outputs_in_the_same_rows():
    inputs = [f"input {i}" for i in range(23)] + ["input 3"]  # one repeated input shares a row
    seen: dict[str, list[list[str]]] = {"plain": [], "staged": []}

    def compute(kind: str):
        def run(batch: list[str]) -> list[str]:
            seen[kind].append(list(batch))
            return [text.upper() for text in batch]

        return run

    plain = compute_now(inputs, compute("plain"), 4)
    staged = compute_now(inputs, Staged(compute("staged"), lambda outputs: outputs), 4)
    assert staged == plain == [text.upper() for text in inputs]
    assert seen["staged"] == seen["plain"]  # the same batches, rows by content


def test_a_staged_computation_holds_its_owners_lock_for_each_launch_and_not_while_it_waits(monkeypatch):
    owner = object()
    recorder = _Recorder(owner)
    entered = []

    @contextmanager
    def counted(held_owner):
        entered.append(held_owner)
        with computing(held_owner):
            yield

    monkeypatch.setattr(rows, "computing", counted)
    compute_now(list(range(9)), Staged(recorder.launch, recorder.finish), 2, owner=owner, by_content=False)
    assert recorder.log[-1] == "finish 4" and not taken(owner_lock(owner))
    # taken once per launch, so a round's device thread can run its own batch while this one waits
    assert entered == [owner] * 5
    assert recorder.locked == {"launch": [True] * 5, "finish": [False] * 5}


def test_a_failing_launch_fails_the_bulk_call_and_releases_the_lock():
    owner = object()
    recorder = _Recorder(owner)

    def launch(batch: list[int]) -> tuple[int, list[int]]:
        if recorder.batches == 2:
            raise ValueError("bad batch")
        return recorder.launch(batch)

    with pytest.raises(ValueError, match="bad batch"):
        compute_now(list(range(12)), Staged(launch, recorder.finish), 2, owner=owner, by_content=False)
    assert recorder.log == ["launch 0", "launch 1", "finish 0"] and not taken(owner_lock(owner))


def test_then_keeps_a_staged_computation_staged_and_plain_ones_plain():
    recorder = _Recorder()
    staged = then(Staged(recorder.launch, recorder.finish), lambda outputs: [x + 1 for x in outputs])
    assert isinstance(staged, Staged) and list(staged([1, 2])) == [3, 5]
    assert recorder.log == ["launch 0", "finish 0"]
    plain = then(lambda batch: [x * 3 for x in batch], lambda outputs: [x + 1 for x in outputs])
    assert not isinstance(plain, Staged) and list(plain([1, 2])) == [4, 7]
    # a staged computation inside a round is called whole: run_rows picks its slots
    assert run_rows(Staged(recorder.launch, recorder.finish), [(1, 5)], 2) == [10]
