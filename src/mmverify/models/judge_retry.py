"""When a judge tries again and how long it waits: one policy for the blocking and asyncio clients.

A failure the server marks as transient (HTTP 408/409/429/5xx, a dropped connection, a garbled
body) is retried up to ``max_retries`` times.  The wait honours the server's ``Retry-After``
(capped), else doubles from ``backoff_base`` up to ``backoff_max`` with a jitter derived from the
request's key -- so concurrent retries spread apart, yet identically on every run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Awaitable, Callable, TypeVar

from .judge_wire import Failure

T = TypeVar("T")
Hook = Callable[[], None]
GiveUp = Callable[[Failure, int], Exception]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    retry_after_max: float = 60.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_base < 0 or self.backoff_max < 0 or self.retry_after_max < 0:
            raise ValueError("max_retries and the back-off delays must be non-negative")

    def delay(self, attempt: int, failure: Failure, key: str) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based) of the request ``key``."""
        if failure.retry_after is not None:
            return min(failure.retry_after, self.retry_after_max)
        delay = min(self.backoff_max, self.backoff_base * (2**attempt))
        if self.jitter:
            fraction = int(hashlib.sha256(f"{key}:{attempt}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            delay *= 0.5 + 0.5 * fraction
        return delay

    def next_delay(self, attempt: int, failure: Failure, key: str, give_up: GiveUp, on_retry: Hook | None) -> float:
        """The wait before the next attempt; raises ``give_up(failure, attempts)`` when there is none."""
        if not failure.retryable or attempt >= self.max_retries:
            raise give_up(failure, attempt + 1)
        if on_retry is not None:
            on_retry()
        return self.delay(attempt, failure, key)

    def call(
        self, attempt: Callable[[], T | Failure], key: str, *, sleep: Callable[[float], None], give_up: GiveUp, on_retry: Hook | None = None
    ) -> T:
        """``attempt()`` until it returns something other than a :class:`Failure`."""
        tries = 0
        while True:
            outcome = attempt()
            if not isinstance(outcome, Failure):
                return outcome
            sleep(self.next_delay(tries, outcome, key, give_up, on_retry))
            tries += 1

    async def acall(
        self,
        attempt: Callable[[], Awaitable[T | Failure]],
        key: str,
        *,
        sleep: Callable[[float], Awaitable[None]],
        give_up: GiveUp,
        on_retry: Hook | None = None,
    ) -> T:
        """:meth:`call` for coroutines: the same decisions, awaited."""
        tries = 0
        while True:
            outcome = await attempt()
            if not isinstance(outcome, Failure):
                return outcome
            await sleep(self.next_delay(tries, outcome, key, give_up, on_retry))
            tries += 1
