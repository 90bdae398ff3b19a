"""An ordered pool of killable workers: the loop shared by the process and Ray executors.

Items go to idle workers; finished rows wait in a reorder buffer and leave in plan order.  A worker
whose item passes its deadline is killed and replaced (``timeout`` row); one that dies mid-item is
replaced too (``worker_crashed`` row).  Intake pauses while ``max_pending`` rows wait for an
earlier, slower item, which bounds memory.

Two clocks: an item handed to a worker that has not used its task yet runs first under the warm-up
budget (worker start-up, task import and build, the first use's lazy imports and model loading;
``warmup_timeout`` row when it runs out).  The item's own clock starts only when the worker reports
that the item itself started (see :mod:`.execute`).
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from ..core.errors import ErrorCode
from ..models.cache import cache_problems, record_cache_problem, set_cache_problem_logging
from ..models.judge_usage import UsageForwarder, merge_usage
from .execute import (
    DEFAULT_WARMUP_TIMEOUT,
    Planned,
    error_row,
    fits,
    is_warm,
    score_item,
    timeout_row,
    warm_up,
    warmup_timeout_row,
)
from .plan import WorkItem

Initializer = Callable[..., None]
# what a worker reports: ("started",) when the item's own clock starts, then ("done", row, reports),
# where reports are what :class:`ProblemForwarder` collected (cache problems, judge usage)
Event = tuple[Any, ...]
USAGE_REPORT = "judge_usage"  # the key of a report carrying judge usage; other reports are cache problems


@dataclass
class Job:
    seq: int
    item: WorkItem
    deadline: float  # monotonic seconds
    started: bool  # False while the worker warms up; True once the item's own clock runs


class WorkerDied(Exception):
    pass


class PoolWorker(Protocol):
    job: Job | None

    def submit(self, seq: int, item: WorkItem) -> bool: ...  # True: the item started at once

    def receive(self) -> Event: ...  # raises WorkerDied

    def kill(self) -> None: ...

    def stop(self) -> None: ...


def _deadline(limit: float | None) -> float:
    return time.monotonic() + limit if limit else float("inf")


@dataclass
class OrderedPool:
    make_worker: Callable[[], PoolWorker]
    wait_ready: Callable[[list[PoolWorker], float | None], list[PoolWorker]]
    workers: int = 2
    timeout: float | None = None
    max_pending: int = 256
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        pool = [self.make_worker() for _ in range(self.workers)]
        source = iter(planned)
        done: dict[int, dict[str, Any]] = {}
        next_out = next_in = 0
        exhausted = False
        try:
            while True:
                # intake: immediate rows go straight to the reorder buffer, items to idle workers
                while not exhausted and len(done) < self.max_pending and any(w.job is None for w in pool):
                    entry = next(source, None)
                    if entry is None:
                        exhausted = True
                        break
                    seq, next_in = next_in, next_in + 1
                    if isinstance(entry, dict):
                        done[seq] = entry
                        continue
                    worker = next(w for w in pool if w.job is None)
                    started = worker.submit(seq, entry)
                    worker.job = Job(seq, entry, _deadline(self.timeout if started else self.warmup_timeout), started)
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                busy = [w for w in pool if w.job is not None]
                if not busy:
                    if exhausted:
                        break
                    continue
                nearest = min(w.job.deadline for w in busy)  # type: ignore[union-attr]
                wait_for = None if nearest == float("inf") else max(0.0, nearest - time.monotonic())
                ready = self.wait_ready(busy, wait_for)
                for index, worker in enumerate(pool):
                    if worker.job is None:
                        continue
                    row, replace = self._step(worker, worker in ready)
                    if row is not None:
                        done[worker.job.seq] = row
                        worker.job = None
                    if replace:
                        worker.kill()
                        pool[index] = self.make_worker()
        finally:
            for worker in pool:
                worker.stop()

    def _step(self, worker: PoolWorker, ready: bool) -> tuple[dict[str, Any] | None, bool]:
        """Advance one busy worker: its finished row (or None) and whether to replace it."""
        job = worker.job
        assert job is not None
        if ready:
            try:
                event = worker.receive()
            except WorkerDied:
                return error_row(job.item, ErrorCode.WORKER_CRASHED, "the worker died while scoring this item"), True
            if event[0] == "started":
                job.started, job.deadline = True, _deadline(self.timeout)
                return None, False
            _done, row, reports = event
            for report in reports:
                receive_report(report)
            return row, False
        if time.monotonic() < job.deadline:
            return None, False
        if job.started:
            return timeout_row(job.item, self.timeout), True
        return warmup_timeout_row(job.item, self.warmup_timeout), True


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


def _process_main(conn: Connection, timeout: float | None, initializer: Initializer | None, initargs: Sequence[Any]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    forwarder = ProblemForwarder()
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        seq, item = message
        row = first_use(item, timeout)
        conn.send(("started",))
        if row is None:
            row = score_item(item)
        conn.send(("done", row, forwarder.new()))


class ProcessWorker:
    def __init__(
        self, context: Any, timeout: float | None = None, initializer: Initializer | None = None, initargs: Sequence[Any] = ()
    ) -> None:
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_process_main, args=(child, timeout, initializer, tuple(initargs)), daemon=True)
        self.process.start()
        child.close()
        self.job: Job | None = None

    def submit(self, seq: int, item: WorkItem) -> bool:
        try:
            self.conn.send((seq, item))
        except OSError:  # the worker is gone: receive() reports it
            pass
        return False  # the worker says when the item itself starts

    def receive(self) -> Event:
        try:
            return self.conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            raise WorkerDied() from None

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


def _wait_pipes(workers: list[PoolWorker], timeout: float | None) -> list[PoolWorker]:
    by_conn = {w.conn: w for w in workers}  # type: ignore[attr-defined]
    return [by_conn[c] for c in wait(list(by_conn), timeout=timeout)]


@dataclass
class ProcessExecutor:
    """``--workers N``: N spawned worker processes.

    ``warmup_timeout`` bounds worker start-up and each task's first use in a worker (``None``: no
    bound); ``initializer(*initargs)`` runs once in every worker before its first item.
    """

    workers: int = 2
    timeout: float | None = None
    max_pending: int = 256
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT
    initializer: Initializer | None = None
    initargs: Sequence[Any] = ()

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        context = multiprocessing.get_context("spawn")

        def make_worker() -> ProcessWorker:
            return ProcessWorker(context, self.timeout, self.initializer, self.initargs)

        pool = OrderedPool(make_worker, _wait_pipes, self.workers, self.timeout, self.max_pending, self.warmup_timeout)
        return pool.run(planned)
