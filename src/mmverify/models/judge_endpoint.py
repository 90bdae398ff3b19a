"""What the judge client knows about an endpoint besides its URL.

Two facts, both per endpoint rather than per judge: how many requests may be in flight to it from
this process (one bound shared by every judge and role aimed at it), and whether it runs on this
machine (offline mode still lets a judge reach a loopback server).
"""

from __future__ import annotations

import os
import threading
from urllib.parse import urlsplit

_SEMAPHORES: dict[tuple[int, str, int], threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


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
