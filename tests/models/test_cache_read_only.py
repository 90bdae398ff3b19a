"""A cache in a folder that can only be read still serves lookups (and stores nothing).

SQLite's ``?mode=ro`` cannot open a WAL file whose ``-shm`` it cannot create ("attempt to write a
readonly database"); the cache then reads it with ``?immutable=1``.  Checked on a real read-only
folder (0555, files 0444) -- as an unprivileged user: root ignores permissions, so under root the
reader runs in a child process that drops to ``nobody`` -- and, on any account, by refusing
``mode=ro`` opens the way SQLite does.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mmverify
from mmverify.models.cache import OutputCache, cache_problems
from mmverify.models.judge import JudgeCache

READER = """
import json, sys
print("mmverify-ro-probe")
from mmverify.models.cache import OutputCache, cache_problems
cache = OutputCache(sys.argv[1])
text, array = cache.get_text("t"), cache.get_array("k")
cache.put_text("t2", "x", "new")
print(json.dumps({"usable": cache.usable, "writable": cache.writable, "text": text,
                  "array": None if array is None else array.tolist(), "t2": cache.get_text("t2"),
                  "kinds": [p["kind"] for p in cache_problems()]}))
"""


def _drop_to_nobody() -> None:  # runs in the child, before exec
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def _run_as_nobody(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run as ``nobody`` (util-linux ``setpriv``, else a setuid before exec); skips the
    test where neither can start this Python."""
    setpriv = shutil.which("setpriv")
    attempts = [([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *command], None)] if setpriv else []
    attempts.append((command, _drop_to_nobody))
    failures = []
    for argv, preexec in attempts:
        try:
            result = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cwd, preexec_fn=preexec)
        except (OSError, subprocess.SubprocessError) as exc:
            failures.append(str(exc))
            continue
        if "mmverify-ro-probe" in result.stdout:
            return result
        failures.append(result.stderr.strip()[-300:])
    pytest.skip(f"cannot run this Python as an unprivileged user here: {failures}")


@pytest.fixture
def shared_tmp():
    """A folder other users can traverse (pytest's own tmp folders are owner-only)."""
    folder = Path(tempfile.mkdtemp(prefix="mmverify-ro-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_read_only_folder_serves_lookups_from_a_wal_cache(shared_tmp):
    folder = shared_tmp / "cache"
    writer = OutputCache(folder / "outputs.sqlite")
    writer.put_text("t", "x", "hello")
    writer.put_array("k", "x", np.arange(3, dtype=np.float32))
    writer._local.conn.close()  # the last connection: the WAL is checkpointed into the file
    del writer
    folder.chmod(0o755)  # readable by the reader below
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)

    command = [sys.executable, "-c", READER, str(folder / "outputs.sqlite")]
    env = {**os.environ, "PYTHONPATH": str(Path(mmverify.__file__).resolve().parents[1])}
    if os.geteuid() == 0:  # permissions bind root only through another account
        result = _run_as_nobody(command, env, shared_tmp)
    else:
        result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=shared_tmp)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["usable"] and not seen["writable"]
    assert seen["text"] == "hello" and seen["array"] == [0.0, 1.0, 2.0]
    assert seen["t2"] is None and seen["kinds"] == ["read_only"]
    assert sorted(p.name for p in folder.iterdir()) == ["outputs.sqlite"]  # nothing written beside it


class _RefusesWrites(sqlite3.Connection):
    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.strip().upper().startswith(("INSERT", "CREATE", "PRAGMA JOURNAL_MODE")):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return super().execute(sql, *args)


@pytest.mark.parametrize("cache_class", [OutputCache, JudgeCache])
def test_when_mode_ro_cannot_open_the_file_it_is_read_immutable(tmp_path, monkeypatch, cache_class):
    path = tmp_path / "cache.sqlite"
    first = cache_class(path)
    if cache_class is JudgeCache:
        first.put("old", "model", "stored earlier")
    else:
        first.put_text("old", "transcript", "stored earlier")
    first._local.conn.close()  # checkpointed: an immutable read sees the main file only
    real_connect = sqlite3.connect
    opened: list[str] = []

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if not kwargs.get("uri"):
            kwargs["factory"] = _RefusesWrites  # read-write opens cannot write
        elif "mode=ro" in str(database):  # what SQLite says when the WAL index cannot be made
            opened.append("mode=ro")
            raise sqlite3.OperationalError("attempt to write a readonly database")
        else:
            opened.append(str(database).rpartition("?")[2])
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    cache = cache_class(path)
    got = cache.get("old") if cache_class is JudgeCache else cache.get_text("old")
    assert got == "stored earlier" and cache.usable and not cache.writable
    assert opened[:2] == ["mode=ro", "immutable=1"]
    assert [p["kind"] for p in cache_problems() if p["path"] == str(path)] == ["read_only"]


def test_a_page_read_corrupt_through_immutable_is_never_moved_aside(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    OutputCache(path).put_text("old", "transcript", "stored earlier")
    cache = OutputCache(path)
    cache._mode, cache._immutable = "ro", True
    cache._generation += 1
    assert not cache._failed(sqlite3.DatabaseError("database disk image is malformed"), writing=False)
    assert not cache.usable and path.is_file()
    assert not list(tmp_path.glob("*.corrupt-*"))
    assert stat.S_ISREG(path.stat().st_mode)
