"""Model forwards on fixed batch shapes, merged across the items scored together.

Every backend runs its model through :func:`forward`.  Inputs are grouped by shape, cut into
chunks of the backend's batch size, and each chunk is padded to exactly that many rows (copies of
its first input) before the model sees it.  Kernels pick their algorithm, and so their summation
order, by tensor shape: a clip embedded beside three others and beside seven differs in the last
bits.  With one shape per backend, a row's output depends on its own input alone, so items scored
together -- their requests merged into shared batches -- give the same bytes as items scored one
at a time.  The price is that a lone input costs a whole batch; lower a backend's ``batch_size``
(``--model audio_text=clap-hf?batch_size=2``) where items come one by one.

Outside a :class:`BatchRound`, :func:`forward` computes at once in the calling thread.  Inside one
(items scored together, see :mod:`mmverify.pipelines.batch`), the item's thread hands its request
to the round's device thread and waits.  The device thread runs a chunk as soon as a full batch of
one kind is waiting, and everything that waits once every item thread of the round is waiting on a
model or done -- so decoding and resampling of some items overlap the model work of others.  A
chunk that fails is run again request by request, so one bad input fails only its own item.

Two rules keep a round moving when an item thread waits on something other than a model:

* one-off bulk work done under a lock that other items wait on (building a reference index) runs
  :func:`outside_round`: its forwards are computed at once in its own thread, since the items
  blocked on that lock could never join its partial batch;
* an input that has waited ``stall_s`` seconds runs anyway, in a partial batch -- the item threads
  that are not waiting are busy elsewhere (a judge call, a slow decode) and would only delay it,
  however busy the rest of the round is.

Neither can change a byte: a row's output does not depend on what shares its batch.

A backend never computes in two threads at once (:func:`owner_lock`): some models keep per-call
state on shared modules (openai-whisper's key-value cache hooks), and an item thread computing on
its own -- outside a round, or scored again alone after timing out in one -- may meet the device
thread on the same backend.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterator, Sequence

Compute = Callable[[list[Any]], Sequence[Any]]
ShapeOf = Callable[[Any], Hashable]
_POLL_S = 0.05  # how often a waiting item thread wakes, so a deadline raised in it is delivered
STALL_S = 1.0  # an input that waited this long runs in a partial batch


def one_shape(_: Any) -> None:
    """Every input has the same shape (the default)."""
    return None


def shape_chunks(shapes: Sequence[Hashable], batch_size: int) -> list[list[int]]:
    """Indices grouped by shape (in order of first appearance), cut into chunks of ``batch_size``."""
    groups: dict[Hashable, list[int]] = {}
    for index, shape in enumerate(shapes):
        groups.setdefault(shape, []).append(index)
    return [members[i : i + batch_size] for members in groups.values() for i in range(0, len(members), batch_size)]


def run_chunk(compute: Compute, inputs: list[Any], batch_size: int) -> list[Any]:
    """``compute`` on ``inputs`` padded to ``batch_size`` rows; the outputs of the real rows."""
    if not 0 < len(inputs) <= batch_size:
        raise ValueError(f"a chunk holds 1..{batch_size} inputs, got {len(inputs)}")
    padded = inputs + [inputs[0]] * (batch_size - len(inputs))
    outputs = compute(padded)
    if len(outputs) != batch_size:
        raise RuntimeError(f"a batch of {batch_size} inputs gave {len(outputs)} outputs")
    return [outputs[i] for i in range(len(inputs))]


_RUNNING = [0]  # computations running on device threads, process-wide (guarded by _OWNER_LOCKS_GUARD)
# per owner (a backend): weakly held, so a dropped hub's models can still be freed
_OWNER_LOCKS: "weakref.WeakKeyDictionary[object, threading.Lock]" = weakref.WeakKeyDictionary()
_PLAIN_OWNER_LOCKS: dict[int, tuple[object, threading.Lock]] = {}  # owners without weak references (object())
_OWNER_LOCKS_GUARD = threading.Lock()


def computations_running() -> int:
    """How many chunks device threads are computing now, in any round of this process; after a
    round's items are all done, one still running is stuck (a hang in native code)."""
    with _OWNER_LOCKS_GUARD:
        return _RUNNING[0]


def _running(change: int) -> None:
    with _OWNER_LOCKS_GUARD:
        _RUNNING[0] += change


def owner_lock(owner: object) -> threading.Lock:
    """The lock every computation of ``owner`` (a backend) runs under."""
    with _OWNER_LOCKS_GUARD:
        try:
            lock = _OWNER_LOCKS.get(owner)
            if lock is None:
                lock = _OWNER_LOCKS[owner] = threading.Lock()
            return lock
        except TypeError:  # cannot be weakly referenced: kept (test stand-ins, bare objects)
            entry = _PLAIN_OWNER_LOCKS.get(id(owner))
            if entry is None or entry[0] is not owner:
                entry = _PLAIN_OWNER_LOCKS[id(owner)] = (owner, threading.Lock())
            return entry[1]


@contextmanager
def _computing(owner: object) -> Iterator[None]:
    """Hold ``owner``'s lock; waits in short steps, so a deadline raised meanwhile is delivered."""
    lock, held = owner_lock(owner), False
    try:
        while not held:
            held = lock.acquire(timeout=_POLL_S)
        yield
    finally:
        if held:
            lock.release()


def compute_now(
    inputs: Sequence[Any], compute: Compute, batch_size: int, shape: ShapeOf = one_shape, owner: object = None
) -> list[Any]:
    """Outputs of ``compute`` for ``inputs``, in order, computed in fixed-shape chunks here and now
    (under ``owner``'s lock when one is named)."""
    items = list(inputs)
    outputs: list[Any] = [None] * len(items)
    for chunk in shape_chunks([shape(item) for item in items], batch_size):
        if owner is None:
            computed = run_chunk(compute, [items[i] for i in chunk], batch_size)
        else:
            with _computing(owner):
                computed = run_chunk(compute, [items[i] for i in chunk], batch_size)
        for index, output in zip(chunk, computed):
            outputs[index] = output
    return outputs


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
    if batch_round is None:
        yield
        return
    with batch_round.away():
        yield


def forward(
    owner: object, kind: Hashable, inputs: Sequence[Any], compute: Compute, batch_size: int, shape: ShapeOf = one_shape
) -> list[Any]:
    """One output per input, in order.  ``kind`` must name everything besides the inputs that
    changes ``compute``'s result (a padding rule, a language): requests of one ``owner`` and
    ``kind`` share batches and are computed by whichever of their ``compute`` comes first."""
    items = list(inputs)
    if not items:
        return []
    batch_round = current_round()
    if batch_round is None:
        return compute_now(items, compute, batch_size, shape, owner)
    return batch_round.submit(owner, kind, items, compute, batch_size, shape)


@dataclass(eq=False)
class _Request:
    size: int
    outputs: list[Any] = field(default_factory=list)
    filled: int = 0
    error: BaseException | None = None
    counted: bool = False  # among the round's waiting requests
    started: bool = False  # a chunk holding one of its inputs has begun to compute
    finished: bool = False
    # Held until the request is answered.  A plain lock, not an Event: a deadline raised in the
    # waiting thread can land inside an Event's own locking and leave it taken, and answering would
    # then block the device thread for good; a lock taken by a waiter who left blocks nobody.
    answered: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.outputs = [None] * self.size
        self.answered.acquire()


@dataclass(eq=False)
class _Group:
    owner: object
    compute: Compute
    batch_size: int
    entries: deque = field(default_factory=deque)  # (request, index, input, asked at: monotonic s)

    def pop(self, count: int) -> list[tuple[_Request, int, Any]]:
        return [self.entries.popleft()[:3] for _ in range(count)]

    def waited(self, now: float) -> float:
        return now - self.entries[0][3] if self.entries else 0.0


def _drain(groups: list[_Group]) -> list[tuple[_Group, list[tuple[_Request, int, Any]]]]:
    """Every input of ``groups``, in chunks of at most each group's batch size."""
    return [(g, g.pop(min(g.batch_size, len(g.entries)))) for g in groups for _ in range(-(-len(g.entries) // g.batch_size))]


class BatchRound:
    """Items scored together: their model requests are merged per backend and kind, and run on
    one device thread.  Item threads join with :meth:`member`."""

    def __init__(self, stall_s: float | None = STALL_S) -> None:
        self.stall_s = stall_s  # None: partial batches wait for every member, however long
        # Item threads take the plain lock: its ``with`` runs no Python code between taking it and
        # the block, so a deadline raised in that thread cannot leave it taken (a Condition's can).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._groups: dict[tuple[int, Hashable, Hashable], _Group] = {}
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
    @contextmanager
    def member(self) -> Iterator[None]:
        """The calling thread's model requests go through this round while inside."""
        self._join(1)
        previous = current_round()
        _LOCAL.round = self
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
            self._changed()

    def submit(
        self, owner: object, kind: Hashable, inputs: list[Any], compute: Compute, batch_size: int, shape: ShapeOf
    ) -> list[Any]:
        request = _Request(len(inputs))
        try:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the batch round is closed")
                self._waiting += 1  # counted before its inputs are queued: whatever interrupts
                request.counted = True  # this thread from here on, _finish undoes exactly this
                self._owners[id(owner)] = owner
                now = time.monotonic()
                for index, item in enumerate(inputs):
                    key = (id(owner), kind, shape(item))
                    group = self._groups.get(key)
                    if group is None:
                        group = self._groups[key] = _Group(owner, compute, batch_size)
                    group.entries.append((request, index, item, now))  # one append: nothing half-queued
                self._changed()
            while not request.answered.acquire(timeout=_POLL_S):
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

    def _finish(self, request: _Request, error: BaseException | None = None) -> None:
        """Mark ``request`` answered (lock held); its thread stops counting as waiting."""
        if request.finished:
            return
        request.finished = True
        request.error = error
        if request.counted:
            self._waiting -= 1
        request.answered.release()
        self._changed()

    def _take(self, now: float) -> list[tuple[_Group, list[tuple[_Request, int, Any]]]]:
        """Chunks ready to run (lock held): every input of the groups whose oldest input has waited
        ``stall_s`` (first, so full batches of other groups cannot starve them); else one full
        batch; else everything once no member is working.  Groups left empty are dropped (a run
        sees a new clip length, and so a new group, per item)."""
        groups = list(self._groups.values())
        stale = [g for g in groups if self.stall_s is not None and g.waited(now) >= self.stall_s]
        full = next((g for g in groups if len(g.entries) >= g.batch_size), None)
        if stale:
            work = _drain(stale)
        elif full is not None:
            work = [(full, full.pop(full.batch_size))]
        elif (self._waiting >= self._members and not self._starting) or self._closed:
            work = _drain(groups)
        else:
            work = []
        for key in [key for key, group in self._groups.items() if not group.entries]:
            del self._groups[key]
        return work

    def _next_stall(self, now: float) -> float | None:
        """Seconds until the oldest waiting input has waited ``stall_s`` (None: nothing waits)."""
        if self.stall_s is None or not self._groups:
            return None
        return max(0.0, self.stall_s - max(group.waited(now) for group in self._groups.values()))

    def _serve(self) -> None:
        while True:
            with self._lock:
                work = self._take(time.monotonic())
                while not work:
                    if self._closed:
                        return
                    self._cond.wait(self._next_stall(time.monotonic()))
                    work = self._take(time.monotonic())
            for group, chunk in work:
                try:
                    self._run(group, chunk)
                except BaseException as exc:  # noqa: BLE001  (the device thread must answer every request)
                    with self._lock:
                        for request, _, _ in chunk:
                            self._finish(request, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))

    def _run(self, group: _Group, chunk: list[tuple[_Request, int, Any]]) -> None:
        with self._lock:
            live = [entry for entry in chunk if not entry[0].finished]
            for request, _, _ in live:
                request.started = True
        if not live:
            return
        _running(1)
        try:
            with _computing(group.owner):
                answers, failures = _compute(group, live)
        finally:
            _running(-1)
        with self._lock:
            self.batches_run += 1
            for position, (request, index, _) in enumerate(live):
                if request.finished:
                    continue
                if request in failures:
                    self._finish(request, failures[request])
                    continue
                request.outputs[index] = answers[position]
                request.filled += 1
                if request.filled == request.size:
                    self._finish(request)


def _compute(group: _Group, live: list[tuple[_Request, int, Any]]) -> tuple[dict[int, Any], dict[_Request, BaseException]]:
    """Outputs by position in ``live``; when the chunk fails, each request's inputs are run again
    on their own, so a bad input fails only its own request."""
    answers: dict[int, Any] = {}
    failures: dict[_Request, BaseException] = {}
    try:
        answers = dict(enumerate(run_chunk(group.compute, [item for _, _, item in live], group.batch_size)))
    except Exception:
        for request in dict.fromkeys(entry[0] for entry in live):
            positions = [p for p, entry in enumerate(live) if entry[0] is request]
            try:
                answers.update(zip(positions, run_chunk(group.compute, [live[p][2] for p in positions], group.batch_size)))
            except Exception as exc:  # this request's own inputs fail: only its item pays
                failures[request] = exc
    return answers, failures
