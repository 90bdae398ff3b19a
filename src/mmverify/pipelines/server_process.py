"""Running the reward server's app on uvicorn: the listening socket, the HTTP protocol with a
deadline for request headers, graceful shutdown, and :class:`BackgroundServer` for tests."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any, Callable

from .server_limits import ServerConfig


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


def uvicorn_server(app: Any) -> Any:
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


class BackgroundServer:
    """Runs an app on a loopback port in a daemon thread (tests, benchmarks, notebooks)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sock = bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = uvicorn_server(app)
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
