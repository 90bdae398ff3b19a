"""``mmverify serve``: the reward server (Starlette on uvicorn), loopback by default.

Endpoints (JSON):

* ``POST /score`` ``{"items": [<manifest lines>]}`` -> ``{"results": [<result rows>]}`` in order.
* ``POST /get_reward`` -- OpenRLHF's remote reward protocol (see :mod:`.adapters`).
* ``GET /healthz`` (never needs the token), ``GET /tasks``.

Limits (every error reply is JSON ``{"error": {"code", "message"}}``):

* bodies over ``max_body_bytes`` and requests over ``max_items`` items get 413, and so do bodies
  holding more than ``max_json_values`` JSON values -- counted on the raw bytes before decoding,
  so a body of ``[[],[],...]`` never becomes millions of objects; /get_reward's labels (JSON
  strings) are counted the same way, within the same budget, before they are decoded; bodies nested
  deeper than 400 levels get 400, found before decoding too, so the outcome never depends on which
  thread decodes (bodies over 64 KB are counted and decoded off the event loop);
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
import concurrent.futures
import contextlib
from typing import Any, AsyncIterator, Awaitable

from .. import __version__
from .openrlhf import openrlhf_items, openrlhf_response
from .reward import Reward
from .reward_batch import Item, RewardError
from .reward_json import JsonBudget, describe_exception
from .server_batch import MicroBatcher
from .server_gate import Gate, PathRedactor, json_safe, log_line, setup_logging
from .server_limits import CLOSE, INLINE_DECODE_BYTES, MIN_CHARGE, Admission, Convert, HTTPError, ServerBusy, ServerConfig, decode_body
from .server_process import BackgroundServer, bind, uvicorn_server


def reward_items(body: Any, budget: JsonBudget) -> list[Item]:
    """/get_reward's items; its labels are JSON strings, decoded within the body's own budget."""
    try:
        return openrlhf_items(body, budget)
    except ValueError as exc:
        raise HTTPError(422, "invalid_body", str(exc)) from None


def build_reward(config: ServerConfig) -> Reward:
    root = config.data_root.resolve() if config.data_root else None
    reward = Reward(
        list(config.tasks) if config.tasks else None,
        thresholds=config.thresholds,
        instructions=config.instructions,
        media_root=root,
        data_root=root,
        allow_paths=root is not None,
        timeout=config.item_timeout,
        **config.reward_options,
    )
    return reward


def create_app(config: ServerConfig, reward: Reward | None = None) -> Any:
    """The ASGI application (Starlette, wrapped in the auth/logging gate)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ..tasks.catalog import TASKS

    owned = reward is None  # a reward built here is closed (its decoding processes ended) at shutdown
    reward = reward if reward is not None else build_reward(config)
    batcher = MicroBatcher(reward.rows, config.batch_wait_ms / 1000.0, config.max_batch_items)
    admission = Admission(config.max_inflight_bytes, config.max_waiting)
    redact = PathRedactor({"<data root>": config.data_root, "<instructions>": config.instructions})
    parsers: list[concurrent.futures.ThreadPoolExecutor] = []
    gate_box: list[Gate] = []

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
            if owned:
                reward.close()

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

    async def decode(body: bytearray, then: Convert | None) -> Any:
        if len(body) <= INLINE_DECODE_BYTES or not parsers:
            return decode_body(body, config.max_json_values, then)
        return await asyncio.get_running_loop().run_in_executor(parsers[0], decode_body, body, config.max_json_values, then)

    @contextlib.asynccontextmanager
    async def request_json(request: Request, then: Convert | None = None) -> AsyncIterator[Any]:
        """The decoded body (or what ``then`` makes of it, on the same thread and JSON budget), held
        against ``max_inflight_bytes`` until the reply is built."""
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
            yield await decode(body, then)
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
        async with request_json(request, reward_items) as items:
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
        log_line(event="internal_error", path=request.url.path, error=redact(describe_exception(exc)))
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
    gate = Gate(app, config.token)
    gate_box.append(gate)
    gate.batcher = batcher  # type: ignore[attr-defined]
    gate.admission = admission  # type: ignore[attr-defined]
    gate.config = config  # type: ignore[attr-defined]
    return gate



def run(config: ServerConfig) -> None:
    """Serve until interrupted (SIGINT/SIGTERM)."""
    setup_logging()
    app = create_app(config)
    sock = bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    log_line(event="listening", host=host, port=port, auth=config.token is not None,
             data_root=str(config.data_root) if config.data_root else None, version=__version__)  # fmt: skip
    uvicorn_server(app).run(sockets=[sock])


__all__ = ["BackgroundServer", "HTTPError", "MicroBatcher", "ServerConfig", "build_reward", "create_app", "run"]
