"""``--executor ray``: the same ordered, killable pool with Ray actors as workers.

Each actor is a long-lived worker process, so model backends load once per actor and serve every
item it scores; ``gpus_per_worker`` makes the actors request GPUs from the cluster scheduler.  Rows
stream back into the same append-only results file in plan order, identical to the local executors.
Judge (VLM) concurrency is per process: with N actors, give each ``--vlm-concurrency`` of the global
budget divided by N.

Actors take batches as worker processes do: up to ``in_flight`` model items at a time, scored
together.  An actor that has not used a task of its batch yet first warms up on it (actor start-up,
task import and build, lazy imports and model loading) under ``warmup_timeout``; the items' own
clocks start when that is done, exactly as with worker processes (:mod:`.pool`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from .execute import DEFAULT_WARMUP_TIMEOUT, Planned
from .plan import WorkItem
from .pool import Job, OrderedPool, PoolWorker, WorkerDied
from .pool_worker import Batch, Event, Initializer, ProblemForwarder, cold_items, first_use, score_warm


class _ScoringActor:
    def __init__(self, timeout: float | None, initializer: Initializer | None, initargs: Sequence[Any]) -> None:
        self.timeout = timeout
        self.forwarder = ProblemForwarder()
        if initializer is not None:
            initializer(*initargs)

    def warm_up(self, item: WorkItem) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """First use of the item's task here; its row when that fitted the item limit, else None."""
        return first_use(item, self.timeout), self.forwarder.new()

    def score(self, items: list[WorkItem]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Rows of items whose tasks are warm here (several are scored together)."""
        return list(score_warm(items, self.timeout)), self.forwarder.new()


class RayWorker:
    """One actor scoring one batch at a time: a call per task to warm up, then one for the rest."""

    def __init__(self, actor_class: Any, options: dict[str, Any], args: Sequence[Any] = ()) -> None:
        self.actor = actor_class.options(**options).remote(*args)
        self.ref: Any = None
        self.job: Job | None = None
        self.warm: set[tuple[str, str]] = set()  # (task, profile) this actor has used
        self._pending: dict[int, WorkItem] = {}  # the batch's items without a row yet
        self._cold: Batch = []  # first items of the batch's tasks still to warm up
        self._warming: int | None = None

    def submit(self, batch: Batch) -> list[Event]:
        self._pending = dict(batch)
        self._cold = cold_items(batch, lambda item: (item.task, item.profile) not in self.warm)
        return self._next_call()

    def _next_call(self) -> list[Event]:
        if self._cold:
            self._warming, item = self._cold.pop(0)
            self.ref = self.actor.warm_up.remote(item)
            return [("warming", self._warming)]
        self._warming = None
        self.ref = self.actor.score.remote(list(self._pending.values())) if self._pending else None
        return [("started",)] if self._pending else []

    def receive(self) -> list[Event]:
        result, reports = self._get()
        if self._warming is None:
            finished, self._pending = list(zip(self._pending, result)), {}
            return [("rows", finished, reports)]
        seq = self._warming
        item = self._pending[seq]
        self.warm.add((item.task, item.profile))
        if result is None:  # the first use ran past the item limit: it is scored again, warm
            return [("rows", [], reports), *self._next_call()]
        del self._pending[seq]
        return [("rows", [(seq, result)], reports), *self._next_call()]

    def _get(self) -> Any:
        import ray
        from ray.exceptions import RayActorError, WorkerCrashedError

        try:
            return ray.get(self.ref)
        except (RayActorError, WorkerCrashedError):
            raise WorkerDied() from None

    def alive(self) -> bool:
        return True  # an actor that ended is found by its next call (Ray pools are not kept between runs)

    def kill(self) -> None:
        import ray

        ray.kill(self.actor, no_restart=True)

    stop = kill

    def ask_to_stop(self) -> None:
        pass  # stop() kills the actor, which returns at once


def _wait_refs(workers: list[PoolWorker], timeout: float | None) -> list[PoolWorker]:
    import ray

    by_ref = {w.ref: w for w in workers}  # type: ignore[attr-defined]
    ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=timeout)
    if ready:  # collect everything else that is already finished too
        ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0)
    return [by_ref[r] for r in ready]


@dataclass
class RayExecutor:
    workers: int = 2
    timeout: float | None = None
    address: str | None = None  # None: start a local Ray instance with ``workers`` CPUs
    gpus_per_worker: float = 0.0
    max_pending: int | None = None  # None: the pool's bound for its workers and batches
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT  # actor start-up and first use of each task
    initializer: Initializer | None = None  # run once in every actor before its first item
    initargs: Sequence[Any] = ()
    in_flight: int = 1  # items an actor scores together, their model calls batched

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        try:
            import ray
        except ImportError:
            raise RuntimeError('--executor ray needs Ray: pip install "mmverify[ray]"') from None
        started_here = not ray.is_initialized()
        if started_here:
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
        actor_class = ray.remote(_ScoringActor)
        options = {"num_cpus": 1, "num_gpus": self.gpus_per_worker, "max_restarts": 0}
        args = (self.timeout, self.initializer, tuple(self.initargs))
        pool = OrderedPool(
            lambda: RayWorker(actor_class, options, args), _wait_refs, self.workers, self.timeout, self.max_pending,
            self.warmup_timeout, self.in_flight,
        )  # fmt: skip
        try:
            yield from pool.run(planned)
        finally:
            if started_here:
                ray.shutdown()
