"""Executors: score work items in-process or in a pool of worker processes, emitting rows in order.

* ``LocalExecutor`` (``--workers 1``) scores in this process; the per-item timeout interrupts Python
  code through ``SIGALRM`` (main thread only).
* ``ProcessExecutor`` (``--workers N``, :mod:`.pool`) and ``RayExecutor`` (``--executor ray``,
  :mod:`.ray_executor`) keep N workers; an item over its time limit has its worker killed and
  replaced, so even a hang inside native code cannot stall the run, and a worker that dies
  (segfault, out of memory) costs one ``worker_crashed`` row, not the run.

All emit rows in plan order whatever the completion order, so results are identical for any N.
"""

from __future__ import annotations

import signal
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Union

from ..core.errors import ErrorCode, GenerationFault, ScoringError
from ..core.types import Check
from ..tasks.catalog import TASK_REGISTRY
from ..tasks.response import Response
from .plan import WorkItem
from .results import make_row

Planned = Union[WorkItem, dict]
_TASKS: dict[tuple[str, str], Any] = {}  # (task id, profile) -> built task


class ItemTimeout(Exception):
    pass


def _passed(item: WorkItem, task: Any, check: Check) -> bool | None:
    if item.threshold is not None:
        return item.threshold.passes(check)
    if check.passed is not None:
        return check.passed
    return check.score >= 1.0 if task.binary else None


def _row(item: WorkItem, **fields: Any) -> dict[str, Any]:
    return make_row(
        task=item.task,
        instance_id=item.instance_id,
        sample=item.sample,
        model=item.model,
        key=item.key,
        line=item.line,
        verifier=item.verifier,
        **fields,
    )


def error_row(item: WorkItem, code: str, message: str) -> dict[str, Any]:
    return _row(item, error_code=code, error_message=message)


def score_item(item: WorkItem) -> dict[str, Any]:
    """Score one item; every outcome is a row (never raises, except for timeouts and interrupts)."""
    task = None
    try:
        built = (item.task, item.profile)
        if built not in _TASKS:
            _TASKS[built] = TASK_REGISTRY.get(item.task).build(item.profile)
        task = _TASKS[built]
        check = task.score(item.instance, Response(item.parts, item.limits))
        return _row(item, check=check, passed=_passed(item, task, check))
    except GenerationFault as fault:
        evidence = dict(fault.evidence)
        if fault.message:
            evidence["message"] = fault.message
        check = Check.fail(fault.reason, **evidence)
        # a rule-breaking generation fails any pass/fail decision; continuous tasks have none
        decided = item.threshold is not None or bool(getattr(task, "binary", False))
        return _row(item, check=check, passed=False if decided else None)
    except ScoringError as exc:
        return error_row(item, exc.code, exc.message)
    except (ItemTimeout, KeyboardInterrupt):
        raise
    except MemoryError:
        return error_row(item, ErrorCode.INTERNAL, "out of memory while scoring this item")
    except Exception as exc:  # a scorer bug must cost one row, not the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = f"{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"
        return error_row(item, ErrorCode.INTERNAL, message)


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    usable = seconds and threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not usable:
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise ItemTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_row(item: WorkItem, seconds: float | None) -> dict[str, Any]:
    return error_row(item, ErrorCode.TIMEOUT, f"scoring took longer than {seconds:g} s")


@dataclass
class LocalExecutor:
    timeout: float | None = None

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        for entry in planned:
            if isinstance(entry, dict):
                yield entry
                continue
            try:
                with _alarm(self.timeout):
                    row = score_item(entry)
            except ItemTimeout:
                row = timeout_row(entry, self.timeout)
            yield row
