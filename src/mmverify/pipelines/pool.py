"""An ordered pool of killable workers: the loop shared by the process and Ray executors.

Items go to idle workers in batches: up to ``in_flight`` consecutive items whose tasks call models
go to one worker together, which scores them with their model calls batched (see
:mod:`.pool_worker`); any other item goes alone.  Finished rows wait in a reorder buffer and leave
in plan order.  Intake pauses while ``max_pending`` rows wait for an earlier, slower item, which
bounds memory.  By default that is a few batches of every worker (:func:`pending_bound`): a bound
of one batch would idle every worker whenever one batch lags behind the next.

Failures cost only the item that caused them:

* a lone item past its deadline has its worker killed and replaced (``timeout`` row); one whose
  worker dies gets a ``worker_crashed`` row;
* items of a batch each have their own deadline inside the worker.  When the worker still has to be
  killed (a batch past three times the item limit: a hang inside native code) or dies, the rows it
  already sent are kept and its unfinished items are scored again one by one, so that the item at
  fault gets its ``timeout`` or ``worker_crashed`` row and its neighbours are scored as usual.

Two clocks: a batch handed to a worker that has not used one of its tasks yet first runs that
task's first item under the warm-up budget (worker start-up, task import and build, the first use's
lazy imports and model loading; ``warmup_timeout`` row when it runs out).  The items' own clocks
start only when the worker reports that every task is warm (see :mod:`.execute`).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from ..core.errors import ErrorCode
from .execute import DEFAULT_WARMUP_TIMEOUT, Planned, error_row, timeout_row, uses_models, warmup_timeout_row
from .plan import WorkItem
from .pool_worker import Batch, Event, receive_report

Row = dict[str, Any]


@dataclass
class Job:
    """A batch on a worker: the items still waiting for their rows."""

    items: dict[int, WorkItem]  # plan position -> item
    deadline: float  # monotonic seconds
    started: bool = False  # False while the worker starts or warms up; True once the items' clocks run
    together: bool = False  # several items scored together (their failures are retried one by one)
    warming: int | None = None  # the item whose task the worker is warming up, once it said


class WorkerDied(Exception):
    pass


class PoolWorker(Protocol):
    job: Job | None

    def submit(self, batch: Batch) -> list[Event]: ...  # events known at once (e.g. "started")

    def receive(self) -> list[Event]: ...  # raises WorkerDied

    def kill(self) -> None: ...

    def ask_to_stop(self) -> None: ...  # returns at once: stop() then waits for the end

    def stop(self) -> None: ...

    def alive(self) -> bool: ...  # False: it ended while idle (checked before a kept worker is reused)


PENDING_FLOOR = 256  # rows that may always wait for an earlier item
PENDING_BATCHES = 4  # batches of every worker that may wait for an earlier one


def pending_bound(workers: int, in_flight: int) -> int:
    """Rows that may wait for an earlier, slower item before intake pauses: enough for every other
    worker to finish a few batches meanwhile (with batches of 256 on 12 workers, a bound of one batch
    stalled all of them whenever the batch holding the earliest items lagged), and at least
    :data:`PENDING_FLOOR`.  Rows are small; the items themselves stay bounded by ``workers`` times
    ``in_flight``."""
    return max(PENDING_FLOOR, PENDING_BATCHES * workers * in_flight)


def _deadline(limit: float | None) -> float:
    return time.monotonic() + limit if limit else float("inf")


@dataclass
class _Intake:
    """Plan entries cut into batches: rows already made go straight to ``done``; consecutive model
    items form a batch of up to ``in_flight``; other items go alone."""

    source: Iterator[Planned]
    in_flight: int
    max_pending: int
    done: dict[int, Row]
    next_seq: int = 0
    exhausted: bool = False
    held: deque[tuple[int, WorkItem]] = field(default_factory=deque)  # taken from the source, not yet sent

    def _next_item(self) -> tuple[int, WorkItem] | None:
        if self.held:
            return self.held.popleft()
        while not self.exhausted:
            if len(self.done) >= self.max_pending:  # rows already made wait too: intake pauses for them as well
                return None
            entry = next(self.source, None)
            if entry is None:
                self.exhausted = True
                break
            seq, self.next_seq = self.next_seq, self.next_seq + 1
            if isinstance(entry, dict):
                self.done[seq] = entry
                continue
            return seq, entry
        return None

    def batch(self) -> Batch:
        """The next batch; empty when the plan has no more items."""
        first = self._next_item()
        if first is None:
            return []
        batch = [first]
        if self.in_flight > 1 and uses_models(first[1]):
            while len(batch) < self.in_flight and len(self.done) < self.max_pending:
                following = self._next_item()
                if following is None:
                    break
                if not uses_models(following[1]):
                    self.held.append(following)
                    break
                batch.append(following)
        return batch

    @property
    def finished(self) -> bool:
        return self.exhausted and not self.held


@dataclass
class OrderedPool:
    make_worker: Callable[[], PoolWorker]
    wait_ready: Callable[[list[PoolWorker], float | None], list[PoolWorker]]
    workers: int = 2
    timeout: float | None = None
    max_pending: int | None = None  # None: pending_bound(workers, in_flight)
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT
    in_flight: int = 1
    died: Callable[[PoolWorker], None] | None = None  # told of a worker that died; raising ends the run
    keep: bool = False  # workers outlive a run that ends as planned, for the next run (see close)
    _kept: list[PoolWorker] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_pending is not None and self.max_pending < 1:
            raise ValueError(f"max_pending must be at least 1 (None: the default bound), got {self.max_pending}")

    def run(self, planned: Iterable[Planned]) -> Iterator[Row]:
        pool, self._kept = self._kept or [self.make_worker() for _ in range(self.workers)], None
        for index, worker in enumerate(pool):
            if self.keep and not worker.alive():  # kept, and ended between runs: no item of this run is charged for it
                worker.kill()
                pool[index] = self.make_worker()
        finished = False
        done: dict[int, Row] = {}
        max_pending = pending_bound(self.workers, self.in_flight) if self.max_pending is None else self.max_pending
        intake = _Intake(iter(planned), self.in_flight, max_pending, done)
        retry: deque[tuple[int, WorkItem]] = deque()  # items of failed batches, to score one by one
        next_out = 0
        try:
            while True:
                for worker in pool:
                    if worker.job is not None:
                        continue
                    if retry:  # earlier items: they go out whatever is pending
                        self._submit(worker, [retry.popleft()], done)
                    elif (len(done) < max_pending or intake.held) and not intake.finished:
                        batch = intake.batch()
                        if batch:
                            self._submit(worker, batch, done)
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                busy = [w for w in pool if w.job is not None]
                if not busy:
                    if intake.finished and not retry:
                        finished = True
                        break
                    continue
                nearest = min(w.job.deadline for w in busy)  # type: ignore[union-attr]
                wait_for = None if nearest == float("inf") else max(0.0, nearest - time.monotonic())
                ready = self.wait_ready(busy, wait_for)
                for index, worker in enumerate(pool):
                    if worker.job is not None and self._step(worker, worker in ready, done, retry):
                        worker.kill()
                        pool[index] = self.make_worker()
        finally:
            if self.keep and finished:  # idle, each with the tasks it warmed up
                self._kept = pool
            else:  # a run cut short leaves workers busy with items nobody waits for
                _stop_all(pool)

    def close(self) -> None:
        """Stop the workers kept from the last run."""
        kept, self._kept = self._kept, None
        _stop_all(kept or [])

    def _submit(self, worker: PoolWorker, batch: Batch, done: dict[int, Row]) -> None:
        worker.job = Job(dict(batch), _deadline(self.warmup_timeout), together=len(batch) > 1)
        self._apply(worker, worker.submit(batch), done)

    def _apply(self, worker: PoolWorker, events: list[Event], done: dict[int, Row]) -> None:
        job = worker.job
        assert job is not None
        for event in events:
            if event[0] == "warming":  # the first warm-up shares its budget with worker start-up
                if job.warming is not None:
                    job.deadline = _deadline(self.warmup_timeout)
                job.warming = event[1]
            elif event[0] == "started":
                # a batch's items each have their deadline inside the worker, and a late one a second
                # try alone (see .batch): the kill is the backstop, past both
                limit = self.timeout * 3 if job.together and self.timeout else self.timeout
                job.started, job.deadline = True, _deadline(limit)
            else:
                _rows, finished, reports = event
                for report in reports:
                    receive_report(report)
                for seq, row in finished:
                    done[seq] = row
                    del job.items[seq]
        if not job.items:
            worker.job = None

    def _step(self, worker: PoolWorker, ready: bool, done: dict[int, Row], retry: deque[tuple[int, WorkItem]]) -> bool:
        """Advance one busy worker; True when it must be replaced."""
        job = worker.job
        assert job is not None
        if ready:
            try:
                events = worker.receive()
            except WorkerDied:
                if self.died is not None:
                    self.died(worker)
                self._fail(job, done, retry, ErrorCode.WORKER_CRASHED, "the worker died while scoring this item")
                return True
            self._apply(worker, events, done)
            return False
        if time.monotonic() < job.deadline:
            return False
        if not job.started:  # the warm-up ran out: its item is charged, the others start again elsewhere
            warming = job.warming if job.warming in job.items else min(job.items)
            done[warming] = warmup_timeout_row(job.items.pop(warming), self.warmup_timeout)
            _requeue(retry, job.items)
        else:
            self._fail(job, done, retry, ErrorCode.TIMEOUT, "")
        return True

    def _fail(self, job: Job, done: dict[int, Row], retry: deque[tuple[int, WorkItem]], code: str, message: str) -> None:
        """A lone item gets its row; a batch's unfinished items are retried one by one, earliest first."""
        if job.together:
            _requeue(retry, job.items)
            return
        [(seq, item)] = job.items.items()
        done[seq] = timeout_row(item, self.timeout) if code == ErrorCode.TIMEOUT else error_row(item, code, message)


def _requeue(retry: deque[tuple[int, WorkItem]], items: dict[int, WorkItem]) -> None:
    """Add ``items`` to the items to score one by one, which go out earliest first."""
    waiting = sorted([*retry, *items.items()], key=lambda entry: entry[0])
    retry.clear()
    retry.extend(waiting)


def _stop_all(workers: list[PoolWorker]) -> None:
    """Stop ``workers`` together: each is asked first, so that their ends overlap (a process that
    imported torch takes about a second to end)."""
    for worker in workers:
        worker.ask_to_stop()
    for worker in workers:
        worker.stop()
