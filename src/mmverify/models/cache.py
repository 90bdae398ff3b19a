"""A shared on-disk cache for model outputs: embeddings (float arrays) and transcripts (text).

Keys combine the backend fingerprint (name + whole-content checkpoint digest, batch shape, device
type), the kind of output, extra parameters (language, crop policy) and the content hash of the
input, so a different checkpoint, device type or setting never reuses a stale entry.  SQLite in WAL mode: safe with several worker processes; values
are raw float32 bytes or UTF-8 text -- nothing is ever unpickled.

A cache is an optimisation, never a reason to lose a result.  :class:`SQLiteStore` (the base of this
cache and of the judge's reply cache) therefore never raises into its caller:

* a corrupt file (random bytes, truncated, "database disk image is malformed") is moved aside to
  ``<name>.corrupt-<UTC time>`` (with its ``-wal``/``-shm`` files) and a fresh cache is started;
* a file that can only be read (read-only file or folder) serves lookups but stores nothing: it is
  opened with ``mode=ro``, or -- where that fails, as it does for a WAL file whose ``-shm`` cannot be
  created or written -- with ``immutable=1`` (no locks, no ``-shm``; rows still in an un-checkpointed
  ``-wal`` are not seen, and a page that reads as corrupt there is bypassed, never moved aside);
* a path that cannot be opened at all (a folder, a missing permission) is bypassed: lookups miss;
* a failed write (disk full, read-only, locked) keeps the value the caller already has and turns
  further writes off in this process.

Each problem is logged once as a warning naming the file and kept in :func:`cache_problems`, so a
run summary can show it.  Worker processes forward theirs to the parent
(:func:`set_cache_problem_logging`, :func:`record_cache_problem`), which logs each one once.

How an error is classified and how a file is moved aside: :mod:`.cache_files`; the problems
kept: :mod:`.cache_problems`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import weakref
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from ..core.hashing import digest_of
from ..core.locks import folder_lock
from ..core.settings import private_dir
from .cache_files import failure_kind, file_identity, move_aside
from .cache_problems import (  # noqa: F401  (re-exported: the cache's public API)
    CacheProblem,
    cache_problems,
    clear_cache_problems,
    record_cache_problem,
    set_cache_problem_logging,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    shape TEXT,
    value BLOB NOT NULL
)
"""
_BUSY_TIMEOUT_S = 60.0


class _Connection(sqlite3.Connection):
    """An SQLite connection that can be referred to weakly (the base class cannot)."""


def _connect(target: str | Path, uri: bool = False) -> _Connection:
    """A connection any thread may use (each thread opens its own; see :meth:`SQLiteStore._connection`)."""
    return sqlite3.connect(target, uri=uri, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False, factory=_Connection)


def _close_connections(opened: "weakref.WeakKeyDictionary[_Connection, int]") -> None:
    """Close the connections this process opened (a forked child never touches its parent's)."""
    for conn, pid in list(opened.items()):
        if pid == os.getpid():
            try:
                conn.close()
            except sqlite3.Error:  # one that cannot close leaves the others to close
                pass
    opened.clear()


class _Unusable(Exception):
    """The cache path cannot hold an SQLite file (for example, it is a folder)."""


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, _Unusable) else f"{type(exc).__name__}: {exc}"


# -- the fault-tolerant store ---------------------------------------------------------------------
class SQLiteStore:
    """An SQLite file used as a cache by several threads and processes, tolerant of broken files.

    Subclasses set ``table`` and ``schema`` and use :meth:`_read` / :meth:`_write`, which never
    raise: a read that cannot be answered is a miss, a write that fails is dropped (see the module
    docstring for what happens to the file, and :func:`cache_problems` for what was reported).
    """

    table: ClassVar[str]
    schema: ClassVar[str]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.hits = 0
        self.misses = 0
        self._local = threading.local()
        self._lock = threading.RLock()
        self._mode = "rw"  # "rw", "ro" (reads only) or "off" (bypassed)
        self._immutable = False  # "ro" through ?immutable=1: ?mode=ro could not open the file
        self._writable = True
        self._generation = 0  # bumped when the file is replaced: every thread reconnects
        # Each thread's connection, with the process that opened it: closed as the store goes or the
        # process ends (the last one to close folds the -wal file into the database), not left to a
        # garbage collection that an ending process skips (see core.exits).  Held weakly: the
        # connection of a thread that ended goes with it.
        self._opened: "weakref.WeakKeyDictionary[_Connection, int]" = weakref.WeakKeyDictionary()
        weakref.finalize(self, _close_connections, self._opened)
        self._connection()  # open now, so that a broken file is found and dealt with up front

    @property
    def usable(self) -> bool:
        """False once the cache is bypassed (every lookup misses, nothing is stored)."""
        return self._mode != "off"

    @property
    def writable(self) -> bool:
        return self._mode == "rw" and self._writable

    # -- connections ------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection | None:
        # one connection per thread and process: SQLite connections must not cross a fork
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid == os.getpid() and local.generation == self._generation:
            return conn
        with self._lock:
            if conn is not None and local.pid == os.getpid():
                self._forget(conn)
            local.conn = None
            if self._mode == "off":
                return None
            seen = file_identity(self.path)
            try:
                conn = self._open(self._mode == "ro")
                identity = file_identity(self.path)
                if identity != seen:  # the file changed around the open: which one we hold is unknown
                    identity = None
            except (sqlite3.Error, OSError, _Unusable) as exc:
                conn, identity = self._open_failed(exc, seen)
                if conn is None:
                    return None
            local.conn, local.pid, local.generation, local.identity = conn, os.getpid(), self._generation, identity
            self._opened[conn] = os.getpid()
            return conn

    def _forget(self, conn: sqlite3.Connection) -> None:
        """Close a thread's connection that the store replaces (under ``_lock``)."""
        self._opened.pop(conn, None)
        conn.close()

    def _open(self, read_only: bool = False) -> sqlite3.Connection:
        if self.path.is_dir():
            raise _Unusable("the path is a folder, not an SQLite file")
        private_dir(self.path.parent)
        if read_only:
            return self._open_read_only()
        conn = _connect(self.path)
        return self._checked(conn, ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", self.schema))

    def _open_read_only(self) -> sqlite3.Connection:
        """A connection that only reads: ``?mode=ro``, else ``?immutable=1``.

        ``mode=ro`` still needs the WAL index (``-shm``): in a folder that cannot be written it fails
        ("attempt to write a readonly database", "unable to open database file").  ``immutable=1``
        reads the main file alone, without locks.
        """
        base = self.path.resolve().as_uri()
        probe = (f"SELECT 1 FROM {self.table} LIMIT 1",)
        if not self._immutable:
            try:
                conn = _connect(f"{base}?mode=ro", uri=True)
                return self._checked(conn, probe)
            except sqlite3.Error as exc:
                if failure_kind(exc) == "corrupt":
                    raise
        conn = _connect(f"{base}?immutable=1", uri=True)
        conn = self._checked(conn, probe)
        self._immutable = True
        return conn

    @staticmethod
    def _checked(conn: sqlite3.Connection, statements: Sequence[str]) -> sqlite3.Connection:
        try:
            for statement in statements:
                conn.execute(statement).fetchall()
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_failed(
        self, exc: BaseException, seen: tuple[int, int] | None
    ) -> tuple[sqlite3.Connection | None, tuple[int, int] | None]:
        """A connection after a failed open, and the identity of the file it holds."""
        # every repair happens under the folder lock, so while it is held the file stays put
        with folder_lock(self.path.parent):
            conn = None
            if file_identity(self.path) != seen:  # another process replaced the file meanwhile
                try:
                    conn = self._open(self._mode == "ro")
                except (sqlite3.Error, OSError, _Unusable) as again:
                    exc = again
            if conn is None:
                conn = self._settle(exc)
            return conn, file_identity(self.path)

    def _settle(self, exc: BaseException) -> sqlite3.Connection | None:
        """Deal with a file that cannot be opened (under the folder lock)."""
        kind = failure_kind(exc)
        if kind == "corrupt" and not self._immutable:  # an immutable read proves nothing about the file
            return self._replace_corrupt(exc)
        if kind in ("read_only", "full") and self._mode == "rw":
            try:
                conn = self._open(read_only=True)
            except (sqlite3.Error, OSError, _Unusable):
                pass
            else:
                self._mode = "ro"
                self._report("read_only", exc, "lookups are served from it, but nothing new is stored in it")
                return conn
        self._bypass(exc)
        return None

    def _replace_corrupt(self, exc: BaseException) -> sqlite3.Connection | None:
        """Move a corrupt file aside and start afresh (under the folder lock)."""
        try:
            moved = move_aside(self.path)
            conn = self._open()
        except (sqlite3.Error, OSError, _Unusable) as failure:
            self._bypass(failure, f"(it was unreadable: {_describe(exc)})")
            return None
        self._generation, self._mode, self._immutable = self._generation + 1, "rw", False
        self._report("corrupt", exc, f"moved aside to {moved.name}; a fresh cache was started", moved)
        return conn

    def _bypass(self, exc: BaseException, note: str = "") -> None:
        self._mode = "off"
        self._generation += 1  # every thread drops its connection
        detail = f"{_describe(exc)} {note}".strip()
        record_cache_problem(CacheProblem(str(self.path), "unusable", detail, "bypassed: lookups miss and nothing is stored"))

    def _report(self, kind: str, exc: BaseException, action: str, moved: Path | None = None) -> None:
        record_cache_problem(CacheProblem(str(self.path), kind, _describe(exc), action, str(moved) if moved else None))

    # -- guarded statements -----------------------------------------------------------------------
    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any] | None:
        """The rows of a query, or None when the cache cannot answer (a miss for the caller)."""
        for _attempt in range(3):  # retries: on a file another process put in place, on a fresh file
            conn = self._connection()
            if conn is None:
                return None
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if not self._failed(exc, writing=False):
                    return None
        return None

    def _write(self, sql: str, params: Sequence[Any]) -> bool:
        """Run a write; False when it was dropped (the failure is reported once)."""
        for _attempt in range(3):  # retries: on a file another process put in place, on a fresh file
            if not self.writable:
                return False
            conn = self._connection()
            if conn is None or not self.writable:
                return False
            try:
                conn.execute(sql, params)
                return True
            except sqlite3.Error as exc:
                if not self._failed(exc, writing=True):
                    return False
        return False

    def _failed(self, exc: sqlite3.Error, *, writing: bool) -> bool:
        """Deal with a failed statement; True when a fresh file is now in place (worth a retry)."""
        with self._lock, folder_lock(self.path.parent):
            if self._mode == "off":
                return False
            if file_identity(self.path) != getattr(self._local, "identity", None):
                self._generation += 1  # another process replaced the file: every thread reconnects
                return True
            if failure_kind(exc) == "corrupt" and not self._immutable:
                conn = self._replace_corrupt(exc)
                if conn is not None:
                    conn.close()  # each thread reconnects to the fresh file
                return conn is not None
            if writing:
                self._writable = False
                self._report("write_failed", exc, "values are still used, but no longer stored by this process")
            else:
                self._bypass(exc)
            return False

    def _count(self) -> int:
        rows = self._read(f"SELECT COUNT(*) FROM {self.table}")
        return int(rows[0][0]) if rows else 0


_DIGEST_SCHEMA = """
CREATE TABLE IF NOT EXISTS file_digests (
    path TEXT PRIMARY KEY,
    stat TEXT NOT NULL,
    sha256 TEXT NOT NULL
)
"""


class FileDigestStore(SQLiteStore):
    """Whole-file SHA-256 digests of large checkpoint files, per resolved path and stat (see
    :func:`mmverify.models.digests.whole_file_sha256`): a digest is served only for the exact stat it
    was computed under, so a changed file is always read again."""

    table = "file_digests"
    schema = _DIGEST_SCHEMA

    def lookup(self, path: str, stat: str) -> str | None:
        rows = self._read("SELECT stat, sha256 FROM file_digests WHERE path = ?", (path,))
        if not rows or rows[0][0] != stat:
            self.misses += 1
            return None
        self.hits += 1
        return str(rows[0][1])

    def record(self, path: str, stat: str, sha256: str) -> None:
        self._write("INSERT OR REPLACE INTO file_digests (path, stat, sha256) VALUES (?, ?, ?)", (path, stat, sha256))

    def __len__(self) -> int:
        return self._count()


def array_digest(array: np.ndarray) -> str:
    """Content hash of an array: dtype, shape and bytes."""
    contiguous = np.ascontiguousarray(array)
    digest = hashlib.sha256(f"{contiguous.dtype}:{contiguous.shape}:".encode())
    digest.update(contiguous.tobytes())
    return digest.hexdigest()


class OutputCache(SQLiteStore):
    table = "entries"
    schema = _SCHEMA

    @staticmethod
    def key(fingerprint: str, kind: str, content: str, **params: Any) -> str:
        return digest_of("mmverify-cache/1", fingerprint, kind, params, content)

    def _lookup(self, sql: str, key: str) -> Any:
        rows = self._read(sql, (key,))
        if not rows:
            self.misses += 1
            return None
        self.hits += 1
        return rows[0]

    def get_array(self, key: str) -> np.ndarray | None:
        row = self._lookup("SELECT shape, value FROM entries WHERE key = ?", key)
        if row is None:
            return None
        shape = tuple(int(n) for n in row[0].split(",") if n)
        return np.frombuffer(row[1], dtype=np.float32).reshape(shape).copy()

    def put_array(self, key: str, kind: str, value: np.ndarray) -> None:
        array = np.ascontiguousarray(value, dtype=np.float32)
        shape = ",".join(str(n) for n in array.shape)
        self._write(
            "INSERT OR REPLACE INTO entries (key, kind, shape, value) VALUES (?, ?, ?, ?)",
            (key, kind, shape, array.tobytes()),
        )

    def get_text(self, key: str) -> str | None:
        row = self._lookup("SELECT value FROM entries WHERE key = ?", key)
        return None if row is None else bytes(row[0]).decode("utf-8")

    def put_text(self, key: str, kind: str, value: str) -> None:
        self._write(
            "INSERT OR REPLACE INTO entries (key, kind, shape, value) VALUES (?, ?, NULL, ?)",
            (key, kind, value.encode("utf-8")),
        )

    def __len__(self) -> int:
        return self._count()
