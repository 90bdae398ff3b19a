"""``--executor ray``: the same ordered, killable pool with Ray actors as workers.

Each actor is a long-lived worker process, so model backends load once per actor and serve every
item it scores; ``gpus_per_worker`` makes the actors request GPUs from the cluster scheduler.  Rows
stream back into the same append-only results file in plan order, identical to the local executors.
Judge (VLM) concurrency is per process: with N actors, give each ``--vlm-concurrency`` of the global
budget divided by N.

An actor that has not used an item's task yet first warms up on it (actor start-up, task import and
build, lazy imports and model loading) under ``warmup_timeout``; the item's own clock starts when
that is done, exactly as with worker processes (:mod:`.pool`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from .execute import DEFAULT_WARMUP_TIMEOUT, Planned, score_item
from .plan import WorkItem
from .pool import Event, Initializer, Job, OrderedPool, PoolWorker, ProblemForwarder, WorkerDied, first_use


class _ScoringActor:
    def __init__(self, timeout: float | None, initializer: Initializer | None, initargs: Sequence[Any]) -> None:
        self.timeout = timeout
        self.forwarder = ProblemForwarder()
        if initializer is not None:
            initializer(*initargs)

    def warm_up(self, item: WorkItem) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """First use of the item's task here; its row when that fitted the item limit, else None."""
        return first_use(item, self.timeout), self.forwarder.new()

    def score(self, item: WorkItem) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return score_item(item), self.forwarder.new()


class RayWorker:
    def __init__(self, actor_class: Any, options: dict[str, Any], args: Sequence[Any] = ()) -> None:
        self.actor = actor_class.options(**options).remote(*args)
        self.ref: Any = None
        self.job: Job | None = None
        self.warm: set[tuple[str, str]] = set()  # (task, profile) this actor has used
        self._item: WorkItem | None = None
        self._warming = False
        self._problems: list[dict[str, Any]] = []

    def submit(self, seq: int, item: WorkItem) -> bool:
        self._item, self._problems = item, []
        self._warming = (item.task, item.profile) not in self.warm
        self.ref = (self.actor.warm_up if self._warming else self.actor.score).remote(item)
        return not self._warming

    def receive(self) -> Event:
        row, problems = self._get()
        self._problems += problems
        if self._warming:
            assert self._item is not None
            self.warm.add((self._item.task, self._item.profile))
            self._warming = False
            if row is None:  # the first use ran past the item limit: score again, warm
                self.ref = self.actor.score.remote(self._item)
                return ("started",)
        return ("done", row, self._problems)

    def _get(self) -> Any:
        import ray
        from ray.exceptions import RayActorError, WorkerCrashedError

        try:
            return ray.get(self.ref)
        except (RayActorError, WorkerCrashedError):
            raise WorkerDied() from None

    def kill(self) -> None:
        import ray

        ray.kill(self.actor, no_restart=True)

    stop = kill


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
    max_pending: int = 256
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT  # actor start-up and first use of each task
    initializer: Initializer | None = None  # run once in every actor before its first item
    initargs: Sequence[Any] = ()

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
            lambda: RayWorker(actor_class, options, args), _wait_refs, self.workers, self.timeout, self.max_pending, self.warmup_timeout
        )
        try:
            yield from pool.run(planned)
        finally:
            if started_here:
                ray.shutdown()
