"""A reward's worker processes (``Reward(workers=N, model_process=...)``): the pool of ``mmverify
score --workers N``, kept between calls so that each call finds its workers started and its tasks
warm.  Calls take turns on it; a call cut short, or whose model process was lost, ends the pool,
and the next call starts a new one."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

from .context import install_context
from .execute import Planned

if TYPE_CHECKING:
    from .pool import ProcessExecutor
    from .reward import Reward


class RewardProcesses:
    def __init__(self, reward: "Reward") -> None:
        self._reward = reward
        self._executor: "ProcessExecutor | None" = None
        self._turn = threading.Lock()

    def rows(self, planned: Sequence[Planned]) -> list[dict[str, Any]]:
        """The rows of ``planned``, in order, scored by the worker processes."""
        with self._turn:
            return list(self._pool().run(planned))

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()

    def _pool(self) -> "ProcessExecutor":
        if self._executor is None:
            from .pool import ProcessExecutor

            reward = self._reward
            self._executor = ProcessExecutor(
                workers=reward.workers, timeout=reward.timeout, warmup_timeout=reward.warmup_timeout,
                initializer=install_context, initargs=(reward.context,), in_flight=reward.in_flight,
                model_context=reward.context if reward.model_process else None, decode_processes=reward.decode_processes,
                keep=True, after_loss="; the next call starts new worker processes and a new model process",
            )  # fmt: skip
        return self._executor
