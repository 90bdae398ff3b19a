"""The reward server's configuration and request limits: the :class:`ServerConfig`, the JSON
errors replies carry (:class:`HTTPError`), the admission of request bodies against
``max_inflight_bytes`` and the decoding of bodies after their values were counted against
``max_json_values`` and their nesting against a fixed depth."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .execute import check_time_limit
from .reward import DEFAULT_ITEM_TIMEOUT_S
from .reward_json import JsonBudget, TooDeep, TooManyValues, loads_json


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    data_root: Path | None = None
    instructions: Path | None = None
    thresholds: Path | None = None
    tasks: Sequence[str] | None = None  # None: every implemented task
    item_timeout: float | None = DEFAULT_ITEM_TIMEOUT_S
    request_timeout: float = 300.0
    max_body_bytes: int = 32 * 1024 * 1024
    max_items: int = 256
    batch_wait_ms: float = 2.0
    max_batch_items: int = 64
    on_error: str = "raise"  # /get_reward only: OpenRLHF needs a number for every sample
    reward_options: dict[str, Any] = field(default_factory=dict)  # models, device, offline, ...
    max_json_values: int = 200_000  # containers and separated elements in one body
    max_inflight_bytes: int = 64 * 1024 * 1024  # request bodies held in memory at once
    max_waiting: int = 256  # requests waiting for room under max_inflight_bytes
    header_timeout: float = 10.0  # seconds for a request's headers
    body_timeout: float = 30.0  # seconds for a request's body, from its headers
    keep_alive_timeout: float = 30.0  # idle seconds before a kept-alive connection closes
    shutdown_timeout: float = 10.0  # seconds requests being scored get after SIGINT/SIGTERM

    def __post_init__(self) -> None:
        sizes = (self.max_body_bytes, self.max_items, self.max_batch_items, self.max_json_values, self.max_inflight_bytes)
        if min(sizes) < 1 or self.max_waiting < 0:
            raise ValueError("size limits must be positive")
        check_time_limit(self.item_timeout, "item_timeout")
        waits = (self.request_timeout, self.header_timeout, self.body_timeout, self.keep_alive_timeout, self.shutdown_timeout)
        if not all(math.isfinite(wait) for wait in (*waits, self.batch_wait_ms)):
            raise ValueError("timeouts and batch_wait_ms must be finite numbers of seconds")
        if self.request_timeout <= 0 or self.batch_wait_ms < 0:
            raise ValueError("request_timeout must be positive and batch_wait_ms non-negative")
        if min(self.header_timeout, self.body_timeout, self.keep_alive_timeout) <= 0 or self.shutdown_timeout < 0:
            raise ValueError("timeouts must be positive")
        if self.on_error not in ("raise", "zero"):
            raise ValueError("on_error must be raise or zero (OpenRLHF needs a number for every sample)")


# Replies sent before the body was read to its end: for a client that stalls, the connection
# closes; otherwise (413, 429) uvicorn reads and discards the rest of the body, so a client that
# sends its whole body before reading gets the reply instead of a broken pipe.
CLOSE = {"Connection": "close"}
MIN_CHARGE = 16 * 1024  # what a request counts against max_inflight_bytes at least
INLINE_DECODE_BYTES = 64 * 1024  # larger bodies are counted and decoded on the parser threads


class HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers, self.extra = status, code, message, headers, extra



class ServerBusy(Exception):
    pass


class Admission:
    """Bounds the bytes of request bodies held in memory at once.  Requests wait for room in
    arrival order; when ``max_waiting`` already wait, :meth:`acquire` raises :class:`ServerBusy`."""

    def __init__(self, limit: int, max_waiting: int) -> None:
        self.limit = limit
        self.max_waiting = max_waiting
        self.used = 0
        self._waiting: collections.deque[tuple[int, asyncio.Future]] = collections.deque()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def acquire(self, size: int) -> int:
        """Reserve ``size`` bytes (at most the whole budget); returns the amount reserved."""
        size = max(1, min(size, self.limit))
        if not self._waiting and self.used + size <= self.limit:
            self.used += size
            return size
        if len(self._waiting) >= self.max_waiting:
            raise ServerBusy(f"{len(self._waiting)} requests are already waiting")
        entry = (size, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            await entry[1]
        except asyncio.CancelledError:
            if entry[1].done() and not entry[1].cancelled():
                self.release(size)  # granted just as the wait was given up
            else:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(entry)
                self._grant()
            raise
        return size

    def grow(self, extra: int) -> bool:
        """Reserve ``extra`` more bytes without waiting (a body without Content-Length growing)."""
        if self.used + extra > self.limit:
            return False
        self.used += extra
        return True

    def release(self, size: int) -> None:
        self.used -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.used + self._waiting[0][0] <= self.limit:
            size, future = self._waiting.popleft()
            if not future.done():
                self.used += size
                future.set_result(None)


Convert = Callable[[Any, JsonBudget], Any]  # a decoded body -> what a route works on


def decode_body(body: bytes | bytearray, max_values: int, then: Convert | None = None) -> Any:
    """A request body decoded after its values were counted against ``max_values`` and its nesting
    against the fixed depth; with ``then``, what ``then(document, budget)`` makes of it, any JSON
    strings it decodes drawing on the same budget.  Over-long integers decode to markers (their
    items are refused one by one)."""
    budget = JsonBudget(max_values)
    try:
        document = _decoded(body, budget)
        return document if then is None else then(document, budget)
    except TooManyValues as exc:
        raise HTTPError(413, "too_many_values", str(exc)) from None


def _decoded(body: bytes | bytearray, budget: JsonBudget) -> Any:
    try:
        budget.take(body)
        return loads_json(body)
    except (TooDeep, RecursionError):
        raise HTTPError(400, "invalid_json", "the request body is nested too deeply") from None
    except ValueError:
        raise HTTPError(400, "invalid_json", "the request body is not valid JSON") from None
