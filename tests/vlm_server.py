"""A real OpenAI-compatible chat-completions server on 127.0.0.1, scripted per test.

Import the fixtures into a test module (pytest picks them up from its namespace)::

    from tests.vlm_server import by_prompt, vlm_env, vlm_server  # noqa: F401

    def test_counting(vlm_server, tmp_path):
        vlm_server.script(by_prompt({"How many": "Four apples. Answer: C"}))
        judge = vlm_server.judge(cache=tmp_path / "judge.sqlite")   # OpenAICompatibleJudge aimed here
        assert judge.ask("How many apples?", [image]).endswith("Answer: C")
        assert vlm_server.count == 1 and vlm_server.requests[0].images[0].shape == image.shape

    def test_task_end_to_end(vlm_env):        # MMVERIFY_VLM_* point get_hub().judge() at the server
        vlm_env.script(always("... Yes"))
        ...

Fixtures
    ``vlm_server``  a running :class:`VLMServer` (stopped after the test).
    ``vlm_env``     the same server with MMVERIFY_VLM_BASE_URL/MODEL set to it, a tiny back-off
                    (MMVERIFY_VLM_BACKOFF), and MMVERIFY_CACHE_DIR under ``tmp_path``, so
                    ``get_hub().judge(role)`` talks to it with a fresh cache.

:class:`VLMServer`
    ``url``            base URL to give a judge (``http://127.0.0.1:<port>/v1``).
    ``script(f)``      reply with ``f(request) -> Reply | str`` (a str is a normal 200 reply).
    ``queue(*r)``      reply with these in order, then 400 "script exhausted".
    ``delay``          seconds every reply waits before it is sent (default 0; ``FOREVER``: no reply
                       until the server closes).
    ``usage``          the ``usage`` object of generated replies (default 1 prompt + 1 completion
                       token); ``None`` leaves it out, as servers that report no usage do.
    ``hold()``, ``release(n=1, match)``, ``open()``, ``held``, ``held_by(match)``, ``held_requests(match)``
                       from ``hold()`` on, every request waits (counted as in flight) until the test
                       ``release``s it, oldest first of those ``match`` accepts; ``open()`` lets all
                       go and stops holding; ``held`` is how many are waiting, ``held_requests`` which
                       (oldest first).  The test decides when replies go out.
    ``requests``       every :class:`RecordedRequest` received (``body``, ``headers``, ``model``,
                       ``prompt`` = the user message's text, ``images`` = decoded uint8 arrays,
                       ``image_bytes`` = the PNG bytes sent).
    ``count``, ``max_in_flight``, ``reset()`` (forget requests, keep the script); ``GET /_stats``
                       returns count and max_in_flight as JSON (for a server in another process).
                       A request is in flight from when its body has been read until just before
                       its reply is written, a span inside the client's own wait for the reply:
                       ``max_in_flight`` never exceeds the client's true concurrency.
    ``judge(**kw)``    an ``OpenAICompatibleJudge`` for this server with millisecond back-off and no
                       cache unless ``cache=`` is given; keyword arguments override.

Scripts (responders)
    ``always(text)``                       every request gets ``text``.
    ``by_prompt({substr: reply}, default)`` first substring found in the prompt picks the reply
                                           (a str or a Reply); unmatched prompts get ``default``,
                                           or a 400 naming the prompt so the test fails loudly.
    ``sequence(*replies, then=None)``      replies in order, then ``then`` for ever (or 400).
    ``together(n, responder)``             the first ``n`` requests wait until all ``n`` are in
                                           flight at once, then ``responder`` answers (a 400 if
                                           they never are): ``max_in_flight >= n`` for sure.
    ``rate_limited_then(text, times=1, retry_after=None)``  429s (with Retry-After), then ``text``.
    ``server_error_forever(status=500)``   every request fails with ``status``.
    ``malformed_json()``                   200 with a body that is not JSON.
    ``empty_content()``                    200 with ``content: ""``.
    ``Reply(content=..., status=..., body=..., headers=..., delay=...)`` for anything else; ``body``
    (dict or str) replaces the generated chat-completion body; ``delay=FOREVER`` never answers (the
    client can only time out).
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import math
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Union

import numpy as np
import pytest

MODEL = "test-vlm"
FOREVER = math.inf  # a delay: no reply while the server runs
BARRIER_HANG_GUARD_S = 60.0
HANG_GUARD_S = 60.0  # the clients' request timeout: never reached by a test that passes


@dataclass
class Reply:
    content: str | None = None
    status: int = 200
    body: Union[dict, str, None] = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def _user_content(self) -> Any:
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        users = [m for m in messages if m.get("role") == "user"]
        return users[-1].get("content") if users else ""

    @property
    def prompt(self) -> str:
        content = self._user_content()
        if isinstance(content, str):
            return content
        return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")

    @property
    def image_urls(self) -> list[str]:
        content = self._user_content()
        if isinstance(content, str):
            return []
        return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]

    @cached_property
    def image_bytes(self) -> list[bytes]:
        return [base64.b64decode(url.split(",", 1)[1]) for url in self.image_urls]

    @cached_property
    def images(self) -> list[np.ndarray]:
        from PIL import Image

        return [np.asarray(Image.open(io.BytesIO(data))) for data in self.image_bytes]


Responder = Callable[[RecordedRequest], Union[Reply, str]]


DEFAULT_USAGE: Mapping[str, int] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def chat_completion(content: str | None, model: str = MODEL, usage: Mapping[str, int] | None = DEFAULT_USAGE) -> dict[str, Any]:
    """A chat-completions body; ``usage=None`` leaves the ``usage`` object out (as some servers do)."""
    body = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }  # fmt: skip
    if usage is not None:
        body["usage"] = dict(usage)
    return body


def _error(status: int, message: str) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "test_script"}})


def always(text: str) -> Responder:
    return lambda request: text


def by_prompt(replies: Mapping[str, Union[Reply, str]], default: Union[Reply, str, None] = None) -> Responder:
    def respond(request: RecordedRequest) -> Union[Reply, str]:
        for needle, reply in replies.items():
            if needle in request.prompt:
                return reply
        return default if default is not None else _error(400, f"unscripted prompt: {request.prompt[:200]}")

    return respond


def sequence(*replies: Union[Reply, str], then: Union[Reply, str, None] = None) -> Responder:
    pending = list(replies)
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Union[Reply, str]:
        with lock:
            if pending:
                return pending.pop(0)
        return then if then is not None else _error(400, "script exhausted")

    return respond


def rate_limited_then(text: str, times: int = 1, retry_after: float | None = None) -> Responder:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return sequence(*[Reply(status=429, body={"error": {"message": "slow down"}}, headers=headers)] * times, then=text)


def together(n: int, responder: Union[Responder, str]) -> Responder:
    """The first ``n`` requests are answered only once all ``n`` are in flight together.

    A client that allows ``n`` concurrent requests gets there whatever the machine's speed; one that
    never has ``n`` in flight gets a 400 naming the cause (after a hang guard, never on the pass path).
    """
    answer = always(responder) if isinstance(responder, str) else responder
    barrier = threading.Barrier(n)
    arrivals = itertools.count()
    arrivals_lock = threading.Lock()

    def respond(request: RecordedRequest) -> Union[Reply, str]:
        with arrivals_lock:
            arrival = next(arrivals)
        if arrival < n:
            try:
                barrier.wait(BARRIER_HANG_GUARD_S)
            except threading.BrokenBarrierError:
                return _error(400, f"the client never had {n} requests in flight at once")
        return answer(request)

    return respond


def server_error_forever(status: int = 500) -> Responder:
    return lambda request: _error(status, "internal server error")


def malformed_json() -> Responder:
    return lambda request: Reply(body='{"choices": [{"message": ')


def empty_content() -> Responder:
    return lambda request: Reply(content="")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops connections when a test opens dozens at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return  # a client that timed out or was killed left; nothing to report
        super().handle_error(request, client_address)


class VLMServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.delay = 0.0
        self.usage: Mapping[str, int] | None = DEFAULT_USAGE
        self.in_flight = 0
        self.max_in_flight = 0
        self._responder: Responder = lambda request: _error(400, "no script set for this test")
        self._lock = threading.Lock()
        self._holding = False
        self._held: deque[tuple[threading.Event, RecordedRequest]] = deque()
        self._closing = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints

            def setup(self) -> None:
                super().setup()
                # headers and body leave in separate writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every keep-alive reply, as no real server does
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/_stats":  # for a server run in another process (benchmarks)
                    self._send(200, {"count": server.count, "max_in_flight": server.max_in_flight}, {})
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]}, {})
                else:
                    self._send(404, {"error": {"message": "not found"}}, {})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, {"error": {"message": "request body is not JSON"}}, {})
                    return
                request = RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                gate: threading.Event | None = None
                with server._lock:
                    server.requests.append(request)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    if server._holding:
                        gate = threading.Event()
                        server._held.append((gate, request))
                try:
                    if gate is not None:
                        gate.wait()  # set by release(), open() or close()
                    try:
                        reply = server._responder(request)
                    except Exception as exc:  # a broken script must fail the test, not hang it
                        reply = _error(400, f"responder raised {type(exc).__name__}: {exc}")
                    if isinstance(reply, str):
                        reply = Reply(content=reply)
                    delay = server.delay + reply.delay
                    if delay > 0:  # ends early when the server closes
                        server._closing.wait(None if math.isinf(delay) else delay)
                    payload = reply.body if reply.body is not None else chat_completion(reply.content, body.get("model", MODEL), server.usage)
                finally:
                    # out of flight before the first byte of the reply leaves: the client cannot
                    # start its next request while this one still counts
                    with server._lock:
                        server.in_flight -= 1
                if not server._closing.is_set():
                    self._send(reply.status, payload, reply.headers)

            def _send(self, status: int, payload: Union[dict, str], headers: Mapping[str, str]) -> None:
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="vlm-test-server", daemon=True)
        self._thread.start()

    # -- scripting --------------------------------------------------------------------------------
    def script(self, responder: Union[Responder, str]) -> "VLMServer":
        self._responder = always(responder) if isinstance(responder, str) else responder
        return self

    def queue(self, *replies: Union[Reply, str]) -> "VLMServer":
        return self.script(sequence(*replies))

    def hold(self) -> "VLMServer":
        """From now on every request waits for :meth:`release` (or :meth:`open`)."""
        with self._lock:
            self._holding = True
        return self

    def release(self, n: int = 1, match: Callable[[RecordedRequest], bool] | None = None) -> None:
        """Let the ``n`` oldest held requests (of those ``match`` accepts) be answered."""
        with self._lock:
            chosen = [entry for entry in self._held if match is None or match(entry[1])][:n]
            if len(chosen) < n:
                raise AssertionError(f"cannot release {n} requests: {len(chosen)} are held")
            for entry in chosen:
                self._held.remove(entry)
                entry[0].set()

    def held_requests(self, match: Callable[[RecordedRequest], bool] = lambda request: True) -> list[RecordedRequest]:
        """The held requests ``match`` accepts, oldest first."""
        with self._lock:
            return [request for _, request in self._held if match(request)]

    def held_by(self, match: Callable[[RecordedRequest], bool]) -> int:
        """How many held requests ``match`` accepts."""
        with self._lock:
            return sum(1 for _, request in self._held if match(request))

    def open(self) -> None:
        """Stop holding: every held request is answered, and new ones are not held."""
        with self._lock:
            self._holding = False
            while self._held:
                self._held.popleft()[0].set()

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    @property
    def count(self) -> int:
        return len(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def judge(self, **overrides: Any) -> Any:
        from mmverify.models.judge import OpenAICompatibleJudge

        # the timeout only guards against a hang (tests count requests: a reply late on a busy
        # machine must not be asked again); tests of timeouts pass their own
        options: dict[str, Any] = {"backoff_base": 0.001, "backoff_max": 0.01, "timeout": HANG_GUARD_S, "cache": None}
        options.update(overrides)
        return OpenAICompatibleJudge(options.pop("model", MODEL), options.pop("base_url", self.url), **options)

    def close(self) -> None:
        self._closing.set()  # waiting replies are dropped, not sent
        self.open()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def vlm_server() -> Iterator[VLMServer]:
    server = VLMServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def vlm_env(vlm_server: VLMServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> VLMServer:
    for name in ("BASE_URL", "MODEL", "API_KEY_ENV", "CONCURRENCY", "TIMEOUT", "MAX_RETRIES", "CACHE", "BACKOFF"):
        monkeypatch.delenv(f"MMVERIFY_VLM_{name}", raising=False)
    for role in ("SPATIAL", "OCR", "OCR_SECOND", "LLM"):
        for name in ("BASE_URL", "MODEL", "API_KEY_ENV"):
            monkeypatch.delenv(f"MMVERIFY_VLM_{role}_{name}", raising=False)
    monkeypatch.delenv("MMVERIFY_OFFLINE", raising=False)
    monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", vlm_server.url)
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", MODEL)
    monkeypatch.setenv("MMVERIFY_VLM_BACKOFF", "0.001")
    monkeypatch.setenv("MMVERIFY_VLM_TIMEOUT", f"{HANG_GUARD_S:g}")  # a hang guard, as in judge()
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    return vlm_server
