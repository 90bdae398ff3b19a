"""``--workers N``: the ordered pool (:mod:`.pool`) over N spawned worker processes, and with
``--model-process`` one process beside them that computes every worker's model batches
(:mod:`.model_process`)."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Iterable, Iterator, Sequence

from ..models.served import MODEL_PROCESS_LOST, MODEL_PROCESS_STUCK
from .context import ScoringContext
from .execute import DEFAULT_WARMUP_TIMEOUT, Planned
from .model_process import ModelProcess, ModelProcessEnded, announced, served_worker
from .pool import Job, OrderedPool, PoolWorker, Row, WorkerDied
from .pool_worker import Batch, Event, Initializer, process_main

STOP_WAIT_S = 5.0  # how long a worker asked to stop has to end before it is killed


class ProcessWorker:
    def __init__(
        self, context: Any, timeout: float | None = None, initializer: Initializer | None = None, initargs: Sequence[Any] = (),
        decode_processes: int = 0,
    ) -> None:  # fmt: skip
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(
            target=process_main, args=(child, timeout, initializer, tuple(initargs), decode_processes), daemon=True
        )
        self.process.start()
        child.close()
        self.job: Job | None = None
        self._asked_to_stop = False

    def submit(self, batch: Batch) -> list[Event]:
        try:
            self.conn.send(batch)
        except OSError:  # the worker is gone: receive() reports it
            pass
        return []  # the worker says when the items themselves start

    def receive(self) -> list[Event]:
        try:
            return [self.conn.recv()]
        except (EOFError, OSError):
            raise WorkerDied() from None

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def alive(self) -> bool:
        return self.process.is_alive()

    def ask_to_stop(self) -> None:
        if self._asked_to_stop:
            return
        self._asked_to_stop = True
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass

    def stop(self) -> None:
        self.ask_to_stop()
        self.process.join(timeout=STOP_WAIT_S)
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
    bound); ``initializer(*initargs)`` runs once in every worker before its first item;
    ``in_flight`` model items go to a worker at a time and are scored there together.  With
    ``keep``, the workers (and the model process) outlive a run that ends as planned and score the
    next one, warm; :meth:`close` ends them.  A run cut short, or ended by its model process, ends
    them all: the next run starts afresh.
    """

    workers: int = 2
    timeout: float | None = None
    max_pending: int | None = None  # None: the pool's bound for its workers and batches
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT
    initializer: Initializer | None = None
    initargs: Sequence[Any] = ()
    in_flight: int = 1  # items a worker scores together, their model calls batched
    model_context: ScoringContext | None = None  # set: one model process computes the servable models' batches
    decode_processes: int = 0  # processes of each worker decoding the media of the items it scores together
    keep: bool = False  # workers and model process outlive a run that ends as planned
    after_loss: str = "; rows written so far are kept, and the same command resumes the run"  # said when the model process is lost
    _pool: OrderedPool | None = field(default=None, init=False, repr=False)
    _models: ModelProcess | None = field(default=None, init=False, repr=False)

    def run(self, planned: Iterable[Planned]) -> Iterator[Row]:
        if self._models is not None and self._models.ended():  # ended between runs: nothing of this run is lost
            self.close()
        if self._pool is None:
            self._start()
        pool, models, finished = self._pool, self._models, False
        assert pool is not None
        try:
            yield from pool.run(planned if models is None else announced(planned, models.preload))
            finished = True
        finally:
            if not (self.keep and finished and self._pool is pool):  # cut short, or closed meanwhile
                if self._pool is pool:
                    self._pool = self._models = None
                _end(pool, models)

    def close(self) -> None:
        """End the workers and the model process kept between runs.  A run still going ends its
        workers as it returns (with a model process, it fails at once: its batches go unanswered)."""
        pool, models, self._pool, self._models = self._pool, self._models, None, None
        if pool is not None:
            _end(pool, models)

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        models = None if self.model_context is None else ModelProcess(self.model_context)
        initializer, initargs = self.initializer, tuple(self.initargs)
        if models is not None:
            initializer, initargs = served_worker, (models.address, models.token, initializer, initargs)

        def make_worker() -> ProcessWorker:
            return ProcessWorker(context, self.timeout, initializer, initargs, self.decode_processes)

        def died(worker: PoolWorker) -> None:
            if models is None:
                return
            process = worker.process  # type: ignore[attr-defined]
            process.join(5)  # its pipe closed as it ended: the exit code is a moment away
            if process.exitcode == MODEL_PROCESS_STUCK:
                limit = f" ({self.timeout:g} s)" if self.timeout else ""
                raise ModelProcessEnded(
                    f"a batch in the model process outlived its items' time limit{limit}: a computation "
                    "stuck in native code, or a limit too short for the model's batches" + self.after_loss
                    + " (without a model process each worker has models of its own, and a stuck one costs one item)"
                )
            if process.exitcode == MODEL_PROCESS_LOST or models.ended():
                code = models.process.exitcode
                raise ModelProcessEnded("the model process ended" + (f" (exit code {code})" if code is not None else "") + self.after_loss)

        self._models = models
        self._pool = OrderedPool(
            make_worker, _wait_pipes, self.workers, self.timeout, self.max_pending, self.warmup_timeout, self.in_flight, died,
            keep=self.keep,
        )  # fmt: skip


def _end(pool: OrderedPool, models: ModelProcess | None) -> None:
    try:
        pool.close()
    finally:
        if models is not None:
            models.stop()
