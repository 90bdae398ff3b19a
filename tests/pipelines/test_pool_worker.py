"""A worker process whose parent has gone away ends quietly."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from mmverify.pipelines.plan import Planner, WorkItem
from mmverify.pipelines.pool_worker import process_main
from tests.waiting import HANG_GUARD_S


def test_a_worker_whose_parent_closed_the_pipe_exits_cleanly(tmp_path: Path):
    """Rows it can no longer send are dropped without a traceback (the resumed run rescores them)."""
    line = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "x"}]}
    item = Planner(manifest_dir=tmp_path).plan(1, json.dumps(line))
    assert isinstance(item, WorkItem)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    parent.send([(0, item)])
    parent.close()  # before the worker starts: whatever it sends meets a closed pipe
    worker = context.Process(target=process_main, args=(child, None, None, ()))
    worker.start()
    child.close()
    worker.join(HANG_GUARD_S)
    assert worker.exitcode == 0


def test_a_worker_scores_with_decoding_processes_of_its_own_and_closes_them(monkeypatch):
    """``decode_processes`` reach the worker, which decodes the items it scores together in a pool
    of that size and closes it when the parent says stop; without them, items decode in their threads."""
    from mmverify.core.decoding import INLINE
    from mmverify.pipelines import batch as batch_module, pool_worker
    from mmverify.pipelines.process_executor import ProcessExecutor, ProcessWorker
    from mmverify.pipelines.score import ScoreConfig, make_executor

    made: list = []

    class Pool:
        def __init__(self, processes: int) -> None:
            self.processes, self.closed = processes, False
            made.append(self)

        def close(self) -> None:
            self.closed = True

    given: list = []
    monkeypatch.setattr(pool_worker, "DecodePool", Pool)
    monkeypatch.setattr(pool_worker, "score_batch", lambda batch, timeout, forwarder, decoder: given.append(decoder) or iter(()))
    monkeypatch.setattr(pool_worker.signal, "signal", lambda *args: None)  # this test process keeps its handlers
    monkeypatch.setattr(pool_worker, "dump_stacks_on_sigusr1", lambda: False)
    frozen: list = []  # what was closed when the worker froze its objects for its exit
    monkeypatch.setattr(pool_worker, "freeze_for_exit", lambda: frozen.append([pool.closed for pool in made]))
    for processes in (3, 0):
        parent, child = multiprocessing.Pipe()
        for message in ([(0, "an item")], [(1, "another")], None):
            parent.send(message)
        process_main(child, None, None, (), processes)
    assert [pool.processes for pool in made] == [3] and made[0].closed
    assert frozen == [[True], [True]]  # each end freezes last, after its decoding processes closed
    assert given == [made[0], made[0], INLINE, INLINE]

    together: list = []
    monkeypatch.setattr(batch_module, "score_together", lambda items, alone, **options: together.append(options["decoder"]) or iter(()))
    assert list(pool_worker.score_warm(["one", "two"], None, made[0])) == [] and together == [made[0]]

    config = ScoreConfig(manifest=Path("m.jsonl"), out=Path("out"), workers=2, in_flight=4, decode_processes=2)
    executor = make_executor(config)
    assert isinstance(executor, ProcessExecutor) and executor.decode_processes == 2
    started: list = []

    class Context:  # what a worker process would be started with
        def Pipe(self, duplex: bool) -> tuple:
            return multiprocessing.Pipe(duplex)

        def Process(self, target, args, daemon):  # noqa: N802
            started.append(args[1:])
            return type("NotStarted", (), {"start": lambda self: None})()

    ProcessWorker(Context(), 5.0, None, (), executor.decode_processes)
    assert started == [(5.0, None, (), 2)]
