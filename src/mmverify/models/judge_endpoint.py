"""What the judge client knows about an endpoint besides its URL.

Three facts, all per endpoint rather than per judge: how many requests may be in flight to it from
this process (one bound shared by every judge and role aimed at it), whether it runs on this
machine (offline mode still lets a judge reach a loopback server), and its normalised name, which
is part of every cached reply's key (two servers that serve a model of the same name never share
replies).
"""

from __future__ import annotations

import os
import threading
from urllib.parse import urlsplit, urlunsplit

_SEMAPHORES: dict[tuple[int, str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def check_base_url(url: str, option: str = "--vlm-base-url") -> None:
    """Refuse a judge URL that no request could use (no ``http``/``https`` scheme, or no host)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{option} must be an http(s) URL such as http://127.0.0.1:8000/v1, got {without_credentials(url)!r}")


def process_semaphore(endpoint: str, limit: int) -> threading.BoundedSemaphore:
    """One bound per endpoint and process, shared by every judge (and role) aimed at it with the
    same limit -- which judges configured from the environment always are."""
    key = (os.getpid(), endpoint, limit)
    with _SEMAPHORES_LOCK:
        if key not in _SEMAPHORES:
            _SEMAPHORES[key] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[key]


def is_loopback(url: str) -> bool:
    """True when ``url`` names this machine (``localhost`` or a loopback address)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        import ipaddress

        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_id(url: str) -> str:
    """``url`` normalised for the reply cache key: scheme and host lower-cased, the scheme's default
    port, user info, fragment and trailing slashes of the path dropped; path and query kept as
    written: ``HTTP://Example.com:80/v1/`` gives ``http://example.com/v1``, and
    ``https://example.com:443/v1`` gives ``https://example.com/v1`` -- never the same as the first."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: keep what was written
        port = None
        host = parts.netloc.rpartition("@")[2].lower()
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def without_credentials(url: str) -> str:
    """``url`` as written, less the ``user:password@`` an HTTP client turns into Basic auth: what
    error messages, usage counters and result keys may show."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def credentials_of(url: str) -> str | None:
    """The ``user:password`` part of ``url``, if it has one (to be redacted wherever it could echo)."""
    netloc = urlsplit(url).netloc
    return netloc.rpartition("@")[0] or None if "@" in netloc else None
