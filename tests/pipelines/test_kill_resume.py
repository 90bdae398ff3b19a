"""A real ``mmverify score`` process killed with SIGKILL part-way, again and again, resumes to exactly
the file an uninterrupted run writes: nothing lost, nothing duplicated.

Every item asks a local judge server one question, and the server answers only when the test lets
it (``VLMServer.hold``/``release``).  The run can therefore never finish before a kill lands: the
test kills it at progress points it observes in the results file, or just after letting one more
reply out (somewhere inside scoring or writing that item), whatever the machine's speed.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.conftest import save_png, scene, write_manifest
from tests.vlm_server import MODEL, RecordedRequest, VLMServer
from tests.waiting import wait_until

ITEMS = 40
RUN_GUARD_S = 240  # a hang guard for whole runs, never a measurement


def _item(request: RecordedRequest) -> int:
    """The manifest position of the item a judge request is about (its object's number)."""
    match = re.search(r"object (\d+)", request.prompt)
    assert match, request.prompt
    return int(match.group(1))


def _answer(request: RecordedRequest) -> str:
    """Yes for even-numbered objects, No for odd ones: rows with different scores."""
    return f"I looked at the image.\nAnswer: {'Yes' if _item(request) % 2 == 0 else 'No'}"


@pytest.fixture
def judge_server() -> Iterator[VLMServer]:
    server = VLMServer()
    server.script(_answer)
    try:
        yield server
    finally:
        server.close()


def _manifest(tmp_path: Path) -> Path:
    lines = []
    for i in range(ITEMS):
        save_png(tmp_path / f"g{i}.png", scene(48, 48, seed=i))
        lines.append({"task": "i_object_attribute", "instance": {"object": f"object {i}"}, "parts": [{"type": "image", "path": f"g{i}.png"}]})
    return write_manifest(tmp_path / "m.jsonl", lines)


class Run:
    """One ``mmverify score --workers 2`` process, in its own process group, judged by ``server``."""

    _started = itertools.count()

    def __init__(self, manifest: Path, out: Path, server: VLMServer, workers: int = 2) -> None:
        # the run's requests carry its own key, so a request that a killed run's worker sent just
        # before it died (and that the server reads only later) is never taken for this run's
        self.token = f"run-{next(Run._started)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MMVERIFY_VLM_") and k != "MMVERIFY_OFFLINE"}
        env |= {
            "OPENAI_API_KEY": self.token,
            "MMVERIFY_VLM_BASE_URL": server.url,
            "MMVERIFY_VLM_MODEL": MODEL,
            "MMVERIFY_VLM_CACHE": "off",  # every resumed item asks again: replies come only from the test
            "MMVERIFY_VLM_TIMEOUT": "3600",  # a held request waits as long as the test wants
            "MMVERIFY_VLM_BACKOFF": "0.001",
            "MMVERIFY_CACHE_DIR": str(out.parent / "model-cache"),
        }
        out.mkdir(parents=True, exist_ok=True)
        self.results = out / "results.jsonl"
        self.log = out.parent / f"{out.name}.stderr"
        command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out), "--workers", str(workers), "-q"]
        with open(self.log, "ab") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True)

    def mine(self, request: RecordedRequest) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.token}"

    def held(self, server: VLMServer) -> int:
        return server.held_by(self.mine)

    def stderr(self, tail: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def processes(self) -> list[int]:
        """The score process and its worker processes (not multiprocessing's resource tracker)."""
        return [self.process.pid, *_children(self.process.pid, b"spawn_main")]

    def stacks(self) -> str:
        """Every thread's stack in the score process and its workers (SIGUSR1), for a hang report."""
        for pid in self.processes():
            try:
                _dump_stacks(self, pid)
            except (ProcessLookupError, AssertionError):  # gone, or no whole dump within the guard
                pass
        return self.stderr(tail=30_000)

    def finish(self) -> int:
        return self.process.wait(timeout=RUN_GUARD_S)

    def kill(self) -> None:
        """SIGKILL the score process, then the worker processes it leaves behind."""
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=RUN_GUARD_S) == -signal.SIGKILL, f"the run ended before the kill: {self.stderr()}"
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# The outermost frame of a main thread, which faulthandler lists last: the end of a process's dump.
DUMP_END = re.compile(r'(in _run_module_as_main|File "<string>", line 1 in <module>)\n')


def _dump_stacks(run: Run, pid: int, guard_s: float = 10) -> None:
    """Signal one process and wait until its dump is whole: dumps written at once interleave in
    the shared log (faulthandler writes a line in pieces)."""
    ends = lambda: len(DUMP_END.findall(run.log.read_text(errors="replace")))  # noqa: E731
    before = ends()
    os.kill(pid, signal.SIGUSR1)
    wait_until(lambda: ends() > before, timeout=guard_s, message=lambda: f"the end of process {pid}'s stacks")


def _children(parent: int, marker: bytes) -> list[int]:
    """Pids of ``parent``'s child processes whose command line contains ``marker`` (Linux /proc)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == parent and marker in command:
            found.append(int(entry.name))
    return sorted(found)


def _rows(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _await_request(run: Run, server: VLMServer, done: Callable[[], bool] = lambda: False) -> bool:
    """Wait until the run has a judge request held (True) or ``done()`` holds (False)."""
    wait_until(
        lambda: run.held(server) > 0 or done() or run.process.poll() is not None,
        timeout=RUN_GUARD_S,
        message=lambda: f"a judge request ({_rows(run.results)} rows so far; stderr and stacks: {run.stacks()})",
    )
    assert run.process.poll() is None, f"the run exited with {run.process.returncode}: {run.stderr()}"
    return run.held(server) > 0 and not done()


def _release_earliest(run: Run, server: VLMServer) -> int:
    """Let out the reply to the run's held request for the earliest item; that item's position."""
    earliest = min(server.held_requests(run.mine), key=_item)
    server.release(1, lambda request: request is earliest)
    return _item(earliest)


def _advance(run: Run, server: VLMServer, rows: int) -> None:
    """Release held replies one at a time, earliest item first, until the results file holds
    ``rows`` complete rows.

    Rows are written in manifest order, so the earliest held item is the one the file waits for.
    After each release the next one waits until that item's row is written or a new request comes
    (an earlier item's, which is then the one to release, or a worker's next item), so replies run
    at most the workers' items in flight ahead of the rows, however slowly the parent writes.  The
    wait cannot stall: the row is missing only while the item or an earlier one is unfinished, and
    an earlier one that was not held then still has its request to send."""
    reached = lambda: _rows(run.results) >= rows  # noqa: E731
    while _await_request(run, server, reached):
        seen = server.count
        item = _release_earliest(run, server)
        wait_until(
            lambda: _rows(run.results) > item or server.count > seen or reached() or run.process.poll() is not None,
            timeout=RUN_GUARD_S,
            message=lambda: f"item {item}'s row or the next judge request ({_rows(run.results)} rows; stderr and stacks: {run.stacks()})",
        )


def _kill_part_way(manifest: Path, out: Path, server: VLMServer, rows: int, mid_item: bool, workers: int = 2) -> None:
    """Start a run, let it write ``rows`` more rows, SIGKILL it; with ``mid_item`` the kill comes
    right after one more reply has gone out, while that item is being scored or written."""
    run = Run(manifest, out, server, workers)
    _advance(run, server, _rows(run.results) + rows)
    if mid_item:
        _await_request(run, server)
        _release_earliest(run, server)
    run.kill()
    server.release(server.held)  # requests of the killed workers: nobody waits for their replies


@pytest.fixture
def reference(tmp_path: Path, judge_server: VLMServer) -> tuple[Path, bytes]:
    """The manifest and the results file of an uninterrupted run."""
    manifest = _manifest(tmp_path)
    run = Run(manifest, tmp_path / "reference", judge_server)
    assert run.finish() == 0, run.stderr()
    expected = run.results.read_bytes()
    rows = [json.loads(line) for line in expected.splitlines()]
    assert [row["status"] for row in rows] == ["scored"] * ITEMS, run.stderr()
    assert [row["score"] for row in rows] == [float(i % 2 == 0) for i in range(ITEMS)]
    return manifest, expected


def _resume(manifest: Path, out: Path, server: VLMServer) -> list[bytes]:
    """Finish the run with every reply let through; its rows, one per item (a diff shows which differ)."""
    server.open()
    run = Run(manifest, out, server)
    assert run.finish() == 0, run.stderr()
    return run.results.read_bytes().splitlines(keepends=True)


@pytest.mark.slow
def test_repeated_sigkills_at_random_points_then_resume(tmp_path: Path, judge_server: VLMServer, reference: tuple[Path, bytes]):
    manifest, expected = reference
    judge_server.hold()
    rng = random.Random(7)
    out = tmp_path / "killed"
    # one in-process scorer: each released reply is exactly the next row, so five kills at seeded
    # random points stay well inside the run (the two-worker case is the test below)
    for _ in range(5):  # at most 5 x (3 + 1) rows < ITEMS: never the whole run
        before = _rows(out / "results.jsonl")
        _kill_part_way(manifest, out, judge_server, rng.randint(1, 3), mid_item=rng.random() < 0.5, workers=1)
        partial = (out / "results.jsonl").read_bytes()
        assert partial.count(b"\n") > before and partial.count(b"\n") < ITEMS
        assert expected.startswith(partial[: partial.rfind(b"\n") + 1]), "complete rows are a prefix of the reference"
    assert _resume(manifest, out, judge_server) == expected.splitlines(keepends=True)


def test_a_kill_mid_run_resumes_to_the_same_file(tmp_path: Path, judge_server: VLMServer, reference: tuple[Path, bytes]):
    manifest, expected = reference
    judge_server.hold()
    out = tmp_path / "killed"
    _kill_part_way(manifest, out, judge_server, 2, mid_item=False)
    assert 2 <= _rows(out / "results.jsonl") < ITEMS
    assert _resume(manifest, out, judge_server) == expected.splitlines(keepends=True)


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(signal, "SIGUSR1"), reason="needs Linux /proc and SIGUSR1")
def test_sigusr1_prints_the_stacks_of_the_run_and_its_workers_and_the_run_goes_on(
    tmp_path: Path, judge_server: VLMServer, reference: tuple[Path, bytes]
):
    manifest, expected = reference
    judge_server.hold()
    run = Run(manifest, tmp_path / "signalled", judge_server)
    # each worker asks its first question only from inside its loop: both handlers are installed
    wait_until(lambda: run.held(judge_server) >= 2 or run.process.poll() is not None, timeout=RUN_GUARD_S, message=run.stderr)
    parent, *workers = run.processes()
    assert len(workers) == 2, f"expected two workers, found {workers}"
    for pid in (parent, *workers):
        _dump_stacks(run, pid, guard_s=RUN_GUARD_S)
    log = run.log.read_text(errors="replace")
    assert re.search(r'pool\.py", line \d+ in run\n', log), run.stderr(tail=30_000)  # the parent, in its loop
    assert len(re.findall(r'pool_worker\.py", line \d+ in process_main\n', log)) == 2, run.stderr(tail=30_000)
    assert run.process.poll() is None and len(run.processes()) == 3, "a signalled process ended"
    judge_server.open()
    assert run.finish() == 0, run.stderr()
    assert run.results.read_bytes() == expected
