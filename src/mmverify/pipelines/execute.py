"""Executors: score work items in-process or in a pool of worker processes, emitting rows in order.

* ``LocalExecutor`` (``--workers 1``) scores in this process; the per-item timeout interrupts Python
  code through ``SIGALRM`` (main thread only).
* ``ProcessExecutor`` (``--workers N``, :mod:`.process_executor`) and ``RayExecutor`` (``--executor ray``,
  :mod:`.ray_executor`) keep N workers; an item over its time limit has its worker killed and
  replaced, so even a hang inside native code cannot stall the run, and a worker that dies
  (segfault, out of memory) costs one ``worker_crashed`` row, not the run.  Workers score batches
  of model items together (see :mod:`.pool`).

All emit rows in plan order whatever the completion order, so results are identical for any N.

Warm-up has its own budget (``warmup_timeout``, default 600 s), apart from the per-item limit: the
first item of a task in a process pays for starting the worker, importing and building the task
(and its optional ``warm_up()`` hook), and for the lazy imports and model loading of its first use.
That first use is scored under the warm-up budget; its row is kept when scoring took no longer than
the item limit, otherwise the item is scored again, warm, under the item limit -- so a slow warm-up
never turns into ``timeout`` rows, and a slow item still does.  Running out of the warm-up budget
gives a ``warmup_timeout`` row.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Union

from ..core import waits
from ..core.decoding import INLINE, DecodePool, Decoder
from ..core.errors import ErrorCode, GenerationFault, ScoringError, raised_at
from ..core.interrupts import Interrupt
from ..core.types import Check
from ..models.hub import get_hub
from ..tasks.catalog import CATALOG, TASK_REGISTRY
from ..tasks.models import declared
from ..tasks.response import Response
from .plan import WorkItem
from .results import error_row as build_error_row, make_row

Planned = Union[WorkItem, dict]
_TASKS: dict[tuple[str, str], Any] = {}  # (task id, profile) -> built task
DEFAULT_WARMUP_TIMEOUT = 600.0  # seconds for worker start-up, task import/build and first use
MAX_TIME_LIMIT_S = 1e6  # about 11.6 days: longer limits overflow the system's timers (setitimer, timed waits)


def check_time_limit(seconds: float | None, name: str, no_limit: str = "None") -> None:
    """Refuse a time limit the deadlines cannot hold: None is no limit; anything else must be a
    number of seconds above 0 and at most :data:`MAX_TIME_LIMIT_S` (NaN and infinity refused).
    ``name`` and ``no_limit`` say the setting as its caller wrote it (``--timeout``, ``0``)."""
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_TIME_LIMIT_S:
        raise ValueError(
            f"{name} must be a number of seconds above 0 and at most {MAX_TIME_LIMIT_S:,.0f} ({no_limit} for no limit); got {seconds!r}"
        )


class ItemTimeout(Interrupt):
    """An item ran past its time limit (raised into its thread by the deadline watchdog)."""


def _passed(item: WorkItem, task: Any, check: Check) -> bool | None:
    if item.threshold is not None:
        return item.threshold.passes(check)
    if check.passed is not None:
        return check.passed
    return check.score >= 1.0 if task.binary else None


def error_row(item: WorkItem, code: str, message: str) -> dict[str, Any]:
    return build_error_row(item.identity, code, message)


def _task_for(item: WorkItem) -> Any:
    built = (item.task, item.profile)
    if built not in _TASKS:
        _TASKS[built] = TASK_REGISTRY.get(item.task).build(item.profile)
    return _TASKS[built]


def uses_models(item: WorkItem) -> bool:
    """Whether the item's task calls a model or a judge (tasks outside the catalog are assumed to)."""
    info = CATALOG.get(item.task)
    return info is None or bool(info.needs)


def is_warm(item: WorkItem) -> bool:
    """Whether the item's task had its first use here (its warm-up is behind it) -- with the models
    in force: a task warmed under other settings is cold again, their models are not loaded."""
    built = (item.task, item.profile)
    if built not in _TASKS:
        return False
    if not uses_models(item):
        return True
    try:
        return built in get_hub().warm_tasks
    except Exception:  # a hub that cannot be built: the warm-up path turns that into the item's row
        return False


def warm_up(item: WorkItem) -> tuple[dict[str, Any], float]:
    """The first use of the item's task in this process: import and build the task, run its
    optional ``warm_up()`` hook, then score the item (lazy imports and model loading happen here).

    Returns the row and the seconds its scoring took; callers run this under the warm-up budget
    and keep the row only when those seconds fit the item's own limit (see :func:`fits`).
    """
    try:
        hook = getattr(_task_for(item), "warm_up", None)
        if callable(hook):
            with declared(item.task):
                hook()
    except (ItemTimeout, KeyboardInterrupt):
        raise
    except Exception:
        pass  # scoring meets the same failure and turns it into the item's row
    started = time.monotonic()
    row = score_item(item)
    seconds = time.monotonic() - started
    if uses_models(item):  # its first use ran to the end: models are loaded
        try:
            get_hub().warm_tasks.add((item.task, item.profile))
        except Exception:
            pass  # no hub, no warmth: the next item takes the warm-up path again
    return row, seconds


def check_decode_processes(processes: int, in_flight: int) -> None:
    """Decoding processes serve items scored together (``in_flight`` > 1)."""
    if processes < 0:
        raise ValueError("decode_processes must be >= 0")
    if processes and in_flight < 2:
        raise ValueError("decode processes serve items scored together: they need in_flight (--batch-items) > 1")


def fits(seconds: float, limit: float | None) -> bool:
    return not limit or seconds <= limit


def score_item(item: WorkItem, decoder: Decoder = INLINE) -> dict[str, Any]:
    """Score one item, its media decoded by ``decoder``; every outcome is a row (never raises,
    except for timeouts and interrupts)."""
    task = None
    try:
        task = _task_for(item)
        with declared(item.task):
            check = task.score(item.instance, Response(item.parts, item.limits, decoder))
        return make_row(**item.identity.fields(), check=check, passed=_passed(item, task, check))
    except GenerationFault as fault:
        evidence = dict(fault.evidence)
        if fault.message:
            evidence["message"] = fault.message
        check = Check.fail(fault.reason, **evidence)
        # a rule-breaking generation fails any pass/fail decision; continuous tasks have none
        decided = item.threshold is not None or bool(getattr(task, "binary", False))
        return make_row(**item.identity.fields(), check=check, passed=False if decided else None)
    except ScoringError as exc:
        return error_row(item, exc.code, exc.message)
    except (ItemTimeout, KeyboardInterrupt):
        raise
    except MemoryError:
        return error_row(item, ErrorCode.INTERNAL, "out of memory while scoring this item")
    except Exception as exc:  # a scorer bug must cost one row, not the run
        message = f"{described(exc)} (at {raised_at(exc)})"
        return error_row(item, ErrorCode.INTERNAL, message)


def described(exc: BaseException) -> str:
    """``Type: message``, or the type alone when the exception cannot say what it is."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001  (a __str__ that raises must not cost the item its row)
        return type(exc).__name__


def end_if_late(fired: bool, escaping: BaseException | None) -> None:
    """Ends a timed block whose deadline fired as a timeout, whatever the block did next: native
    code can drop the exception (cffi discards one raised in a callback, as in soundfile's reads)
    and let a late item finish, or finish on a cut-short read.  An exception of another kind
    already leaving the block (an interrupt, a host's own alarm) stands.

    A caller that kept ``escaping`` in a local clears it afterwards: the exception's traceback
    holds the caller's frame, so the local would make a cycle that only the garbage collector
    frees, and with it every frame the exception passed through and their locals (a decoding
    process's claim on a worker among them)."""
    if fired and (escaping is None or isinstance(escaping, ItemTimeout)):
        raise ItemTimeout()


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    usable = seconds and threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not usable:
        yield
        return
    fired = False

    def on_alarm(signum: int, frame: Any) -> None:
        nonlocal fired
        fired = True
        raise ItemTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    previous_due = waits.current_due()
    escaping: BaseException | None = None
    try:
        signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
        waits.set_due(time.monotonic() + float(seconds))  # what the thread's waits and a served judge keep to
        try:
            yield
        except BaseException as exc:
            escaping = exc
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            try:
                end_if_late(fired, escaping)
            finally:
                escaping = None  # see end_if_late
    finally:
        # also where the alarm, due just as the block ended, raised while it was being disarmed: a
        # deadline left behind would be sent with a later warm-up's questions
        waits.set_due(previous_due)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def timeout_row(item: WorkItem, seconds: float | None) -> dict[str, Any]:
    return error_row(item, ErrorCode.TIMEOUT, f"scoring took longer than {seconds:g} s")


def warmup_timeout_row(item: WorkItem, seconds: float | None) -> dict[str, Any]:
    message = (
        f"warm-up took longer than {seconds:g} s (worker start-up, importing and building task {item.task!r}, "
        "and its first use: lazy imports, model loading); the item's own time limit had not started"
    )
    return error_row(item, ErrorCode.WARMUP_TIMEOUT, message)


def score_locally(item: WorkItem, timeout: float | None, warmup_timeout: float | None) -> dict[str, Any]:
    """Score one item in this process: a first use of its task under ``warmup_timeout``, then (unless
    that row already fits) the item under ``timeout``."""
    if not is_warm(item):
        try:
            with _alarm(warmup_timeout):
                row, seconds = warm_up(item)
        except ItemTimeout:
            return warmup_timeout_row(item, warmup_timeout)
        if fits(seconds, timeout):
            return row
    try:
        with _alarm(timeout):
            return score_item(item)
    except ItemTimeout:
        return timeout_row(item, timeout)


@dataclass
class LocalExecutor:
    timeout: float | None = None
    warmup_timeout: float | None = DEFAULT_WARMUP_TIMEOUT
    in_flight: int = 1  # items scored together, their model calls batched (see pipelines/batch.py)
    decode_processes: int = 0  # processes decoding the media of items scored together (0: their own threads)

    def __post_init__(self) -> None:
        check_decode_processes(self.decode_processes, self.in_flight)

    def _alone(self, item: WorkItem) -> dict[str, Any]:
        return score_locally(item, self.timeout, self.warmup_timeout)

    def run(self, planned: Iterable[Planned]) -> Iterator[dict[str, Any]]:
        if self.in_flight > 1:
            from .batch import score_together

            pool = DecodePool(self.decode_processes) if self.decode_processes else None
            try:
                yield from score_together(planned, self._alone, in_flight=self.in_flight, timeout=self.timeout, decoder=pool or INLINE)
            finally:
                if pool is not None:
                    pool.close()
            return
        for entry in planned:
            yield entry if isinstance(entry, dict) else self._alone(entry)
