"""A round's requests and groups, and one batch of a round on the device thread (see
:mod:`.batching`): computed at once, or, for a staged computation (:class:`~.rows.Staged`) on an
accelerator, launched now and landed later.  A batch that fails is run again request by request,
so a bad input fails only its own request."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .compute_locks import computing
from .rows import Compute, Row, RowQueue, Staged, padded_batch, placed_outputs, run_rows


@dataclass(eq=False)
class Request:
    """One item thread's model call: its inputs' outputs, filled as their batches finish."""

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
class Group:
    """The queued inputs of one backend, computation kind and input shape."""

    owner: object
    compute: Compute
    queue: RowQueue  # receivers: (request, index of the input in it)
    taken_at: float = float("-inf")  # when its last batch was taken
    answered_at: float = float("-inf")  # when its last batch that answered a request ended

    def waited(self, now: float) -> float:
        """How long its oldest input has waited since it asked or since the group's last batch that
        answered a request ended (whose members come back with inputs), whichever came later."""
        return self.queue.waited(now, self.answered_at)

    def stalled(self, now: float, stall_s: float | None) -> bool:
        return stall_s is not None and self.queue.count > 0 and self.waited(now) >= stall_s

    def expired(self, now: float, stall_s: float | None) -> bool:
        """Empty, and its last batch taken a stall time ago: nothing it knows can change a decision."""
        return not self.queue.count and (stall_s is None or now - max(self.taken_at, self.answered_at) >= stall_s)

    @property
    def ready(self) -> bool:
        """Every row of the next batch is taken, or so many inputs wait that few rows would stay free."""
        return self.queue.occupied == self.queue.rows or self.queue.count >= 2 * self.queue.rows


Answers = tuple[dict[int, Any], dict[Request, BaseException]]  # outputs by position in the live rows, failed requests


def requests_of(layer: list[Row]) -> list[Request]:
    """The requests wanting some row of ``layer``, each once, in order."""
    return list(dict.fromkeys(waiting.receiver[0] for row in layer for waiting in row.receivers))


def placed(live: list[Row]) -> list[tuple[int, Any]]:
    return [(row.slot, row.item) for row in live]


@dataclass(eq=False)
class Launched:
    """A staged batch launched on the device and not yet finished."""

    group: Group
    live: list[Row]
    handle: Any

    @property
    def ready(self) -> bool:
        """Whether its results have arrived.  A handle without ``ready()`` has them at once; one
        whose ``ready()`` fails (a device error) is finished at once, which fails too, so its batch
        runs again request by request and every request is answered."""
        ready = getattr(self.handle, "ready", None)
        try:
            return ready is None or bool(ready())
        except Exception:  # noqa: BLE001
            return True


def launch(group: Group, live: list[Row]) -> Launched:
    """``live`` launched by ``group``'s staged computation, under the owner's lock."""
    staged: Staged = group.compute  # type: ignore[assignment]
    with computing(group.owner):
        return Launched(group, live, staged.launch(padded_batch(placed(live), group.queue.rows)))


def landed(launched: Launched) -> Answers:
    """A launched batch's outputs, or its requests run again one by one where finishing it failed."""
    group, live = launched.group, launched.live
    try:
        outputs = group.compute.finish(launched.handle)  # type: ignore[attr-defined]
        return dict(enumerate(placed_outputs(outputs, placed(live), group.queue.rows))), {}
    except Exception as exc:  # noqa: BLE001
        with computing(group.owner):
            return each_request(group, live, exc)


def compute(group: Group, live: list[Row]) -> Answers:
    """``live`` computed at once (the caller holds the owner's lock); when the batch fails, each
    request's rows are run again on their own (in the same rows)."""
    try:
        return dict(enumerate(run_rows(group.compute, placed(live), group.queue.rows))), {}
    except Exception as exc:
        return each_request(group, live, exc)


def each_request(group: Group, live: list[Row], exc: Exception) -> Answers:
    """After the batch of ``live`` failed with ``exc``: each waiting request's rows run again on
    their own, so only a request whose own inputs fail gets an error."""
    rows = group.queue.rows
    answers: dict[int, Any] = {}
    failures: dict[Request, BaseException] = {}
    waiting = [request for request in requests_of(live) if not request.finished]  # a timed-out one needs nothing
    if len(waiting) == 1 and all(any(w.receiver[0] is waiting[0] for w in row.receivers) for row in live):
        return {}, {waiting[0]: exc}  # the batch was its inputs alone: running them again would repeat it
    for request in waiting:
        positions = [p for p, row in enumerate(live) if any(w.receiver[0] is request for w in row.receivers)]
        try:
            outputs = run_rows(group.compute, [(live[p].slot, live[p].item) for p in positions], rows)
            answers.update((p, output) for p, output in zip(positions, outputs) if p not in answers)
        except Exception as exc:  # this request's own inputs fail: only its item pays
            failures[request] = exc
    return answers, failures
