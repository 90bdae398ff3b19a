"""``mmverify serve``: the reward server (Starlette on uvicorn), loopback by default.

Endpoints (JSON):

* ``POST /score`` ``{"items": [<manifest lines>]}`` -> ``{"results": [<result rows>]}`` in order.
* ``POST /get_reward`` -- OpenRLHF's remote reward protocol (see :mod:`.adapters`).
* ``GET /healthz`` (never needs the token), ``GET /tasks``.

Limits: request bodies over ``max_body_bytes`` and requests over ``max_items`` items get 413; a
request not answered within ``request_timeout`` gets 504; each item has its own time limit (an
``error`` row with code ``timeout``).  Media paths resolve under ``data_root`` and are refused
(``path_outside_root`` rows) when they escape it -- or always, when no data root is set.

Requests are scored by one worker thread.  A micro-batcher gathers the items of requests that
arrive within ``batch_wait_ms`` of each other into one call of the pipeline (which today scores a
batch item by item; batched model calls plug in there); every item keeps the line number of its
own request, so rows equal those of the same request alone.
Each request is logged as one JSON line (id, path, status, items, error rows, latency) -- never
the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from .. import __version__
from .adapters import openrlhf_items, openrlhf_response
from .reward import DEFAULT_ITEM_TIMEOUT_S, Item, Reward, RewardError

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

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_items < 1 or self.max_batch_items < 1:
            raise ValueError("size limits must be positive")
        if self.request_timeout <= 0 or self.batch_wait_ms < 0:
            raise ValueError("request_timeout must be positive and batch_wait_ms non-negative")
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


class MicroBatcher:
    """Collects the items of concurrent requests for up to ``wait_s`` and scores them as one batch
    on a single worker thread (one thread: scoring is CPU-bound and models are not re-entrant)."""

    def __init__(self, score: Callable[[list[Item], list[int]], list[dict[str, Any]]], wait_s: float, max_items: int) -> None:
        self._score = score
        self.wait_s = wait_s
        self.max_items = max_items
        self._pending: list[_Job] = []
        self._wake: asyncio.Event | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mmverify-score")
        self._task: asyncio.Task | None = None
        self.batches = 0  # for tests and logs: how many batches were scored

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=False, cancel_futures=True)

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
            items = [item for job in jobs for item in job.items]
            lines = [line for job in jobs for line in range(1, len(job.items) + 1)]
            try:
                rows = await loop.run_in_executor(self._executor, self._score, items, lines)
            except Exception as exc:  # a bug in the pipeline fails these requests, not the server
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                continue
            self.batches += 1
            start = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(rows[start : start + len(job.items)])
                start += len(job.items)


# -- HTTP plumbing ---------------------------------------------------------------------------------


class HTTPError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def _log_line(**fields: Any) -> None:
    LOGGER.info(json.dumps(fields, separators=(",", ":"), default=str))


class _Gate:
    """ASGI middleware: bearer-token check (constant-time), request id, one JSON log line each."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self._token = token.encode("utf-8") if token else None
        self._ids = itertools.count(1)
        self._prefix = f"{int(time.time()) % 100000:05d}"

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
        status = {"code": 500}

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
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
        finally:
            _log_line(
                event="request", id=request_id, method=scope.get("method"), path=scope.get("path"),
                status=status["code"], latency_ms=round((time.perf_counter() - started) * 1000, 3), **info,
            )  # fmt: skip


def create_app(config: ServerConfig, reward: Reward | None = None) -> Any:
    """The ASGI application (Starlette, wrapped in the auth/logging gate)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ..tasks.catalog import TASKS

    reward = reward if reward is not None else build_reward(config)
    batcher = MicroBatcher(reward.rows, config.batch_wait_ms / 1000.0, config.max_batch_items)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    async def read_json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise HTTPError(413, "body_too_large", f"request body over {config.max_body_bytes} bytes")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise HTTPError(413, "body_too_large", f"request body over {config.max_body_bytes} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
        try:
            if size > 256 * 1024:  # big inline media: decode off the event loop
                return await asyncio.to_thread(json.loads, body)
            return json.loads(body)
        except (ValueError, RecursionError):
            raise HTTPError(400, "invalid_json", "the request body is not valid JSON") from None

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
        codes: dict[str, int] = {}
        for row in rows:
            if row["status"] == "error":
                codes[row["error"]["code"]] = codes.get(row["error"]["code"], 0) + 1
        info["errors"] = sum(codes.values())
        if codes:
            info["error_codes"] = codes
        return rows

    def handler(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
        async def wrapped(request: Request) -> Any:
            try:
                return await fn(request)
            except HTTPError as exc:
                return JSONResponse({"error": {"code": exc.code, "message": exc.message}, **exc.extra}, status_code=exc.status)

        return wrapped

    @handler
    async def score(request: Request) -> Any:
        body = await read_json(request)
        if not isinstance(body, dict) or not isinstance(body.get("items"), list):
            raise HTTPError(422, "invalid_body", 'expected {"items": [<manifest lines>]}')
        return JSONResponse({"results": await score_all(request, body["items"])})

    @handler
    async def get_reward(request: Request) -> Any:
        body = await read_json(request)
        try:
            items = openrlhf_items(body)
        except ValueError as exc:
            raise HTTPError(422, "invalid_body", str(exc)) from None
        rows = await score_all(request, items)
        try:
            return JSONResponse(openrlhf_response(rows, config.on_error))
        except RewardError as exc:
            details = [{"index": i, "code": code, "message": message} for i, code, message in exc.errors]
            raise HTTPError(500, "unscorable_items", str(exc), errors=details, results=rows) from None

    async def healthz(request: Request) -> Any:
        return JSONResponse({"status": "ok", "version": __version__, "batches": batcher.batches})

    async def tasks(request: Request) -> Any:
        enabled = reward.tasks
        return JSONResponse({"tasks": [
            {"id": t.id, "name": t.name, "group": t.group, "method": t.method, "needs": list(t.needs),
             "implemented": t.implemented, "enabled": t.implemented and (enabled is None or t.id in enabled)}
            for t in TASKS
        ]})  # fmt: skip

    app = Starlette(
        routes=[
            Route("/score", score, methods=["POST"]),
            Route("/get_reward", get_reward, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/tasks", tasks, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    gate = _Gate(app, config.token)
    gate.batcher = batcher  # type: ignore[attr-defined]
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


def _uvicorn_server(app: Any) -> Any:
    import uvicorn

    # our gate writes the request log; uvicorn's own logging config and access log stay off
    return uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on", timeout_keep_alive=30))


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
