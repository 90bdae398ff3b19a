"""The worker side of the ordered pool (:mod:`.pool`): what runs inside a worker process or Ray actor.

A worker receives a batch of items -- one item, or up to ``in_flight`` items whose tasks call models
-- and reports on it with events:

* ``("warming", seq)``: the first use of a task new to this worker begins on item ``seq``, under
  the warm-up budget (see :mod:`.execute`);
* ``("started",)``: every task of the batch is warm; the items' own clocks start;
* ``("rows", [(seq, row), ...], reports)``: finished rows, with what :class:`ProblemForwarder`
  collected since the last report (cache problems, judge usage).

Items of a batch are scored together (:func:`~.batch.score_together`), so their model calls share
batches, each with its own deadline inside the worker: a slow item becomes a ``timeout`` row without
costing its neighbours.
"""

from __future__ import annotations

import os
import signal
from multiprocessing.connection import Connection
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..models.cache import cache_problems, record_cache_problem, set_cache_problem_logging
from ..models.judge_usage import UsageForwarder, merge_usage
from ..models.served import MODEL_PROCESS_STUCK, waiting_on_model_process
from ..core.decoding import INLINE, DecodePool, Decoder
from ..core.errors import ErrorCode
from ..core.exits import freeze_for_exit
from ..core.stacks import dump_stacks_on_sigusr1
from .execute import fits, is_warm, score_locally, warm_up
from .plan import WorkItem

Initializer = Callable[..., None]
Event = tuple[Any, ...]
Batch = list[tuple[int, WorkItem]]  # (plan position, item)
STUCK_EXIT_CODE = 75  # a worker whose backend is stuck in a computation ends itself with this code
USAGE_REPORT = "judge_usage"  # the key of a report carrying judge usage; other reports are cache problems


class ProblemForwarder:
    """In a worker process: what the parent should know besides the rows, sent with each row --
    cache problems (the parent logs each once) and the change in judge usage since the last row
    (the parent adds it to its own counters, so the run summary counts every worker's requests)."""

    def __init__(self) -> None:
        set_cache_problem_logging(False)
        self.sent = 0
        self.usage = UsageForwarder()

    def new(self) -> list[dict[str, Any]]:
        problems = cache_problems()[self.sent :]
        self.sent += len(problems)
        usage = self.usage.new()
        return problems + ([{USAGE_REPORT: usage}] if usage else [])


def receive_report(report: Mapping[str, Any]) -> None:
    """In the parent: take in one report a worker forwarded with a row."""
    if USAGE_REPORT in report:
        merge_usage(report[USAGE_REPORT])
    else:  # a problem a worker met with its caches, recorded and logged here once
        record_cache_problem(report)


def first_use(item: WorkItem, timeout: float | None) -> dict[str, Any] | None:
    """Warm up on the item when its task is new to this process; its row when that fits ``timeout``."""
    if is_warm(item):
        return None
    row, seconds = warm_up(item)
    return row if fits(seconds, timeout) else None


def cold_items(batch: Batch, is_cold: Callable[[WorkItem], bool]) -> Batch:
    """The first item of each task in ``batch`` that ``is_cold`` says this worker has not used."""
    seen: set[tuple[str, str]] = set()
    firsts = []
    for seq, item in batch:
        task = (item.task, item.profile)
        if task not in seen and is_cold(item):
            firsts.append((seq, item))
        seen.add(task)
    return firsts


def score_warm(items: Sequence[WorkItem], timeout: float | None, decoder: Decoder = INLINE) -> Iterator[dict[str, Any]]:
    """Rows of items whose tasks are warm, in order, each under its own deadline in this process
    (the pool's kill stays the backstop for hangs in native code); several items are scored
    together, their model calls batched and their media decoded by ``decoder``."""

    def alone(item: WorkItem) -> dict[str, Any]:
        return score_locally(item, timeout, warmup_timeout=None)

    if len(items) == 1:
        yield alone(items[0])
        return
    from ..models.compute_locks import computations_running
    from .batch import score_together

    held: list[dict[str, Any]] = []  # timeout rows, and the rows behind them (rows go out in order)
    for row in score_together(items, alone, in_flight=len(items), timeout=timeout, decoder=decoder):
        if held or row.get("error", {}) and row["error"].get("code") == ErrorCode.TIMEOUT:
            held.append(row)
        else:
            yield row
    if held and computations_running():
        # A computation outlived every item that asked for it: this process's backend is stuck (a
        # hang in native code) and would time out every later item.  The process ends; the pool
        # scores the held items again one by one in fresh workers, so only the one at fault times out.
        # Where the computation is a batch in the model process, every worker shares the hang: the
        # parent ends the run instead (see .process_executor).
        os._exit(MODEL_PROCESS_STUCK if waiting_on_model_process() else STUCK_EXIT_CODE)
    yield from held


def score_batch(batch: Batch, timeout: float | None, forwarder: ProblemForwarder, decoder: Decoder = INLINE) -> Iterator[Event]:
    """The events of one batch in a worker process (see the module docstring)."""
    pending = dict(batch)
    for seq, item in cold_items(batch, lambda item: not is_warm(item)):
        yield ("warming", seq)
        row = first_use(item, timeout)
        if row is not None:
            del pending[seq]
            yield ("rows", [(seq, row)], forwarder.new())
    if not pending:  # every item was its task's first use, and every row fitted
        return
    yield ("started",)
    for seq, row in zip(pending, score_warm(list(pending.values()), timeout, decoder)):
        yield ("rows", [(seq, row)], forwarder.new())


def process_main(
    conn: Connection, timeout: float | None, initializer: Initializer | None, initargs: Sequence[Any], decode_processes: int = 0
) -> None:
    """A worker process: score each batch the parent sends until it sends None or goes away; with
    ``decode_processes``, the media of the items it scores together are decoded in that many
    processes of its own (started as needed; they end with it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    dump_stacks_on_sigusr1()  # as in the parent: kill -USR1 shows this worker's stacks
    forwarder = ProblemForwarder()
    if initializer is not None:
        initializer(*initargs)
    decoder: Decoder = DecodePool(decode_processes) if decode_processes else INLINE
    try:
        while True:
            try:
                batch = conn.recv()
                if batch is None:
                    return
                for event in score_batch(batch, timeout, forwarder, decoder):
                    conn.send(event)
            except (EOFError, BrokenPipeError, ConnectionResetError):
                return  # the parent went away (it stopped, or was stopped): nothing is left to report to
    finally:
        if isinstance(decoder, DecodePool):
            decoder.close()
        freeze_for_exit()  # the parent waits for this process's end
