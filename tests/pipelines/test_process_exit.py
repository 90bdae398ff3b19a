"""How the pool's processes end: together, and without the interpreter's last collection walking
every object a process loaded (see mmverify.core.exits)."""

from __future__ import annotations

import atexit
import gc
import multiprocessing
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from mmverify.pipelines import process_executor
from mmverify.pipelines.context import ScoringContext
from mmverify.pipelines.model_process import model_process_main
from mmverify.pipelines.pool import _stop_all
from mmverify.pipelines.process_executor import ProcessWorker
from tests.waiting import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[2]


def _report_at_exit(barrier: threading.Barrier | None, path: str) -> None:
    """In a spawned process, once it runs (an initializer): as it ends, wait for every other at
    ``barrier`` and write whether they all met and whether the process's objects were frozen by
    then -- objects made while it ran included, so a freeze as it started does not count."""
    made_while_running = [[] for _ in range(100)]

    def report() -> None:
        met = True
        if barrier is not None:
            try:
                barrier.wait(HANG_GUARD_S)
            except threading.BrokenBarrierError:
                met = False
        Path(path).write_text(f"met={met} frozen={_frozen(made_while_running)}")

    atexit.register(report)


def _frozen(value: object) -> bool:
    """Whether ``value`` was frozen: the collector's own lists leave frozen objects out."""
    return gc.get_freeze_count() > 0 and not any(seen is value for seen in gc.get_objects())


def test_workers_asked_to_stop_end_together(tmp_path, monkeypatch):
    """Each worker is asked to stop before any is waited for: two whose exits wait for each other
    both end by themselves.  Asked one at a time, the first waits for the second in vain."""
    monkeypatch.setattr(process_executor, "STOP_WAIT_S", 3 * HANG_GUARD_S)  # no kill: only the order counts
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2)
    paths = [tmp_path / f"worker-{i}" for i in range(2)]
    workers = [ProcessWorker(spawn, None, _report_at_exit, (barrier, str(path))) for path in paths]
    _stop_all(workers)  # type: ignore[arg-type]
    assert [worker.process.exitcode for worker in workers] == [0, 0]
    assert [path.read_text() for path in paths] == ["met=True frozen=True"] * 2


def test_a_stopped_worker_freezes_its_objects_before_its_exit_handlers_run(tmp_path, monkeypatch):
    monkeypatch.setattr(process_executor, "STOP_WAIT_S", 3 * HANG_GUARD_S)  # its start-up too, on a busy machine
    path = tmp_path / "worker"
    worker = ProcessWorker(multiprocessing.get_context("spawn"), None, _report_at_exit, (None, str(path)))
    worker.stop()
    assert worker.process.exitcode == 0
    assert path.read_text() == "met=True frozen=True"


def _write_to_a_cache(folder: str) -> None:
    """In a spawned worker: store a value from a thread of its own, as scoring does."""
    import numpy as np

    from mmverify.models.cache import OutputCache

    cache = OutputCache(Path(folder) / "outputs.sqlite")
    writer = threading.Thread(target=cache.put_array, args=("key", "embedding", np.ones(4, np.float32)))
    writer.start()
    writer.join()
    _KEPT.append(cache)  # alive until the process ends, as a backend's cache is


_KEPT: list = []


def test_a_worker_ends_with_its_caches_closed(tmp_path, monkeypatch):
    """Frozen objects are never collected, so the caches close their connections themselves as the
    process ends: the write-ahead log is folded into the file (a reader that can only open the file
    itself, in a folder it cannot write, sees every value) and its side files are gone."""
    monkeypatch.setattr(process_executor, "STOP_WAIT_S", 3 * HANG_GUARD_S)  # its start-up too, on a busy machine
    worker = ProcessWorker(multiprocessing.get_context("spawn"), None, _write_to_a_cache, (str(tmp_path),))
    worker.stop()
    assert worker.process.exitcode == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["outputs.sqlite"]
    import sqlite3

    reader = sqlite3.connect(f"{(tmp_path / 'outputs.sqlite').as_uri()}?immutable=1", uri=True)
    assert reader.execute("SELECT key FROM entries").fetchall() == [("key",)]
    reader.close()


def test_a_command_ends_with_its_caches_closed(tmp_path):
    probe = (
        "import sys, numpy as np\n"
        "from mmverify.core.exits import freeze_at_exit\n"
        "from mmverify.models.cache import OutputCache\n"
        "freeze_at_exit()\n"  # as the CLI's main does
        f"cache = OutputCache({str(tmp_path / 'outputs.sqlite')!r})\n"
        "cache.put_array('key', 'embedding', np.ones(4, np.float32))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["outputs.sqlite"]


def _model_process_reporting(path: str, *args: object) -> None:
    _report_at_exit(None, path)
    model_process_main(*args)  # type: ignore[arg-type]


def test_the_model_process_freezes_its_objects_once_its_parent_lets_go(tmp_path):
    spawn = multiprocessing.get_context("spawn")
    folder = Path(tempfile.mkdtemp(prefix="mmverify-test-models-"))
    ready, ready_child = spawn.Pipe(duplex=False)
    lifeline_child, lifeline = spawn.Pipe(duplex=False)
    path = tmp_path / "model-process"
    process = spawn.Process(
        target=_model_process_reporting,
        args=(str(path), str(folder / "models.sock"), "token", ScoringContext(), ready_child, lifeline_child),
    )
    process.start()
    ready_child.close()
    lifeline_child.close()
    assert ready.poll(HANG_GUARD_S) and ready.recv() is True
    lifeline.close()  # the parent is done: the process ends
    process.join(HANG_GUARD_S)
    assert process.exitcode == 0
    assert path.read_text() == "met=True frozen=True"
    assert not folder.exists()


def test_the_command_line_freezes_its_objects_after_its_own_exit_handlers():
    """Handlers registered before the command runs after the freeze, those registered while it
    runs (the command's own) before it; what the command made is frozen too."""
    probe = (
        "import atexit, gc, sys\n"
        "from tests.pipelines.test_process_exit import _frozen\n"
        "atexit.register(lambda: print('last', _frozen(made_by_the_command)))\n"  # registered before main's: after it
        "sys.argv = ['mmverify', '--version']\n"
        "from mmverify.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "made_by_the_command = [[] for _ in range(100)]\n"
        "atexit.register(lambda: print('first', gc.get_freeze_count() > 0))\n"  # as the command's own: before it
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["first False", "last True"]
