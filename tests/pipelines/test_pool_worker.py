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
