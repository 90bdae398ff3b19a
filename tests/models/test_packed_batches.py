"""Packed bulk calls form each batch just before it launches: the batches a queue of every input
would form, with the host's work on later inputs done while the device runs earlier batches."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mmverify.models.batching import BatchRound, forward
from mmverify.models.clap_hf import HFClap
from mmverify.models.compute_locks import owner_lock
from mmverify.models.rows import Staged, compute_now
from mmverify.testing.tiny_models import build_tiny_clap
from tests.models.test_rows import taken


def expected_batches(inputs: list, rows: int, shape) -> dict:
    """Independent of the scheduler: per shape, its distinct inputs in the order they came, ``rows``
    at a time, in that order (a repeated input is computed with its first)."""
    by_shape: dict = {}
    for value in inputs:
        distinct = by_shape.setdefault(shape(value), [])
        if value not in distinct:
            distinct.append(value)
    return {key: [tuple(d[i : i + rows]) for i in range(0, len(d), rows)] for key, d in by_shape.items()}


class Log:
    """A staged, doubling model that logs preparing, launching and finishing, and keeps its batches."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.batches: list[list] = []

    def prepare(self, value: int) -> int:
        self.steps.append(f"prepare {value}")
        return value

    def launch(self, batch: list) -> tuple[int, list]:
        self.steps.append(f"launch {len(self.batches)}")
        self.batches.append(list(batch))
        return len(self.batches) - 1, [[2 * x] for x in batch]  # a mutable output per row

    def finish(self, handle: tuple[int, list]) -> list:
        self.steps.append(f"finish {handle[0]}")
        return handle[1]

    def placed(self) -> list[tuple]:
        """The batches without their padding (copies of a batch's first input after its last row)."""
        return [tuple(dict.fromkeys(batch)) for batch in self.batches]

    def by_shape(self, shape) -> dict:
        """The batches of each shape, in the order they launched."""
        grouped: dict = {}
        for batch in self.placed():
            grouped.setdefault(shape(batch[0]), []).append(batch)
        return grouped


@pytest.mark.parametrize("staged", [True, False])
def test_packed_batches_are_those_of_a_queue_of_every_input_on_seeded_random_cases(staged):
    rng = np.random.default_rng(11)
    for _ in range(60):
        inputs = [int(x) for x in rng.integers(0, 25, size=int(rng.integers(1, 40)))]  # repeats, several shapes
        rows, shapes = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        log = Log()
        compute = Staged(log.launch, log.finish) if staged else (lambda batch, log=log: log.finish(log.launch(batch)))
        outputs = compute_now(inputs, compute, rows, shape=lambda x, n=shapes: x % n, by_content=False, prepare=log.prepare)
        assert outputs == [[2 * x] for x in inputs]
        assert log.by_shape(lambda x, n=shapes: x % n) == expected_batches(inputs, rows, lambda x, n=shapes: x % n)
        assert all(len(batch) == rows for batch in log.batches)


def test_each_batch_launches_before_the_inputs_of_the_next_are_prepared():
    log = Log()
    compute_now(list(range(10)), Staged(log.launch, log.finish), 4, by_content=False, prepare=log.prepare)
    assert log.steps == [
        "prepare 0", "prepare 1", "prepare 2", "prepare 3", "launch 0",
        "prepare 4", "prepare 5", "prepare 6", "prepare 7", "launch 1", "finish 0",
        "prepare 8", "prepare 9", "launch 2", "finish 1", "finish 2",
    ]  # fmt: skip


def test_rows_by_content_prepare_every_input_first_and_give_what_preparing_beforehand_gives():
    log = Log()
    inputs = [7, 3, 7, 12, 5, 3]
    outputs = compute_now(inputs, Staged(log.launch, log.finish), 2, prepare=log.prepare)
    assert log.steps[: len(inputs)] == [f"prepare {x}" for x in inputs]
    again = Log()
    assert outputs == compute_now(inputs, Staged(again.launch, again.finish), 2) == [[2 * x] for x in inputs]
    assert log.batches == again.batches


def test_an_input_repeating_one_whose_batch_already_finished_gets_its_own_copy_of_that_output():
    log = Log()
    outputs = compute_now([1, 2, 3, 4, 5, 6, 1], Staged(log.launch, log.finish), 2, by_content=False, prepare=log.prepare)
    assert outputs == [[2], [4], [6], [8], [10], [12], [2]]
    assert log.steps.index("finish 0") < log.steps.index("prepare 1", 1)  # 1's batch was done when it came again
    assert log.batches == [[1, 2], [3, 4], [5, 6]]  # computed once, no batch of its own
    assert outputs[0] is not outputs[6]


def test_an_input_that_cannot_be_prepared_fails_the_call_after_the_batches_before_it_and_frees_the_lock():
    owner, log = object(), Log()

    def prepare(value: int) -> int:
        if value == 6:
            raise ValueError("waveform contains NaN or infinite samples")
        return log.prepare(value)

    with pytest.raises(ValueError, match="NaN"):
        compute_now(list(range(10)), Staged(log.launch, log.finish), 2, owner=owner, by_content=False, prepare=prepare)
    assert log.steps[-2:] == ["launch 2", "finish 1"] and "prepare 6" not in log.steps
    assert not taken(owner_lock(owner))


def test_in_a_round_inputs_are_prepared_by_the_member_and_its_errors_are_its_own():
    log, owner, results = Log(), object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(2)

    def prepare(value: int) -> int:
        if value < 0:
            raise ValueError("cannot prepare")
        return log.prepare(value) + 100

    def member(name: str, values: list[int]) -> None:
        with batch_round.member():
            start.wait()
            try:
                results[name] = forward(owner, "double", values, Staged(log.launch, log.finish), 4, by_content=False, prepare=prepare)
            except ValueError as exc:
                results[name] = exc

    threads = [threading.Thread(target=member, args=args) for args in (("good", [1, 2]), ("bad", [3, -1]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "the round never answered"
    batch_round.close()
    assert results["good"] == [[202], [204]] and isinstance(results["bad"], ValueError)
    assert log.placed() == [(101, 102)]  # the bad member's inputs never reached the model


@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory):
    return build_tiny_clap(tmp_path_factory.mktemp("tiny-clap"))


def test_a_packed_clap_bulk_call_prepares_as_it_goes_and_embeds_what_preparing_first_does(tiny_clap, tmp_path):
    from mmverify.models.cache import OutputCache

    rng = np.random.default_rng(3)
    clips = [(0.3 * rng.standard_normal(int(rng.integers(100, 2 * 48_000)))).astype(np.float32) for _ in range(9)]
    clips.append(clips[2].copy())
    streamed = HFClap(source=str(tiny_clap), batch_size=4, rows="packed")  # no cache: prepared batch by batch
    cached = HFClap(source=str(tiny_clap), batch_size=4, rows="packed", cache=OutputCache(tmp_path / "cache.sqlite"))
    launched: list[int] = []
    launch = streamed._launch_audio
    streamed._launch_audio = lambda batch, padding: launched.append(len(batch)) or launch(batch, padding)
    prepared: list[int] = []
    one = streamed._prepared
    streamed._prepared = lambda clip, *args: prepared.append(len(launched)) or one(clip, *args)
    for padding in ("zero", "repeat"):
        launched.clear(), prepared.clear()
        rows = streamed.embed_audio(clips, padding=padding)
        assert rows.tobytes() == cached.embed_audio(clips, padding=padding).tobytes()
        assert launched == [4, 4, 4] and prepared == [0] * 4 + [1] * 4 + [2] * 2  # nine clips, one repeated
    bad = [*clips[:7], np.full(100, np.nan, dtype=np.float32)]
    with pytest.raises(ValueError, match="NaN"):
        streamed.embed_audio(bad)
