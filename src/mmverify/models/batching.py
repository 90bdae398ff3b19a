"""Model forwards on fixed batch shapes, merged across the items scored together.

Every backend runs its model through :func:`forward`.  Inputs are grouped by shape and every
forward holds exactly the backend's batch size of rows -- kernels pick their algorithm, and so
their rounding, by shape -- the free rows padded with copies.  Each input sits in the row its
content picks, or rows are packed, by the backend's rule (:mod:`.rows`).  By content, a row's
output depends on its own input alone, so items scored together give the same bytes as items
scored one at a time.  A lone input costs a whole batch: lower a backend's ``batch_size`` where
items come one by one.

Outside a :class:`BatchRound`, :func:`forward` computes at once in the calling thread.  Inside one
(items scored together, see :mod:`mmverify.pipelines.batch`), the item's thread hands its request
to the round's device thread and waits.  The device thread runs a batch of one kind as soon as it
fills every row (or twice a batch is waiting), and a batch of every kind once every item thread
of the round is waiting on a model or done -- so decoding and resampling of some items overlap the
model work of others.  A batch that fails is run again request by request, so one bad input fails
only its own item.  Two rules keep a round moving when an item thread waits on something other
than a model:

* one-off bulk work done under a lock that other items wait on (building a reference index) runs
  :func:`outside_round`: its forwards are computed at once in its own thread, since the items
  blocked on that lock could never join its partial batch;
* an input that has waited ``stall_s`` seconds (since it asked, or since the end of its kind's
  last batch that answered an item, whose members come back to fill the next) runs anyway, in a
  partial batch -- the item threads that are not waiting are busy elsewhere (a judge call, a slow
  decode).

A staged computation (:class:`~.rows.Staged`) whose launch returns while the device still
computes (CLAP on CUDA) is finished later (:mod:`.round_batches`): meanwhile the device thread
launches the next ready batch, at most :data:`MAX_STARTED` at a time, so the host's work on one
batch overlaps the device's on the other.  While a batch is started, only full (or stalled) batches
start: its members count as waiting, but come back with inputs when it lands.

A backend never computes in two threads at once (:mod:`.compute_locks`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Hashable, Iterator, Sequence

from ..core.waits import wait_s
from .compute_locks import computing, count_running
from .round_batches import Group, Launched, Request, compute, each_request, landed, launch, requests_of
from .rows import Compute, Row, RowQueue, ShapeOf, Staged, Waiting, compute_now, content_digest, one_shape, share

__all__ = ["BatchRound", "compute_now", "current_round", "forward", "left_a_queue", "one_shape", "outside_round"]

STALL_S = 1.0  # an input that waited this long runs in a partial batch
MAX_STARTED = 2  # staged batches launched on a device and not yet finished: one computing, one queued
POLL_STARTED_S = 0.002  # how often the device thread looks whether a launched batch has finished

_LOCAL = threading.local()


def current_round() -> "BatchRound | None":
    return getattr(_LOCAL, "round", None)


def left_a_queue() -> bool:
    """Whether this thread's last model request in a round was given up while still queued --
    its computation never started, so the time it lost went to other items' batches."""
    return getattr(_LOCAL, "left_queued", False)


@contextmanager
def outside_round() -> Iterator[None]:
    """Model calls inside are computed at once in this thread, and the thread stops counting as a
    member of its round meanwhile: for one-off bulk work done under a lock other members wait on."""
    batch_round = current_round()
    with nullcontext() if batch_round is None else batch_round.away():
        yield


def forward(
    owner: object, kind: Hashable, inputs: Sequence[Any], compute: Compute, batch_size: int, shape: ShapeOf = one_shape,
    by_content: bool = True, prepare: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """One output per input, in order.  ``kind`` must name everything besides the inputs that
    changes ``compute``'s result (a padding rule, a language): requests of one ``owner`` and
    ``kind`` share batches and are computed by whichever of their ``compute`` comes first.
    ``by_content``: each input in the row its content picks, else rows packed (one rule per owner).
    ``prepare`` makes each input what is computed: in a round here and now, in a bulk call as
    :func:`compute_now` says (packed: as its batch forms); either way its errors reach this caller."""
    items = list(inputs)
    if not items:
        return []
    batch_round = current_round()
    if batch_round is None:
        return compute_now(items, compute, batch_size, shape, owner, by_content, prepare)
    if prepare is not None:
        items = [prepare(item) for item in items]
    return batch_round.submit(owner, kind, items, compute, batch_size, shape, by_content)


class BatchRound:
    """Items scored together: their model requests are merged per backend and kind, and run on
    one device thread.  Item threads join with :meth:`member`."""

    def __init__(self, stall_s: float | None = STALL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s = stall_s  # None: partial batches wait for every member, however long
        self._clock = clock  # seconds, for the stall rule
        # Item threads take the plain lock: its ``with`` runs no Python code between taking it and
        # the block, so a deadline raised in that thread cannot leave it taken (a Condition's can).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._groups: dict[tuple[int, Hashable, Hashable], Group] = {}
        self._owners: dict[int, object] = {}  # keeps owners alive so their ids stay unique
        self._members = 0
        self._waiting = 0
        self._starting = False  # the scheduler is starting members: a partial batch waits for them
        self._closed = False
        self.batches_run = 0
        self._device = threading.Thread(target=self._serve, name="mmverify-device", daemon=True)
        self._device.start()

    # -- the scheduler ------------------------------------------------------------------------
    def starting(self, busy: bool) -> None:
        """While the scheduler starts members (``busy``), only full batches run: the members it is
        about to start would otherwise miss the partial batch of those already waiting."""
        with self._lock:
            if self._starting != busy:
                self._starting = busy
                self._changed()

    # -- item threads -------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        """Model requests of members waiting for their outputs now."""
        with self._lock:
            return self._waiting

    def reserve(self) -> None:
        """Count a member whose thread is about to start, from the starting thread: a partial
        batch must not run in the moment between the start and the thread's joining.  That thread
        then enters ``member(reserved=True)``."""
        self._join(1)

    def unreserve(self) -> None:
        """Undo :meth:`reserve` for a thread that could not be started."""
        self._join(-1)

    @contextmanager
    def member(self, reserved: bool = False) -> Iterator[None]:
        """The calling thread's model requests go through this round while inside (``reserved``:
        counted already, see :meth:`reserve`)."""
        if not reserved:
            self._join(1)
        previous = current_round()
        _LOCAL.round = self
        _LOCAL.left_queued = False  # a thread that scores one item after another starts each afresh
        try:
            yield
        finally:
            _LOCAL.round = previous
            self._join(-1)

    @contextmanager
    def away(self) -> Iterator[None]:
        """Inside, the calling member computes its model calls itself (see :func:`outside_round`)."""
        if current_round() is not self:
            raise RuntimeError("only a member of this round can step out of it")
        self._join(-1)
        _LOCAL.round = None
        try:
            yield
        finally:
            _LOCAL.round = self
            self._join(1)

    def _join(self, count: int) -> None:
        with self._lock:
            self._members += count
            if self._waiting >= self._members:  # only then can a partial batch run
                self._changed()

    def submit(
        self, owner: object, kind: Hashable, inputs: list[Any], compute: Compute, batch_size: int, shape: ShapeOf,
        by_content: bool = True,
    ) -> list[Any]:
        request = Request(len(inputs))
        digests = [content_digest(item) for item in inputs]  # before the lock: a big clip takes a while
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the batch round is closed")
                self._waiting += 1  # counted before its inputs are queued: whatever interrupts
                request.counted = True  # this thread from here on, _finish undoes exactly this
                self._owners[id(owner)] = owner
                now = self._clock()
                wake = self._waiting >= self._members  # every member waits: partial batches may run
                for index, item in enumerate(inputs):
                    key = (id(owner), kind, shape(item))
                    group = self._groups.get(key)
                    if group is None:
                        group = self._groups[key] = Group(owner, compute, RowQueue(batch_size, by_content))
                    wake = wake or not group.queue.count  # its first input: the device thread's stall clock starts
                    group.queue.add(Waiting(item, (request, index), digests[index], now))  # nothing half-queued
                    wake = wake or group.ready
                if wake:  # anything else cannot give the device thread work: waking it would only cost the lock
                    self._changed()
            while not request.answered.acquire(timeout=wait_s()):
                pass
        except BaseException:  # a deadline or an interrupt: nobody waits for these outputs any more
            with self._lock:
                _LOCAL.left_queued = not request.started
                self._finish(request)
            raise
        _LOCAL.left_queued = False
        if request.error is not None:
            raise request.error
        return request.outputs

    # -- the device thread ----------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._changed()

    def _changed(self) -> None:
        """Something happened in the round (lock held): wake the device thread."""
        self._cond.notify_all()

    def _finish(self, request: Request, error: BaseException | None = None) -> None:
        """Mark ``request`` answered (lock held); its thread stops counting as waiting."""
        if request.finished:
            return
        request.finished = True
        request.error = error
        if request.counted:
            self._waiting -= 1
        request.answered.release()
        self._changed()

    def _take(self, now: float, eager: bool = True) -> list[tuple[Group, list[Row]]]:
        """Batches ready to run (lock held): the next of each stalled group (first, so full batches
        of other groups cannot starve them); else one ready batch; else, when ``eager``, the next
        of every group once no member is working (the inputs left behind, which wanted a taken row,
        go in the next batches); everything once closed.  Not ``eager`` while a launched batch is
        still computing: its members count as waiting but come back with inputs when it lands.
        Expired groups are dropped (a run sees a new clip length, and so a new group, per item)."""
        groups = list(self._groups.values())
        stale = [g for g in groups if g.stalled(now, self.stall_s)]
        ready = next((g for g in groups if g.ready), None)
        if self._closed:
            work = [(g, layer) for g in groups for layer in g.queue.layers()]
        elif stale:
            work = [(g, g.queue.layer()) for g in stale]
        elif ready is not None:
            work = [(ready, ready.queue.layer())]
        elif eager and self._waiting >= self._members and not self._starting:
            work = [(g, g.queue.layer()) for g in groups if g.queue.count]
        else:
            work = []
        for group, _ in work:
            group.taken_at = now  # kept while it computes: the batch's end may restart its clock
        for key in [key for key, group in self._groups.items() if group.expired(now, self.stall_s)]:
            del self._groups[key]
        return work

    def _take_or_fail(self, now: float, eager: bool = True) -> list[tuple[Group, list[Row]]]:
        """:meth:`_take`; should scheduling itself fail, every waiting request gets the error (lock
        held) -- the device thread must outlive it, or the members would wait for ever."""
        try:
            return self._take(now, eager)
        except Exception as exc:  # noqa: BLE001
            self._fail_queued(exc)
            return []

    def _fail_queued(self, error: Exception) -> None:
        """Every queued request gets ``error`` (lock held)."""
        for group in self._groups.values():
            for queue in group.queue.queues.values():
                for request in requests_of(list(queue)):
                    self._finish(request, error)
        self._groups.clear()

    def _next_stall(self, now: float) -> float | None:
        """Seconds until an input has waited ``stall_s`` as :meth:`_take` counts (None: nothing waits)."""
        if self.stall_s is None:
            return None
        waits = [group.waited(now) for group in self._groups.values() if group.queue.count]
        if not waits:
            return None
        return max(0.0, self.stall_s - max(waits))

    def _serve(self) -> None:
        started: deque[Launched] = deque()  # launched on the device, oldest first
        try:
            while self._serve_once(started):
                pass
        except BaseException as exc:  # noqa: BLE001  (nobody may be left waiting on a dead device thread)
            self._abandon(started, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            raise

    def _serve_once(self, started: "deque[Launched]") -> bool:
        """Land what has finished, wait for work or run it; False once closed with nothing left."""
        oldest_ready = bool(started) and started[0].ready  # a handle's own code: not under the lock
        with self._lock:
            work = self._take_or_fail(self._clock(), eager=not started)
            if not work and not oldest_ready:
                if self._closed and not started:
                    return False
                self._cond.wait(POLL_STARTED_S if started else self._next_stall(self._clock()))
                return True
        while started and started[0].ready:
            self._land_oldest(started)
        for group, chunk in work:
            while len(started) >= MAX_STARTED and isinstance(group.compute, Staged):
                self._land_oldest(started)  # waits for the device
            launched = self._answering(chunk, self._run, group, chunk)
            if launched is not None:
                started.append(launched)
        return True

    def _abandon(self, started: "deque[Launched]", error: Exception) -> None:
        """The device thread ends on ``error``: the requests of its started batches, and every
        queued one, get it, and the round takes no more."""
        with self._lock:
            self._closed = True
            for launched in started:
                for request in requests_of(launched.live):
                    self._finish(request, error)
            self._fail_queued(error)
        for _ in started:
            count_running(-1)

    def _land_oldest(self, started: "deque[Launched]") -> None:
        landing = started.popleft()
        self._answering(landing.live, self._land, landing)

    def _answering(self, layer: list[Row], step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)``; should it fail, every request of ``layer`` gets the error (the device
        thread must answer every request)."""
        try:
            return step(*args)
        except BaseException as exc:  # noqa: BLE001
            with self._lock:
                for request in requests_of(layer):
                    self._finish(request, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            return None

    def _run(self, group: Group, layer: list[Row]) -> Launched | None:
        """Compute ``layer`` and answer its requests; a staged computation whose launch returned
        before the device finished is handed back instead, to :meth:`_land` later."""
        with self._lock:
            live = [row for row in layer if any(not w.receiver[0].finished for w in row.receivers)]
            for row in live:
                for waiting in row.receivers:
                    waiting.receiver[0].started = True
        if not live:
            return None
        count_running(1)
        handed_back = False
        try:
            if isinstance(group.compute, Staged):
                try:
                    landing = launch(group, live)
                except Exception as exc:  # noqa: BLE001  (what failed is found request by request)
                    with computing(group.owner):
                        answers, failures = each_request(group, live, exc)
                else:
                    if not landing.ready:
                        handed_back = True  # counted as running until it lands
                        return landing
                    answers, failures = landed(landing)
            else:
                with computing(group.owner):
                    answers, failures = compute(group, live)
        finally:
            if not handed_back:
                count_running(-1)
        self._answer(group, live, answers, failures)
        return None

    def _land(self, landing: Launched) -> None:
        """Finish a batch :meth:`_run` launched, and answer its requests."""
        try:
            answers, failures = landed(landing)
        finally:
            count_running(-1)
        self._answer(landing.group, landing.live, answers, failures)

    def _answer(self, group: Group, live: list[Row], answers: dict[int, Any], failures: dict[Request, BaseException]) -> None:
        with self._lock:
            self.batches_run += 1
            answered = bool(failures)
            for position, row in enumerate(live):
                if position not in answers:  # only failed requests wanted it
                    continue
                for waiting, output in zip(row.receivers, share(answers[position], len(row.receivers))):
                    request, index = waiting.receiver
                    if request.finished or request in failures:
                        continue
                    request.outputs[index] = output
                    request.filled += 1
                    if request.filled == request.size:
                        self._finish(request)
                        answered = True
            for request, error in failures.items():
                self._finish(request, error)
            if answered:  # its members come back with their next inputs: a stall counts from now
                group.answered_at = self._clock()
