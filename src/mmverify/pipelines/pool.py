"""An ordered pool of killable workers: the loop shared by the process and Ray executors.

Items go to idle workers; finished rows wait in a reorder buffer and leave in plan order.  A worker
whose item passes its deadline is killed and replaced (``timeout`` row); one that dies mid-item is
replaced too (``worker_crashed`` row).  Intake pauses while ``max_pending`` rows wait for an
earlier, slower item, which bounds memory.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Iterable, Iterator, Protocol

from ..core.errors import ErrorCode
from .execute import Planned, error_row, score_item, timeout_row
from .plan import WorkItem

Job = tuple[int, WorkItem, float]  # sequence number, item, deadline (monotonic seconds)


class WorkerDied(Exception):
    pass


class PoolWorker(Protocol):
    job: Job | None

    def submit(self, seq: int, item: WorkItem) -> None: ...

    def result(self) -> dict[str, Any]: ...  # raises WorkerDied

    def kill(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class OrderedPool:
    make_worker: Callable[[], PoolWorker]
    wait_ready: Callable[[list[PoolWorker], float | None], list[PoolWorker]]
    workers: int = 2
    timeout: float | None = None
    max_pending: int = 256

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
                    worker.submit(seq, entry)
                    worker.job = (seq, entry, time.monotonic() + self.timeout if self.timeout else float("inf"))
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                busy = [w for w in pool if w.job is not None]
                if not busy:
                    if exhausted:
                        break
                    continue
                nearest = min(w.job[2] for w in busy)  # type: ignore[index]
                wait_for = None if nearest == float("inf") else max(0.0, nearest - time.monotonic())
                ready = self.wait_ready(busy, wait_for)
                for index, worker in enumerate(pool):
                    if worker.job is None:
                        continue
                    seq, item, deadline = worker.job
                    if worker in ready:
                        try:
                            done[seq] = worker.result()
                            worker.job = None
                            continue
                        except WorkerDied:
                            done[seq] = error_row(item, ErrorCode.WORKER_CRASHED, "the worker died while scoring this item")
                    elif time.monotonic() >= deadline:
                        done[seq] = timeout_row(item, self.timeout)
                    else:
                        continue
                    worker.kill()
                    pool[index] = self.make_worker()
        finally:
            for worker in pool:
                worker.stop()


def _process_main(conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        seq, item = message
        conn.send((seq, score_item(item)))


class ProcessWorker:
    def __init__(self, context: Any) -> None:
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(target=_process_main, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.job: Job | None = None

    def submit(self, seq: int, item: WorkItem) -> None:
        self.conn.send((seq, item))

    def result(self) -> dict[str, Any]:
        try:
            _seq, row = self.conn.recv()
        except (EOFError, OSError):
            raise WorkerDied() from None
        return row

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
    """``--workers N``: N spawned worker processes."""

    workers: int = 2
    timeout: float | None = None
    max_pending: int = 256

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        context = multiprocessing.get_context("spawn")
        pool = OrderedPool(lambda: ProcessWorker(context), _wait_pipes, self.workers, self.timeout, self.max_pending)
        return pool.run(planned)
