"""What the reward server's clients see and what it logs: the ASGI gate (bearer token, request
id, one JSON log line per request, the shutdown signal), the redaction of the server's own folders
from replies and the copy of a reply strict JSON can hold."""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import logging
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

LOGGER = logging.getLogger("mmverify.server")


def log_line(**fields: Any) -> None:
    LOGGER.info(json.dumps(fields, separators=(",", ":"), default=str))


class _CurrentStderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a line is logged, not as it was when the server
    started: a stream replaced and closed since (a notebook cell's, a test runner's) loses no line
    and raises no logging error."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler's constructor sets it: always sys.stderr
        pass


def setup_logging() -> None:
    if not LOGGER.handlers:
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)
        LOGGER.propagate = False


# A folder is found only as a whole path: not preceded by a character of a path, and followed by
# a separator (a path under it) or by nothing that continues a name ("." or "..." ends a sentence, ".d" not).
_BEFORE = r"(?<![\w.~/-])"
_AFTER = r"(?:(?P<sep>/)|(?![\w~-]|\.[\w~-]))"


class PathRedactor:
    """Rewrites the server's own folders in client-visible text: paths under the data root become
    relative to it, other mentions of a folder become a placeholder.  A folder is matched as a
    whole path only (``/data`` is not rewritten inside ``/database`` or ``/x/data``), and the
    fields that identify a result row -- the client's own values -- are never rewritten (the same
    names deeper inside, in evidence say, are)."""

    IDENTITY = frozenset({"task", "instance_id", "model", "key"})

    def __init__(self, roots: dict[str, Path | None]) -> None:
        self._rules: list[tuple[re.Pattern, Callable[[re.Match], str]]] = []
        texts: set[tuple[str, str]] = set()
        for placeholder, root in roots.items():
            if root is None:
                continue
            for text in {str(root), os.path.abspath(root), os.path.realpath(root)}:
                text = text.rstrip(os.sep)
                if text not in ("", "."):
                    texts.add((text, placeholder))
        for text, placeholder in sorted(texts, key=lambda entry: (-len(entry[0]), entry)):  # the longest first
            pattern = re.compile(rf"(?P<said>data root )?{_BEFORE}{re.escape(text)}{_AFTER}")
            self._rules.append((pattern, self._replacement(placeholder, placeholder == "<data root>")))

    @staticmethod
    def _replacement(placeholder: str, relative: bool) -> Callable[[re.Match], str]:
        def replace(match: re.Match) -> str:
            said = "data root" if match.group("said") else ""  # "outside the data root /srv": not named
            if match.group("sep"):
                return (said and said + " ") + ("" if relative else placeholder + "/")
            return said or placeholder

        return replace

    def text(self, value: str) -> str:
        for pattern, replace in self._rules:
            value = pattern.sub(replace, value)
        return value

    def __call__(self, value: Any) -> Any:
        if not self._rules:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            row = "status" in value and "instance_id" in value  # a result row: its identity is the client's
            return {key: item if row and key in self.IDENTITY else self(item) for key, item in value.items()}
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


class Gate:
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
            log_line(
                event="request", id=request_id, method=scope.get("method"), path=scope.get("path"),
                status=status["code"], latency_ms=round((time.perf_counter() - started) * 1000, 3), **info,
            )  # fmt: skip
