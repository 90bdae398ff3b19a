"""Broken cache files never cost a row or a paid reply.

A corrupt ``judge.sqlite`` / ``outputs.sqlite`` (random bytes, a truncated file, pages garbled after
opening) is moved aside once and a fresh cache serves; a folder in the way is bypassed; a read-only
file serves lookups; a full disk drops writes but never the reply already received.  Each problem is
logged once, naming the file, and listed by ``cache_problems()`` -- also when a worker process met it.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
from pathlib import Path
from typing import Any, Callable

import pytest

from mmverify.api import score_items
from mmverify.core.types import Instance
from mmverify.models import hub as hub_module
from mmverify.models.cache import OutputCache, cache_problems
from mmverify.models.cache_files import failure_kind
from mmverify.models.judge import JudgeCache
from mmverify.pipelines.plan import WorkItem
from mmverify.pipelines.process_executor import ProcessExecutor
from mmverify.pipelines.score import ScoreConfig, run_score
from tests.conftest import save_png, scene, write_manifest
from tests.vlm_server import always, vlm_env, vlm_server  # noqa: F401  (fixtures)

YES = "The picture shows it clearly. Answer: Yes"


# -- the two caches behind one small interface -----------------------------------------------------
def put(cache: Any, key: str, value: str) -> None:
    if isinstance(cache, JudgeCache):
        cache.put(key, "model", value)
    else:
        cache.put_text(key, "transcript", value)


def get(cache: Any, key: str) -> str | None:
    return cache.get(key) if isinstance(cache, JudgeCache) else cache.get_text(key)


CACHES = {"judge": JudgeCache, "outputs": OutputCache}


def problems_for(path: Path) -> list[dict[str, Any]]:
    return [p for p in cache_problems() if p["path"] == str(path)]


def warnings_naming(caplog: pytest.LogCaptureFixture, path: Path) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and str(path) in r.getMessage()]


def write_database(path: Path, cache_class: type, entries: int, size: int = 1000) -> None:
    """A valid cache file (rollback journal, closed) with ``entries`` rows of ``size`` bytes."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(cache_class.schema)
    if cache_class is JudgeCache:
        rows = [(f"k{i}", "model", "v" * size, 0.0) for i in range(entries)]
        conn.executemany("INSERT INTO replies VALUES (?, ?, ?, ?)", rows)
    else:
        conn.executemany("INSERT INTO entries VALUES (?, 'transcript', NULL, ?)", [(f"k{i}", b"v" * size) for i in range(entries)])
    conn.close()


def random_bytes(path: Path, cache_class: type) -> None:
    path.write_bytes(random.Random(0).randbytes(8192))


def truncated(path: Path, cache_class: type) -> None:
    write_database(path, cache_class, 100)
    path.write_bytes(path.read_bytes()[:3000])


CORRUPTIONS: dict[str, Callable[[Path, type], None]] = {"random_bytes": random_bytes, "truncated": truncated}


# -- the file itself ---------------------------------------------------------------------------------
@pytest.mark.parametrize("corruption", CORRUPTIONS)
@pytest.mark.parametrize("kind", CACHES)
def test_a_corrupt_file_is_moved_aside_once_and_a_fresh_cache_serves(tmp_path, caplog, kind, corruption):
    path = tmp_path / "cache.sqlite"
    CORRUPTIONS[corruption](path, CACHES[kind])
    original = path.read_bytes()

    cache = CACHES[kind](path)
    put(cache, "a", "kept")
    assert get(cache, "a") == "kept" and len(cache) == 1

    [aside] = tmp_path.glob("cache.sqlite.corrupt-*")
    assert aside.read_bytes() == original  # moved, not deleted: the evidence stays
    [problem] = problems_for(path)
    assert problem["kind"] == "corrupt" and problem["moved_to"] == str(aside)
    assert len(warnings_naming(caplog, path)) == 1
    assert get(CACHES[kind](path), "a") == "kept"  # the fresh file is an ordinary cache
    assert len(problems_for(path)) == 1


@pytest.mark.parametrize("kind", CACHES)
def test_pages_garbled_after_opening_are_found_at_lookup(tmp_path, caplog, kind):
    path = tmp_path / "cache.sqlite"
    write_database(path, CACHES[kind], 200)
    data = bytearray(path.read_bytes())
    noise = random.Random(1)
    data[8192:] = bytes(noise.randrange(256) for _ in range(len(data) - 8192))  # keep the schema page
    path.write_bytes(bytes(data))

    cache = CACHES[kind](path)
    assert problems_for(path) == []  # the schema still reads
    assert get(cache, "k5") is None  # the lookup meets the garbled pages: a miss, not an exception
    [problem] = problems_for(path)
    assert problem["kind"] == "corrupt" and "malformed" in problem["detail"]
    put(cache, "b", "fresh")
    assert get(cache, "b") == "fresh" and len(cache) == 1
    assert len(warnings_naming(caplog, path)) == 1


@pytest.mark.parametrize("kind", CACHES)
def test_a_folder_in_the_way_is_bypassed_and_left_alone(tmp_path, caplog, kind):
    path = tmp_path / "cache.sqlite"
    (path / "inside").mkdir(parents=True)
    cache = CACHES[kind](path)
    for attempt in range(3):
        put(cache, "a", "value")
        assert get(cache, "a") is None
    assert len(cache) == 0 and not cache.usable
    assert (path / "inside").is_dir() and not list(tmp_path.glob("cache.sqlite.corrupt-*"))
    [problem] = problems_for(path)
    assert problem["kind"] == "unusable" and "folder" in problem["detail"]
    assert len(warnings_naming(caplog, path)) == 1


class _RefusesWrites(sqlite3.Connection):
    """A connection to a file that may only be read (what SQLite reports for a read-only file)."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.strip().upper().startswith(("INSERT", "CREATE", "PRAGMA JOURNAL_MODE")):
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return super().execute(sql, *args)


@pytest.mark.parametrize("kind", CACHES)
def test_a_read_only_file_serves_lookups_and_stores_nothing(tmp_path, caplog, monkeypatch, kind):
    path = tmp_path / "cache.sqlite"
    put(CACHES[kind](path), "old", "stored earlier")
    real_connect = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if not kwargs.get("uri"):  # read-write opens; the read-only (mode=ro) open works
            kwargs["factory"] = _RefusesWrites
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    cache = CACHES[kind](path)
    assert get(cache, "old") == "stored earlier"
    put(cache, "new", "value")
    assert get(cache, "new") is None and not cache.writable and cache.usable
    assert [p["kind"] for p in problems_for(path)] == ["read_only"]
    assert len(warnings_naming(caplog, path)) == 1


@pytest.mark.parametrize("kind", CACHES)
def test_a_full_disk_drops_writes_once_reported_and_keeps_reading(tmp_path, caplog, monkeypatch, kind):
    path = tmp_path / "cache.sqlite"
    put(CACHES[kind](path), "old", "stored earlier")
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # the file cannot grow: SQLITE_FULL
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    cache = CACHES[kind](path)
    for i in range(3):
        put(cache, f"big{i}", "x" * 20_000)
        assert get(cache, f"big{i}") is None
    assert get(cache, "old") == "stored earlier"
    [problem] = problems_for(path)
    assert problem["kind"] == "write_failed" and "full" in problem["detail"]
    assert len(warnings_naming(caplog, path)) == 1


def test_two_processes_meeting_one_corrupt_file_move_it_aside_once(tmp_path):
    import multiprocessing

    path = tmp_path / "shared.sqlite"
    random_bytes(path, OutputCache)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    processes = [context.Process(target=_open_and_write, args=(str(path), w, barrier)) for w in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    assert len(list(tmp_path.glob("shared.sqlite.corrupt-*[0-9Z]"))) == 1
    cache = OutputCache(path)
    assert len(cache) == 40 and get(cache, "1-19") == "text 1 19"


def _open_and_write(path: str, worker: int, barrier: Any) -> None:
    barrier.wait(60)  # both open the corrupt file at about the same time
    cache = OutputCache(path)
    for i in range(20):
        cache.put_text(f"{worker}-{i}", "transcript", f"text {worker} {i}")


def test_failure_kinds():
    assert failure_kind(sqlite3.DatabaseError("file is not a database")) == "corrupt"
    assert failure_kind(sqlite3.DatabaseError("database disk image is malformed")) == "corrupt"
    assert failure_kind(sqlite3.OperationalError("database or disk is full")) == "full"
    assert failure_kind(sqlite3.OperationalError("attempt to write a readonly database")) == "read_only"
    assert failure_kind(sqlite3.OperationalError("database is locked")) == "other"


# -- whole runs --------------------------------------------------------------------------------------
def _judged_items(tmp_path: Path, count: int) -> list[dict[str, Any]]:
    save_png(tmp_path / "gen.png", scene(64, 64, seed=2))
    parts = [{"type": "image", "path": "gen.png"}]
    return [{"task": "i_object_include", "instance_id": f"i_object_include/{i}", "parts": parts} for i in range(count)]


class _FullDisk(sqlite3.Connection):
    """Every insert fails as on a full disk."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.strip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


def test_a_full_disk_never_costs_a_judge_reply(tmp_path, mmmg_instructions, vlm_env, monkeypatch, caplog):  # noqa: F811
    vlm_env.script(always(YES))
    monkeypatch.setattr(hub_module, "_HUB", None)
    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real_connect(*a, **{**k, "factory": _FullDisk}))

    rows = score_items(_judged_items(tmp_path, 4), base_dir=tmp_path, instructions=mmmg_instructions)

    assert [row["status"] for row in rows] == ["scored"] * 4 and all(row["score"] == 1.0 for row in rows)
    questions = sum(len(row["evidence"]["judge"]) for row in rows)
    assert vlm_env.count == questions  # each question paid for once, its reply used despite the failed write
    judge_file = tmp_path / "cache" / "judge.sqlite"
    assert [p["kind"] for p in problems_for(judge_file)] == ["write_failed"]
    assert len(warnings_naming(caplog, judge_file)) == 1


def test_a_corrupt_judge_cache_is_replaced_and_every_row_scored(tmp_path, mmmg_instructions, vlm_env, monkeypatch, caplog):  # noqa: F811
    vlm_env.script(always(YES))
    monkeypatch.setattr(hub_module, "_HUB", None)
    judge_file = tmp_path / "cache" / "judge.sqlite"
    judge_file.parent.mkdir()
    random_bytes(judge_file, JudgeCache)

    rows = score_items(_judged_items(tmp_path, 4), base_dir=tmp_path, instructions=mmmg_instructions)
    assert [row["status"] for row in rows] == ["scored"] * 4
    assert len(list(judge_file.parent.glob("judge.sqlite.corrupt-*[0-9Z]"))) == 1
    assert [p["kind"] for p in problems_for(judge_file)] == ["corrupt"]
    assert len(warnings_naming(caplog, judge_file)) == 1

    sent = vlm_env.count
    monkeypatch.setattr(hub_module, "_HUB", None)
    again = score_items(_judged_items(tmp_path, 4), base_dir=tmp_path, instructions=mmmg_instructions)
    assert vlm_env.count == sent and again == rows  # the fresh cache answers the rerun


def test_worker_processes_report_cache_problems_to_the_parent_once(tmp_path, caplog):
    path = tmp_path / "outputs.sqlite"
    random_bytes(path, OutputCache)
    work = [
        WorkItem(
            task="i_structure", instance=Instance(id=f"i_structure/{i}", data={"order": ["i"]}), parts=(),
            instance_id=f"i_structure/{i}", sample=0, model=None, line=i + 1, key=f"k{i}", verifier="i_structure@1:mmmg",
        )  # fmt: skip
        for i in range(4)
    ]
    executor = ProcessExecutor(workers=2, timeout=60.0, initializer=OutputCache, initargs=(str(path),))
    rows = list(executor.run(work))
    assert len(rows) == 4
    [problem] = problems_for(path)  # met in a worker (the parent never opened the file), reported here
    assert problem["kind"] == "corrupt"
    assert len(warnings_naming(caplog, path)) == 1


def test_a_run_with_workers_scores_every_row_despite_a_corrupt_judge_cache(tmp_path, mmmg_instructions, vlm_env, monkeypatch):  # noqa: F811
    vlm_env.script(always(YES))
    judge_file = tmp_path / "cache" / "judge.sqlite"
    judge_file.parent.mkdir()
    random_bytes(judge_file, JudgeCache)
    manifest = write_manifest(tmp_path / "manifest.jsonl", _judged_items(tmp_path, 6))

    outcome = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out", instructions=mmmg_instructions, workers=2))
    rows = [json.loads(line) for line in outcome.results_path.read_text().splitlines()]
    assert [row["status"] for row in rows] == ["scored"] * 6
    assert len(list(judge_file.parent.glob("judge.sqlite.corrupt-*[0-9Z]"))) == 1
    assert [p["kind"] for p in problems_for(judge_file)] == ["corrupt"]
