"""The judge reply cache: a rerun with a warm cache makes no network call and loads no weights."""

from __future__ import annotations

import time
from pathlib import Path

from .cache import SQLiteStore

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    reply TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class JudgeCache(SQLiteStore):
    """Judge replies on disk (SQLite, WAL): safe for several threads and worker processes.

    Only successful replies are stored, so a failure is retried on the next run.  A broken file
    never costs a reply: a corrupt one is moved aside, an unusable one bypassed, and a failed write
    leaves the reply with its caller (see :class:`~mmverify.models.cache.SQLiteStore`).
    """

    table = "replies"
    schema = _CACHE_SCHEMA

    def get(self, key: str) -> str | None:
        rows = self._read("SELECT reply FROM replies WHERE key = ?", (key,))
        if not rows:
            self.misses += 1
            return None
        self.hits += 1
        return str(rows[0][0])

    def put(self, key: str, model: str, reply: str) -> None:
        self._write(
            "INSERT OR REPLACE INTO replies (key, model, reply, created) VALUES (?, ?, ?, ?)",
            (key, model, reply, time.time()),
        )

    def __len__(self) -> int:
        return self._count()


def as_cache(cache: JudgeCache | str | Path | None) -> JudgeCache | None:
    """A cache object for a path (or the one given, or None for no cache)."""
    return cache if cache is None or isinstance(cache, JudgeCache) else JudgeCache(cache)
