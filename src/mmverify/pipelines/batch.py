"""Score many items together so that their model calls share batches.

Up to ``in_flight`` items are scored at once, each in an item thread: decoding, resampling and
cutting segments run there, and every model forward an item asks for goes to one
:class:`~mmverify.models.batching.BatchRound`, whose device thread merges the requests of all
items per backend into fixed-shape batches.  A row is therefore the same bytes as when its item is
scored alone (see :mod:`mmverify.models.batching`), and rows come out in plan order.  Media can be
decoded in processes instead (a :class:`~mmverify.core.decoding.DecodePool`; the same arrays), so
that the item threads hold the interpreter lock less while the device thread launches kernels.

What stays as it was:

* items of tasks that use no model or judge are scored right here: there is nothing to batch;
* an item whose task is cold (its first use in this process) is scored alone, under the warm-up
  budget, once the items in flight are done -- model loading never races a batch;
* each item has its own time limit and its own typed error row: a bad input in a shared batch
  fails only its own item.  A late item leaves the round (its pending model requests are dropped).
  One that ran out of time while its model request was still queued -- its time went to other
  items' batches, a runaway decode on the device thread say -- is scored again alone, in its own
  thread, under a fresh limit, and only a timeout there is its ``timeout`` row.  One whose own
  computation was running, or that was busy with its own work, gets its ``timeout`` row at once:
  the computation cannot be stopped on the device thread, so it is never started a second time.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections import deque
from typing import Any, Callable, Iterable, Iterator

from ..core.decoding import INLINE, Decoder
from ..core.errors import ErrorCode
from ..models.batching import BatchRound, left_a_queue
from .deadlines import deadline
from .execute import ItemTimeout, Planned, described, error_row, is_warm, score_item, timeout_row, uses_models
from .plan import WorkItem

Row = dict[str, Any]
DEFAULT_IN_FLIGHT = 32


class _Slot:
    """One planned entry's place in the output order."""

    def __init__(self, row: Row | None = None) -> None:
        self.row = row
        self.done = threading.Event()
        if row is not None:
            self.done.set()


def _within(item: WorkItem, timeout: float | None, decoder: Decoder) -> Row | None:
    """``item``'s row, or None when it runs past ``timeout``."""
    try:
        with deadline(timeout):
            return score_item(item, decoder)
    except ItemTimeout:
        return None


def _score_member(
    batch_round: BatchRound, item: WorkItem, timeout: float | None, decoder: Decoder, slot: _Slot, free: threading.Semaphore
) -> None:
    try:
        with batch_round.member(reserved=True):  # counted by score_together as it handed the item over
            slot.row = _within(item, timeout, decoder)
        if slot.row is None and left_a_queue():  # only late for others' batches: alone, in this thread
            slot.row = _within(item, timeout, decoder)
        if slot.row is None:
            slot.row = timeout_row(item, timeout)
    except BaseException as exc:  # noqa: BLE001  (a thread must leave a row, whatever happened)
        slot.row = error_row(item, ErrorCode.INTERNAL, described(exc))
    finally:
        slot.done.set()
        free.release()


class _ItemThreads:
    """At most ``size`` threads that score the items handed to them, started as items arrive and
    kept for the next ones: starting a thread makes the starting thread wait until the new one runs,
    and among busy item threads that wait for the interpreter lock slowed every item's start.  Not a
    ``ThreadPoolExecutor``: its threads are joined at interpreter exit, and an item stuck in native
    code past its deadline would then hold the process open; these are daemon threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._started = 0
        self._idle = 0
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None] = queue.SimpleQueue()

    def submit(self, job: Callable[..., None], *args: Any) -> None:
        """Run ``job(*args)`` in an item thread.  ``job`` should not raise (each item leaves its row);
        if it does, the exception goes to ``threading.excepthook`` and the thread takes the next job."""
        with self._lock:
            start = self._idle <= 0 and self._started < self._size
            if start:
                self._started += 1
            else:
                self._idle -= 1  # the job is taken by a waiting thread, or queued for the next one free
        if start:
            try:
                threading.Thread(target=self._serve, args=((job, args),), name="mmverify-item", daemon=True).start()
            except BaseException:
                with self._lock:
                    self._started -= 1
                raise
        else:
            self._work.put((job, args))

    def _serve(self, first: tuple[Callable[..., None], tuple[Any, ...]]) -> None:
        task: tuple[Callable[..., None], tuple[Any, ...]] | None = first
        while task is not None:
            job, args = task
            try:
                job(*args)
            except BaseException:  # noqa: BLE001  (reported; the thread serves on, or queued jobs would wait for ever)
                threading.excepthook(threading.ExceptHookArgs((*sys.exc_info(), threading.current_thread())))
            with self._lock:
                self._idle += 1
            task = self._work.get()

    def close(self) -> None:
        """Let every thread end once it is done with its item (a thread still busy ends later)."""
        with self._lock:
            started = self._started
        for _ in range(started):
            self._work.put(None)


def _finished_head(slots: deque[_Slot]) -> Iterator[Row]:
    while slots and slots[0].done.is_set():
        yield slots.popleft().row  # type: ignore[misc]


def _all(slots: deque[_Slot]) -> Iterator[Row]:
    while slots:
        slots[0].done.wait()
        yield slots.popleft().row  # type: ignore[misc]


def score_together(
    planned: Iterable[Planned],
    score_alone: Callable[[WorkItem], Row],
    *,
    in_flight: int = DEFAULT_IN_FLIGHT,
    timeout: float | None = None,
    decoder: Decoder = INLINE,
) -> Iterator[Row]:
    """Rows of ``planned`` in order; entries that are already rows pass through.

    ``score_alone`` scores one item the ordinary way (warm-up budget, then the item's limit): it
    takes items without model work and items whose task is cold.  ``decoder`` decodes the media of
    the items scored together (a :class:`~mmverify.core.decoding.DecodePool` keeps that work, and
    the interpreter lock it holds, away from the device thread).
    """
    if in_flight < 1:
        raise ValueError("in_flight must be >= 1")
    batch_round = BatchRound()
    threads = _ItemThreads(in_flight)
    slots: deque[_Slot] = deque()
    free = threading.Semaphore(in_flight)
    try:
        for entry in planned:
            if isinstance(entry, dict):
                slots.append(_Slot(entry))
            elif not uses_models(entry):
                slots.append(_Slot(score_alone(entry)))
            elif not is_warm(entry):
                batch_round.starting(False)
                yield from _all(slots)  # loading a model never races the items in flight
                slots.append(_Slot(score_alone(entry)))
            else:
                if not free.acquire(blocking=False):  # every slot is busy: let partial batches run meanwhile
                    batch_round.starting(False)
                    free.acquire()
                batch_round.starting(True)
                slot = _Slot()
                slots.append(slot)
                batch_round.reserve()  # a member from now: no partial batch runs before its thread joins
                try:
                    threads.submit(_score_member, batch_round, entry, timeout, decoder, slot, free)
                except BaseException:
                    batch_round.unreserve()
                    raise
            yield from _finished_head(slots)
        batch_round.starting(False)
        yield from _all(slots)
    finally:
        threads.close()
        batch_round.close()
