"""``mmverify serve``: the reward server (Starlette on uvicorn), loopback by default.

Endpoints (JSON):

* ``POST /score`` ``{"items": [<manifest lines>]}`` -> ``{"results": [<result rows>]}`` in order.
* ``POST /get_reward`` -- OpenRLHF's remote reward protocol (see :mod:`.adapters`).
* ``GET /healthz`` (never needs the token), ``GET /tasks``.

Limits (every error reply is JSON ``{"error": {"code", "message"}}``):

* bodies over ``max_body_bytes`` and requests over ``max_items`` items get 413, and so do bodies
  holding more than ``max_json_values`` JSON values -- counted on the raw bytes before decoding,
  so a body of ``[[],[],...]`` never becomes millions of objects; nesting is bounded by the
  decoder's recursion limit (400);
* request bodies held at once (reading, decoding, waiting, scoring) are bounded by
  ``max_inflight_bytes``; requests beyond wait for room, at most ``max_waiting`` of them and for
  at most ``request_timeout`` -- beyond that, 429 with ``Retry-After``;
* headers must arrive within ``header_timeout`` of the connection (or of a kept-alive
  connection's next request) and the body within ``body_timeout`` (408); idle kept-alive
  connections close after ``keep_alive_timeout``;
* a request not answered within ``request_timeout`` gets 504; each item has its own time limit
  (an ``error`` row with code ``timeout``);
* on SIGINT/SIGTERM, requests still sending their body get 503 at once, requests being scored
  get up to ``shutdown_timeout`` seconds, then the process exits.

One item never decides another's row: an item holding values JSON cannot carry (lone surrogates,
NaN, over-long integers), wrong types or unreadable media is its own error row, and a failure of
the scoring pipeline on a merged batch is retried request by request.  Media paths resolve under
``data_root`` and are refused (``path_outside_root`` rows) when they escape it -- or always, when
no data root is set; messages name paths relative to the data root, never the server's own.

Requests are scored by one worker thread.  A micro-batcher gathers the items of requests that
arrive within ``batch_wait_ms`` of each other into one call of the pipeline (which today scores a
batch item by item; batched model calls plug in there); every item keeps the line number of its
own request, so rows equal those of the same request alone.
Each request is logged as one JSON line (id, path, status, items, error rows, latency) -- never
the token.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import hmac
import itertools
import json
import logging
import math
import os
import queue
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from .. import __version__
from .adapters import openrlhf_items, openrlhf_response
from .reward import DEFAULT_ITEM_TIMEOUT_S, Item, Reward, RewardError, describe_exception, loads_json

LOGGER = logging.getLogger("mmverify.server")


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
        if self.request_timeout <= 0 or self.batch_wait_ms < 0:
            raise ValueError("request_timeout must be positive and batch_wait_ms non-negative")
        if min(self.header_timeout, self.body_timeout, self.keep_alive_timeout) <= 0 or self.shutdown_timeout < 0:
            raise ValueError("timeouts must be positive")
        if self.on_error not in ("raise", "zero", "none"):
            raise ValueError("on_error must be raise, zero or none")


def build_reward(config: ServerConfig) -> Reward:
    root = config.data_root.resolve() if config.data_root else None
    return Reward(
        list(config.tasks) if config.tasks else None,
        thresholds=config.thresholds,
        instructions=config.instructions,
        media_root=root,
        data_root=root,
        allow_paths=root is not None,
        timeout=config.item_timeout,
        **config.reward_options,
    )


# -- micro-batching -------------------------------------------------------------------------------


@dataclass
class _Job:
    items: list[Item]
    future: asyncio.Future


class _DaemonExecutor(concurrent.futures.Executor):
    """One daemon worker thread.  Unlike ThreadPoolExecutor's workers, which the interpreter joins
    at exit, it never holds up the process after shutdown: an item still being scored is
    abandoned (the server keeps no state that scoring writes)."""

    def __init__(self, name: str) -> None:
        self._queue: "queue.SimpleQueue[tuple[concurrent.futures.Future, Callable[[], Any]] | None]" = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            future, call = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:  # handed to the waiting request
                    future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((future, functools.partial(fn, *args, **kwargs)))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queue.put(None)
        if wait:
            self._thread.join()


class MicroBatcher:
    """Collects the items of concurrent requests for up to ``wait_s`` and scores them as one batch
    on a single worker thread (one thread: scoring is CPU-bound and models are not re-entrant)."""

    def __init__(self, score: Callable[[list[Item], list[int]], list[dict[str, Any]]], wait_s: float, max_items: int) -> None:
        self._score = score
        self.wait_s = wait_s
        self.max_items = max_items
        self._pending: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._executor: _DaemonExecutor | None = None
        self._task: asyncio.Task | None = None
        self.batches = 0  # for tests and logs: how many batches were scored

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._executor = _DaemonExecutor("mmverify-score")
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        for job in self._pending:
            if not job.future.done():
                job.future.cancel()
        self._pending.clear()

    @property
    def queued_items(self) -> int:
        return sum(len(job.items) for job in self._pending)

    def submit(self, items: list[Item]) -> asyncio.Future:
        assert self._wake is not None, "the batcher is not running"
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Job(items, future))
        self._wake.set()
        return future

    def _take(self) -> list[_Job]:
        jobs, count = [], 0
        while self._pending and (not jobs or count + len(self._pending[0].items) <= self.max_items):
            job = self._pending.pop(0)
            if job.future.done():  # its request timed out or went away while it waited
                continue
            jobs.append(job)
            count += len(job.items)
        return jobs

    async def _run(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            if self.wait_s and sum(len(j.items) for j in self._pending) < self.max_items:
                await asyncio.sleep(self.wait_s)
            self._wake.clear()
            jobs = self._take()
            if self._pending:
                self._wake.set()
            if not jobs:
                continue
            await self._score_jobs(loop, jobs)

    async def _score_jobs(self, loop: asyncio.AbstractEventLoop, jobs: list[_Job]) -> None:
        items = [item for job in jobs for item in job.items]
        lines = [line for job in jobs for line in range(1, len(job.items) + 1)]
        try:
            rows = await loop.run_in_executor(self._executor, self._score, items, lines)
        except asyncio.CancelledError:  # stopping: nobody will deliver these rows
            for job in jobs:
                job.future.cancel()
            raise
        except Exception as exc:
            if len(jobs) == 1:  # a failure of the pipeline fails this request, not the server
                if not jobs[0].future.done():
                    jobs[0].future.set_exception(exc)
                return
            for job in jobs:  # merged requests: each gets the outcome it would get alone
                await self._score_jobs(loop, [job])
            return
        self.batches += 1
        start = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(rows[start : start + len(job.items)])
            start += len(job.items)


# -- HTTP plumbing ---------------------------------------------------------------------------------

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


def _log_line(**fields: Any) -> None:
    LOGGER.info(json.dumps(fields, separators=(",", ":"), default=str))


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


_JSON_COUNTED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{,]')


def count_json_values(body: bytes | bytearray, limit: int) -> int:
    """Containers plus separated elements of a JSON document, counted on its bytes (string
    contents skipped) and only up to just past ``limit``: an upper bound on the objects decoding
    would create, found without creating any."""
    bound = body.count(b"[") + body.count(b"{") + body.count(b",") + 1
    if bound <= limit:
        return bound
    count = 1
    for match in _JSON_COUNTED.finditer(body):
        if body[match.start()] != 0x22:  # not a string: '[', '{' or ','
            count += 1
            if count > limit:
                break
    return count


def decode_body(body: bytes | bytearray, max_values: int) -> Any:
    """A request body decoded, after its structure was counted against ``max_values``.  Over-long
    integers decode to markers (their items are refused one by one); nesting stops at the
    decoder's recursion limit."""
    if count_json_values(body, max_values) > max_values:
        raise HTTPError(413, "too_many_values", f"the body holds more than {max_values} JSON values")
    try:
        return loads_json(body)
    except RecursionError:
        raise HTTPError(400, "invalid_json", "the request body is nested too deeply") from None
    except ValueError:
        raise HTTPError(400, "invalid_json", "the request body is not valid JSON") from None


class PathRedactor:
    """Rewrites the server's own folders in client-visible text: paths under the data root become
    relative to it, other mentions of a folder become a placeholder."""

    def __init__(self, roots: dict[str, Path | None]) -> None:
        self._roots: list[tuple[str, str, bool]] = []  # (text, placeholder, strip as a prefix)
        for placeholder, root in roots.items():
            if root is None:
                continue
            for text in {str(root), os.path.abspath(root), os.path.realpath(root)}:
                if text not in ("", os.sep, "."):
                    self._roots.append((text, placeholder, placeholder == "<data root>"))
        self._roots.sort(key=lambda entry: -len(entry[0]))

    def text(self, value: str) -> str:
        for root, placeholder, relative in self._roots:
            if root in value:
                value = value.replace(f"data root {root}", "data root")
                value = value.replace(root + os.sep, "" if relative else placeholder + "/")
                value = value.replace(root, placeholder)
        return value

    def __call__(self, value: Any) -> Any:
        if not self._roots:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self(item) for item in value]
        return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_safe(value: Any) -> Any:
    """A copy strict JSON can hold: non-finite floats become null, lone surrogates U+FFFD."""
    if isinstance(value, str):
        return value if value.isascii() else _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {json_safe(str(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


class _Gate:
    """ASGI middleware: bearer-token check (constant-time), request id, one JSON log line each,
    and the shutdown signal requests still sending their body react to."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None
        self._ids = itertools.count(1)
        self._prefix = f"{int(time.time()) % 100000:05d}"
        self.stopping = asyncio.Event()

    def begin_shutdown(self) -> None:
        """Called on the server's loop when shutdown starts."""
        self.stopping.set()

    def _authorized(self, scope: dict[str, Any]) -> bool:
        if self._token is None or scope.get("path") == "/healthz":
            return True
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self._token)
        return False

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = f"{self._prefix}-{next(self._ids)}"
        info: dict[str, Any] = {"items": 0, "errors": 0}
        scope["mmverify.log"] = info
        status = {"code": 500, "sent": False}

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"], status["sent"] = message["status"], True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            if self._authorized(scope):
                await self.app(scope, receive, send_with_id)
            else:
                body = json.dumps({"error": {"code": "unauthorized", "message": "missing or wrong bearer token"}}).encode()
                await send_with_id({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
        except Exception as exc:
            if not status["sent"]:
                raise
            info["exception"] = type(exc).__name__  # the JSON 500 went out; the log line records why
        finally:
            _log_line(
                event="request", id=request_id, method=scope.get("method"), path=scope.get("path"),
                status=status["code"], latency_ms=round((time.perf_counter() - started) * 1000, 3), **info,
            )  # fmt: skip


def create_app(config: ServerConfig, reward: Reward | None = None) -> Any:
    """The ASGI application (Starlette, wrapped in the auth/logging gate)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ..tasks.catalog import TASKS

    reward = reward if reward is not None else build_reward(config)
    batcher = MicroBatcher(reward.rows, config.batch_wait_ms / 1000.0, config.max_batch_items)
    admission = Admission(config.max_inflight_bytes, config.max_waiting)
    redact = PathRedactor({"<data root>": config.data_root, "<instructions>": config.instructions})
    parsers: list[concurrent.futures.ThreadPoolExecutor] = []
    gate_box: list[_Gate] = []

    class SafeJSONResponse(JSONResponse):
        def render(self, content: Any) -> bytes:
            try:
                return super().render(content)
            except (TypeError, ValueError):  # NaN, lone surrogates, foreign types: never a 500
                return super().render(json_safe(content))

    def respond(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
        return SafeJSONResponse(redact(content), status_code=status, headers=headers)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        batcher.start()
        parsers.append(concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="mmverify-parse"))
        try:
            yield
        finally:
            await batcher.stop()
            parsers.pop().shutdown(wait=False, cancel_futures=True)

    async def bounded(awaitable: Awaitable[Any], timeout: float, on_timeout: HTTPError) -> Any:
        """``awaitable``'s result, unless ``timeout`` passes (``on_timeout``) or shutdown starts (503)."""
        work = asyncio.ensure_future(awaitable)
        stopper = asyncio.ensure_future(gate_box[0].stopping.wait())
        try:
            done, _ = await asyncio.wait({work, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, stopper):
                task.cancel()
        if work in done:
            return work.result()
        if stopper in done:
            raise HTTPError(503, "shutting_down", "the server is shutting down", headers=CLOSE)
        raise on_timeout

    async def read_body(request: Request, charge: list[int]) -> bytearray:
        body = bytearray()  # grown in place: no list of chunks joined into a second copy
        try:
            async for chunk in request.stream():
                size = len(body) + len(chunk)
                if size > config.max_body_bytes:
                    raise HTTPError(413, "body_too_large", f"request body over {config.max_body_bytes} bytes")
                if size > charge[0]:  # no (or a wrong) Content-Length: reserve as the body grows
                    extra = max(size - charge[0], MIN_CHARGE)
                    if not admission.grow(extra):
                        raise HTTPError(429, "server_busy", "too many request bodies in memory; retry", headers={"Retry-After": "1"})
                    charge[0] += extra
                body += chunk
        except ClientDisconnect:
            raise HTTPError(400, "client_disconnected", "the client went away before sending its body") from None
        return body

    async def decode(body: bytearray) -> Any:
        if len(body) <= INLINE_DECODE_BYTES or not parsers:
            return decode_body(body, config.max_json_values)
        return await asyncio.get_running_loop().run_in_executor(parsers[0], decode_body, body, config.max_json_values)

    @contextlib.asynccontextmanager
    async def request_json(request: Request) -> AsyncIterator[Any]:
        """The decoded body, held against ``max_inflight_bytes`` until the reply is built."""
        declared = request.headers.get("content-length")
        expected = int(declared) if declared is not None and declared.isdigit() else 0
        if expected > config.max_body_bytes:
            raise HTTPError(413, "body_too_large", f"request body over {config.max_body_bytes} bytes")
        busy = HTTPError(429, "server_busy", "the server is at capacity; retry", headers={"Retry-After": "1"})
        try:
            reserved = await bounded(admission.acquire(max(expected, MIN_CHARGE)), config.request_timeout, busy)
        except ServerBusy:
            raise busy from None
        charge = [reserved]
        try:
            timeout = HTTPError(408, "body_timeout", f"the request body did not arrive within {config.body_timeout:g} s", headers=CLOSE)
            body = await bounded(read_body(request, charge), config.body_timeout, timeout)
            yield await decode(body)
        finally:
            admission.release(charge[0])

    async def score_all(request: Request, items: list[Item]) -> list[dict[str, Any]]:
        info = request.scope["mmverify.log"]
        info["items"] = len(items)
        if len(items) > config.max_items:
            raise HTTPError(413, "too_many_items", f"{len(items)} items in one request (limit {config.max_items})")
        if not items:
            return []
        future = batcher.submit(items)
        try:
            rows = await asyncio.wait_for(asyncio.shield(future), config.request_timeout)
        except asyncio.TimeoutError:
            future.cancel()
            raise HTTPError(504, "request_timeout", f"not scored within {config.request_timeout:g} s") from None
        except asyncio.CancelledError:
            if future.cancelled() and gate_box[0].stopping.is_set():
                raise HTTPError(503, "shutting_down", "the server is shutting down") from None
            raise
        codes: dict[str, int] = {}
        for row in rows:
            if row["status"] == "error":
                codes[row["error"]["code"]] = codes.get(row["error"]["code"], 0) + 1
        info["errors"] = sum(codes.values())
        if codes:
            info["error_codes"] = codes
        return rows

    async def score(request: Request) -> Any:
        async with request_json(request) as body:
            if not isinstance(body, dict) or not isinstance(body.get("items"), list):
                raise HTTPError(422, "invalid_body", 'expected {"items": [<manifest lines>]}')
            return respond({"results": await score_all(request, body["items"])})

    async def get_reward(request: Request) -> Any:
        async with request_json(request) as body:
            try:
                items = openrlhf_items(body)
            except ValueError as exc:
                raise HTTPError(422, "invalid_body", str(exc)) from None
            rows = await score_all(request, items)
        try:
            return respond(openrlhf_response(rows, config.on_error))
        except RewardError as exc:
            details = [{"index": i, "code": code, "message": message} for i, code, message in exc.errors]
            raise HTTPError(500, "unscorable_items", str(exc), errors=details, results=rows) from None

    async def healthz(request: Request) -> Any:
        return respond({
            "status": "ok", "version": __version__, "batches": batcher.batches, "queued_items": batcher.queued_items,
            "inflight_bytes": admission.used, "waiting": admission.waiting,
        })  # fmt: skip

    async def tasks(request: Request) -> Any:
        enabled = reward.tasks
        return respond({"tasks": [
            {"id": t.id, "name": t.name, "group": t.group, "method": t.method, "needs": list(t.needs),
             "implemented": t.implemented, "enabled": t.implemented and (enabled is None or t.id in enabled)}
            for t in TASKS
        ]})  # fmt: skip

    async def on_http_error(request: Request, exc: Exception) -> Any:
        assert isinstance(exc, HTTPError)
        return respond({"error": {"code": exc.code, "message": exc.message}, **exc.extra}, exc.status, exc.headers)

    async def on_starlette_error(request: Request, exc: Exception) -> Any:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        return respond({"error": {"code": code, "message": str(exc.detail)}}, exc.status_code, dict(exc.headers or {}))

    async def on_internal_error(request: Request, exc: Exception) -> Any:
        _log_line(event="internal_error", path=request.url.path, error=redact(describe_exception(exc)))
        return respond({"error": {"code": "internal_error", "message": "the server failed on this request"}}, 500)

    app = Starlette(
        routes=[
            Route("/score", score, methods=["POST"]),
            Route("/get_reward", get_reward, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/tasks", tasks, methods=["GET"]),
        ],
        exception_handlers={HTTPError: on_http_error, StarletteHTTPException: on_starlette_error, Exception: on_internal_error},
        lifespan=lifespan,
    )
    gate = _Gate(app, config.token)
    gate_box.append(gate)
    gate.batcher = batcher  # type: ignore[attr-defined]
    gate.admission = admission  # type: ignore[attr-defined]
    gate.config = config  # type: ignore[attr-defined]
    return gate


# -- running ---------------------------------------------------------------------------------------


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: any free port), so the port is known before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


def _protocol(header_timeout: float) -> Any:
    """uvicorn's h11 protocol with a deadline for request headers -- counted from the connection,
    or from the first byte of a kept-alive connection's next request, never reset by more bytes --
    and JSON bodies for the 400 replies it sends itself.  Falls back to uvicorn's default when
    its internals differ from those this builds on."""
    try:
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError:
        return "auto"
    if not all(hasattr(H11Protocol, name) for name in ("connection_made", "data_received", "send_400_response")):
        return "auto"

    class HeaderDeadlineProtocol(H11Protocol):  # type: ignore[misc, valid-type]
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm_header_timer()  # part of a request line or headers
            else:
                self._disarm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            super().connection_lost(exc)

        def _arm_header_timer(self) -> None:
            if self._header_timer is None:
                self._header_timer = asyncio.get_running_loop().call_later(header_timeout, self._headers_overdue)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_overdue(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"error": {"code": "bad_request", "message": msg}}).encode()
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            for event in (h11.Response(status_code=400, headers=headers, reason=b"Bad Request"), h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
            self.transport.close()

    return HeaderDeadlineProtocol


def _uvicorn_server(app: Any) -> Any:
    import uvicorn

    config: ServerConfig = getattr(app, "config", None) or ServerConfig()
    begin_shutdown: Callable[[], None] = getattr(app, "begin_shutdown", lambda: None)

    class Server(uvicorn.Server):  # type: ignore[misc, valid-type]
        async def shutdown(self, sockets: Any = None) -> None:
            begin_shutdown()  # requests still sending their body get 503 at once
            await super().shutdown(sockets=sockets)

    # our gate writes the request log; uvicorn's own logging config and access log stay off
    return Server(uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", http=_protocol(config.header_timeout),
        timeout_keep_alive=config.keep_alive_timeout, timeout_graceful_shutdown=config.shutdown_timeout,
    ))  # fmt: skip


def setup_logging() -> None:
    if not LOGGER.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)
        LOGGER.propagate = False


def run(config: ServerConfig) -> None:
    """Serve until interrupted (SIGINT/SIGTERM)."""
    setup_logging()
    app = create_app(config)
    sock = bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    _log_line(event="listening", host=host, port=port, auth=config.token is not None,
              data_root=str(config.data_root) if config.data_root else None, version=__version__)  # fmt: skip
    _uvicorn_server(app).run(sockets=[sock])


class BackgroundServer:
    """Runs an app on a loopback port in a daemon thread (tests, benchmarks, notebooks)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = _uvicorn_server(app)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the reward server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["BackgroundServer", "HTTPError", "MicroBatcher", "ServerConfig", "build_reward", "create_app", "run"]
