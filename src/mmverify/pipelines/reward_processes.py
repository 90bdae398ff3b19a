"""A reward's worker processes (``Reward(workers=N, model_process=...)``): the pool of ``mmverify
score --workers N``, kept between calls so that each call finds its workers started and its tasks
warm.  Calls take turns on it; a call cut short, or whose model process was lost, ends the pool,
and the next call starts a new one.  A reward inherited by a forked process starts a pool of its
own there.  Worker processes are spawned, as ``mmverify score --workers N``'s are: a script that
makes such a reward needs the ``if __name__ == "__main__":`` guard."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

from .context import install_context
from .execute import Planned

if TYPE_CHECKING:
    from .process_executor import ProcessExecutor
    from .reward import Reward


class RewardProcesses:
    def __init__(self, reward: "Reward") -> None:
        self._reward = reward
        self._executor: "ProcessExecutor | None" = None
        self._turn = threading.Lock()
        self._closes = 0  # how often close() was called: a call it overlapped closes its own pool
        self._owner = os.getpid()

    def rows(self, planned: Sequence[Planned]) -> list[dict[str, Any]]:
        """The rows of ``planned``, in order, scored by the worker processes."""
        self._adopt()
        with self._turn:
            closes = self._closes
            executor = self._pool()
            try:
                return list(executor.run(planned))
            finally:
                if self._closes != closes:  # closed meanwhile: what this call started ends with it
                    if self._executor is executor:
                        self._executor = None
                    executor.close()

    def close(self) -> None:
        """End the worker processes and the model process; a call still going ends them as it returns."""
        self._adopt()
        self._closes += 1
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()

    def _adopt(self) -> None:
        """In a process forked from the one that started the pool: the pool's pipes and processes
        are the parent's, so this process starts its own (and never stops the parent's)."""
        if os.getpid() != self._owner:
            self._owner, self._executor, self._turn = os.getpid(), None, threading.Lock()

    def _pool(self) -> "ProcessExecutor":
        if self._executor is None:
            from .process_executor import ProcessExecutor

            reward = self._reward
            self._executor = ProcessExecutor(
                workers=reward.workers, timeout=reward.timeout, warmup_timeout=reward.warmup_timeout,
                initializer=install_context, initargs=(reward.context,), in_flight=reward.in_flight,
                model_context=reward.context if reward.model_process else None, decode_processes=reward.decode_processes,
                keep=True, after_loss="; the next call starts new worker processes and a new model process",
            )  # fmt: skip
        return self._executor
