"""One batch of a round on the device thread (see :mod:`.batching`): computed at once, or, for a
staged computation (:class:`~.rows.Staged`) on an accelerator, launched now and landed later.  A
batch that fails is run again request by request, so a bad input fails only its own request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .compute_locks import computing
from .rows import Row, Staged, padded_batch, placed_outputs, run_rows

if TYPE_CHECKING:
    from .batching import _Group, _Request

Answers = tuple[dict[int, Any], dict["_Request", BaseException]]  # outputs by position in the live rows, failed requests


def requests_of(layer: list[Row]) -> list["_Request"]:
    """The requests wanting some row of ``layer``, each once, in order."""
    return list(dict.fromkeys(waiting.receiver[0] for row in layer for waiting in row.receivers))


def placed(live: list[Row]) -> list[tuple[int, Any]]:
    return [(row.slot, row.item) for row in live]


@dataclass(eq=False)
class Launched:
    """A staged batch launched on the device and not yet finished."""

    group: "_Group"
    live: list[Row]
    handle: Any

    @property
    def ready(self) -> bool:
        """Whether its results have arrived (a handle without ``ready()`` has them at once)."""
        ready = getattr(self.handle, "ready", None)
        return ready is None or bool(ready())


def launch(group: "_Group", live: list[Row]) -> Launched:
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


def compute(group: "_Group", live: list[Row]) -> Answers:
    """``live`` computed at once (the caller holds the owner's lock); when the batch fails, each
    request's rows are run again on their own (in the same rows)."""
    try:
        return dict(enumerate(run_rows(group.compute, placed(live), group.queue.rows))), {}
    except Exception as exc:
        return each_request(group, live, exc)


def each_request(group: "_Group", live: list[Row], exc: Exception) -> Answers:
    """After the batch of ``live`` failed with ``exc``: each waiting request's rows run again on
    their own, so only a request whose own inputs fail gets an error."""
    rows = group.queue.rows
    answers: dict[int, Any] = {}
    failures: dict[_Request, BaseException] = {}
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
