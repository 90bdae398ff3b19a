"""``--executor ray``: the same ordered, killable pool with Ray actors as workers.

Each actor is a long-lived worker process, so model backends load once per actor and serve every
item it scores; ``gpus_per_worker`` makes the actors request GPUs from the cluster scheduler.  Rows
stream back into the same append-only results file in plan order, identical to the local executors.
Judge (VLM) concurrency is per process: with N actors, give each ``--vlm-concurrency`` of the global
budget divided by N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .execute import Planned, score_item
from .plan import WorkItem
from .pool import Job, OrderedPool, PoolWorker, WorkerDied


class _ScoringActor:
    def score(self, item: WorkItem) -> dict[str, Any]:
        return score_item(item)


class RayWorker:
    def __init__(self, actor_class: Any, options: dict[str, Any]) -> None:
        self.actor = actor_class.options(**options).remote()
        self.ref: Any = None
        self.job: Job | None = None

    def submit(self, seq: int, item: WorkItem) -> None:
        self.ref = self.actor.score.remote(item)

    def result(self) -> dict[str, Any]:
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
        pool = OrderedPool(lambda: RayWorker(actor_class, options), _wait_refs, self.workers, self.timeout, self.max_pending)
        try:
            yield from pool.run(planned)
        finally:
            if started_here:
                ray.shutdown()
