"""A shared on-disk cache for model outputs: embeddings (float arrays) and transcripts (text).

Keys combine the backend fingerprint (name + checkpoint digest), the kind of output, extra
parameters (language, crop policy) and the content hash of the input, so a different checkpoint or
setting never reuses a stale entry.  SQLite in WAL mode: safe with several worker processes; values
are raw float32 bytes or UTF-8 text -- nothing is ever unpickled.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..core.hashing import digest_of
from ..core.settings import private_dir

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    shape TEXT,
    value BLOB NOT NULL
)
"""


def array_digest(array: np.ndarray) -> str:
    """Content hash of an array: dtype, shape and bytes."""
    contiguous = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{contiguous.dtype}:{contiguous.shape}:".encode())
    digest.update(contiguous.tobytes())
    return digest.hexdigest()


class OutputCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        private_dir(self.path.parent)
        self._local = threading.local()
        self.hits = 0
        self.misses = 0
        with self._connection() as conn:
            conn.execute(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @staticmethod
    def key(fingerprint: str, kind: str, content: str, **params: Any) -> str:
        return digest_of("mmverify-cache/1", fingerprint, kind, params, content)

    def get_array(self, key: str) -> np.ndarray | None:
        row = self._connection().execute("SELECT shape, value FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        shape = tuple(int(n) for n in row[0].split(",") if n)
        return np.frombuffer(row[1], dtype=np.float32).reshape(shape).copy()

    def put_array(self, key: str, kind: str, value: np.ndarray) -> None:
        array = np.ascontiguousarray(value, dtype=np.float32)
        shape = ",".join(str(n) for n in array.shape)
        self._connection().execute(
            "INSERT OR REPLACE INTO entries (key, kind, shape, value) VALUES (?, ?, ?, ?)",
            (key, kind, shape, array.tobytes()),
        )

    def get_text(self, key: str) -> str | None:
        row = self._connection().execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return bytes(row[0]).decode("utf-8")

    def put_text(self, key: str, kind: str, value: str) -> None:
        self._connection().execute(
            "INSERT OR REPLACE INTO entries (key, kind, shape, value) VALUES (?, ?, NULL, ?)",
            (key, kind, value.encode("utf-8")),
        )

    def __len__(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM entries").fetchone()[0])
