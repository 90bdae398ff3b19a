"""Where an input sits in a fixed-shape batch: the row its own content picks.

Padding every forward to one batch shape (see :mod:`.batching`) is not enough for byte-identical
outputs on a CPU: element-wise kernels compute most of a tensor with vector instructions but its
remainders -- the tail of the tensor and of each thread's share of it -- with scalar code, which
rounds differently, so the same clip embedded at row 0 and at row 3 of one batch shape can differ in
the last bits (a WavLM x-vector does).  A row's output does not depend on what the other rows hold,
only on its position.  So every input goes to the row chosen by a digest of its content,
:func:`content_digest` modulo the batch rows, whether it is computed alone (the other rows padded
with copies) or beside other items' inputs: its output is then the same bytes however the inputs
of a run are grouped, resumed or scored one by one.

Two inputs that pick the same row cannot share a batch; :class:`RowQueue` keeps them in line, one
per batch (a *layer*), and identical inputs share one row.  A layer of ``n`` fresh inputs on
``rows`` rows fills about ``1 - exp(-n / rows)`` of them; in a run, where the inputs left behind
keep waiting, about 78 % with twice a batch waiting, and a bulk call needs as many batches as the
most inputs any one row is wanted by (``benchmarks/row_fill.py``).  Where rows are
known not to round by position, a backend packs them instead (``rows=packed``).
"""

from __future__ import annotations

import copy
import hashlib
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Hashable, Iterable, Iterator, Sequence

import numpy as np

from .compute_locks import computing

Compute = Callable[[list[Any]], Sequence[Any]]
ShapeOf = Callable[[Any], Hashable]
_WHOLE_BYTES = 1 << 16  # arrays up to this size are digested whole, larger ones by a fixed sample
_SAMPLE = 4096  # elements of the evenly spaced sample, plus the last few (a fade-out's tail)


def content_digest(value: Any) -> int:
    """A 64-bit digest of ``value``'s content (arrays, tensors, PIL images, strings, numbers and
    tuples or lists of them); large arrays are digested from a sample, so different inputs may share
    a digest, but equal inputs always do.  Other types digest by type name alone: they all go to one
    row.  The digest picks rows, so outputs: a change to it must change the fingerprint tag
    (``;row=content`` in :attr:`.base.Backend.shape_tag`)."""
    digest = hashlib.blake2b(digest_size=8)
    _feed(digest, value)
    return int.from_bytes(digest.digest(), "little")


def _feed(digest: "hashlib._Hash", value: Any) -> None:
    if isinstance(value, (tuple, list)):
        digest.update(b"(%d" % len(value))
        for part in value:
            _feed(digest, part)
        digest.update(b")")
    elif isinstance(value, (np.ndarray, np.generic)):
        _feed_array(digest, np.asarray(value))
    elif isinstance(value, (str, bytes, bytearray, int, float, bool, type(None))):
        digest.update(type(value).__name__.encode() + b":")
        digest.update(value if isinstance(value, (bytes, bytearray)) else repr(value).encode())
    elif type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        digest.update(f"tensor:{value.dtype}{tuple(value.shape)}".encode())
        digest.update(_tensor_sample(value).tobytes())
    elif type(value).__module__.startswith("PIL") and hasattr(value, "tobytes"):
        digest.update(f"image:{value.mode}{value.size}".encode())
        _feed_array(digest, np.frombuffer(value.tobytes(), dtype=np.uint8))
    else:
        digest.update(b"?" + type(value).__qualname__.encode())


def _feed_array(digest: "hashlib._Hash", array: np.ndarray) -> None:
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    if array.dtype.hasobject:  # its bytes are addresses, which change from run to run
        return
    flat = array.reshape(-1)
    if flat.nbytes > _WHOLE_BYTES:
        flat = np.concatenate([flat[:: _step(flat.size)][:_SAMPLE], flat[-64:]])
    digest.update(np.ascontiguousarray(flat).tobytes())


def _step(size: int) -> int:
    """The stride of the sample: odd, so it visits every channel of interleaved (H, W, 3) pixels."""
    return max(1, size // _SAMPLE) | 1


def _tensor_sample(tensor: Any) -> np.ndarray:
    """A tensor's values as an array -- only a sample of a large one leaves its device."""
    import torch

    flat = tensor.detach().reshape(-1)
    if flat.numel() * flat.element_size() > _WHOLE_BYTES:
        flat = torch.cat([flat[:: _step(flat.numel())][:_SAMPLE], flat[-64:]])
    flat = flat.cpu()
    if flat.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16
        flat = flat.float()
    return np.ascontiguousarray(flat.numpy())


def same_input(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are certainly the same input, bit for bit (so they may share one row);
    never raises -- an input that cannot be compared shares no row."""
    try:
        return _same(a, b)
    except Exception:  # noqa: BLE001  (an odd input; the scheduler calling this must not fail)
        return False


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):  # bytes, not values: -0.0 is not 0.0 to every model
        return a.dtype == b.dtype and a.shape == b.shape and not a.dtype.hasobject and a.tobytes() == b.tobytes()
    if isinstance(a, (str, bytes, int, bool, type(None))):
        return a == b
    return False  # floats (NaN, -0.0), tensors, anything else: computed once per request


@dataclass(eq=False)
class Waiting:
    """One input waiting for a row, and who is told its output."""

    item: Any
    receiver: Any
    digest: int
    asked_at: float = 0.0


@dataclass(eq=False)
class Row:
    """One row of a batch: the input computed there and everyone waiting for its output."""

    slot: int
    item: Any
    receivers: list[Waiting]


@dataclass(eq=False)
class RowQueue:
    """Inputs of one computation and shape waiting for a batch.  By content, each waits for the row
    its digest picks; packed, they fill the rows in the order they came (every row of a batch is
    used, but an output can then depend on its row).  Identical inputs share one row either way."""

    rows: int
    by_content: bool = True
    queues: dict[int, deque] = field(default_factory=dict)  # slot -> rows waiting for it (packed: one, under 0)
    queued: dict[int, list[Row]] = field(default_factory=dict)  # digest -> rows waiting, to merge identical inputs
    count: int = 0  # inputs waiting

    def add(self, waiting: Waiting) -> None:
        for row in self.queued.get(waiting.digest, ()):
            if same_input(row.item, waiting.item):
                row.receivers.append(waiting)
                break
        else:
            row = Row(waiting.digest % self.rows if self.by_content else 0, waiting.item, [waiting])
            self.queues.setdefault(row.slot, deque()).append(row)
            self.queued.setdefault(waiting.digest, []).append(row)
        self.count += 1

    @property
    def occupied(self) -> int:
        """Rows the next batch fills."""
        if self.by_content:
            return len(self.queues)
        return min(self.rows, len(self.queues.get(0, ())))

    def waited(self, now: float, since: float = float("-inf")) -> float:
        """How long the oldest waiting input has waited, counted from ``since`` where it asked
        earlier (a queue's first row holds its oldest)."""
        return max((now - max(queue[0].receivers[0].asked_at, since) for queue in self.queues.values()), default=0.0)

    def layer(self) -> list[Row]:
        """The next batch: by content, the first row waiting for each slot; packed, the first
        ``rows`` rows, in slots 0, 1, ..."""
        wanted = [(slot, 1) for slot in sorted(self.queues)] if self.by_content else [(0, self.rows)]
        layer: list[Row] = []
        for slot, count in wanted:
            queue = self.queues[slot]
            for _ in range(min(count, len(queue))):
                row = queue.popleft()
                same_digest = self.queued[row.receivers[0].digest]
                same_digest.remove(row)
                if not same_digest:
                    del self.queued[row.receivers[0].digest]
                if not self.by_content:
                    row.slot = len(layer)
                layer.append(row)
            if not queue:
                del self.queues[slot]
        self.count -= sum(len(row.receivers) for row in layer)
        return layer

    def layers(self) -> Iterable[list[Row]]:
        while self.count:
            yield self.layer()


def run_rows(compute: Compute, placed: Sequence[tuple[int, Any]], rows: int) -> list[Any]:
    """``compute`` on one batch of ``rows`` rows holding each ``(slot, input)`` at its slot (the
    others padded with copies of the first input); the outputs of those slots, in order."""
    return placed_outputs(compute(padded_batch(placed, rows)), placed, rows)


def padded_batch(placed: Sequence[tuple[int, Any]], rows: int) -> list[Any]:
    """The ``rows`` inputs of a batch holding each ``(slot, input)`` at its slot, copies of the first elsewhere."""
    if not 0 < len(placed) <= rows:
        raise ValueError(f"a batch holds 1..{rows} inputs, got {len(placed)}")
    batch = [placed[0][1]] * rows
    for slot, item in placed:
        batch[slot] = item
    return batch


def placed_outputs(outputs: Sequence[Any], placed: Sequence[tuple[int, Any]], rows: int) -> list[Any]:
    """The outputs of the placed inputs' slots, in order, from a batch's ``rows`` outputs."""
    if len(outputs) != rows:
        raise RuntimeError(f"a batch of {rows} inputs gave {len(outputs)} outputs")
    return [outputs[slot] for slot, _ in placed]


@dataclass(frozen=True)
class Staged:
    """A computation in two steps: ``launch`` starts a batch and returns a handle (on an
    accelerator it queues the batch's work and returns at once), ``finish`` waits for the handle
    and returns the batch's outputs.  A bulk call (:func:`compute_now`) launches each batch before
    it finishes the one before, so the host prepares a batch while the device computes the last;
    called as a plain computation it does both steps at once.  A handle may have a ``ready()``
    method, false while the device still computes: a round's device thread then launches its next
    ready batch before it finishes this one (see :mod:`.batching`)."""

    launch: Callable[[list[Any]], Any]
    finish: Callable[[Any], Sequence[Any]]

    def __call__(self, batch: list[Any]) -> Sequence[Any]:
        return self.finish(self.launch(batch))


def then(compute: Compute, after: Callable[[Sequence[Any]], Sequence[Any]]) -> Compute:
    """``compute`` with ``after`` applied to each batch's outputs; a staged computation stays staged."""
    if isinstance(compute, Staged):
        return Staged(compute.launch, lambda handle: after(compute.finish(handle)))
    return lambda batch: after(compute(batch))


def share(output: Any, receivers: int) -> list[Any]:
    """``output`` for the first receiver, independent copies for the others."""
    return [output] + [copy.deepcopy(output) for _ in range(receivers - 1)]


def one_shape(_: Any) -> None:
    """Every input has the same shape (the default)."""
    return None


def compute_now(
    inputs: Sequence[Any], compute: Compute, batch_size: int, shape: ShapeOf = one_shape, owner: object = None,
    by_content: bool = True, prepare: Callable[[Any], Any] | None = None,
) -> list[Any]:
    """Outputs of ``compute`` for ``inputs``, in order, computed in fixed-shape batches here and now
    (under ``owner``'s lock when one is named); ``by_content``: see :class:`RowQueue`.  ``prepare``,
    when given, makes each input what is computed (digests, shapes and rows are the prepared
    input's).  A :class:`Staged` computation has at most two batches started at a time; the lock is
    held while one launches (a finish only waits for its results, so another thread's batch may run
    between).  Packed, inputs are prepared, digested and placed in the order they come, and a batch
    launches as soon as it is full (the partial ones at the end), so that host work overlaps the
    device's work on the batches before it: the batches are those of queuing every input first,
    possibly in another order across shapes.  An input ``prepare`` refuses then fails the call
    after the batches before it have run (a launched one is dropped unfinished); by content every
    input is prepared before the first batch."""
    outputs: list[Any] = [None] * len(inputs)
    layers = (_content_layers if by_content else _packed_layers)(inputs, batch_size, shape, prepare)
    computed: list[tuple[list[Row], list[Any]]] = []
    if isinstance(compute, Staged):
        started: deque[tuple[list[Row], list[tuple[int, Any]], Any]] = deque()

        def finish_oldest() -> None:
            layer, placed, handle = started.popleft()
            computed.append((layer, placed_outputs(compute.finish(handle), placed, batch_size)))

        for layer in layers:
            placed = [(row.slot, row.item) for row in layer]
            with _held(owner):
                started.append((layer, placed, compute.launch(padded_batch(placed, batch_size))))
            if len(started) > 1:
                finish_oldest()
        while started:
            finish_oldest()
    else:
        for layer in layers:
            placed = [(row.slot, row.item) for row in layer]
            with _held(owner):
                computed.append((layer, run_rows(compute, placed, batch_size)))
    # delivered once every batch is done: packed, an input may join a row whose batch already ran
    for layer, layer_outputs in computed:
        for row, output in zip(layer, layer_outputs):
            for waiting, own in zip(row.receivers, share(output, len(row.receivers))):
                outputs[waiting.receiver] = own
    return outputs


def _content_layers(
    inputs: Sequence[Any], rows: int, shape: ShapeOf, prepare: Callable[[Any], Any] | None
) -> list[list[Row]]:
    """The layers of rows by content: every input is queued first, since a layer takes the first
    input waiting for each row."""
    queues: dict[Hashable, RowQueue] = {}
    for index, raw in enumerate(inputs):
        item = raw if prepare is None else prepare(raw)
        queues.setdefault(shape(item), RowQueue(rows, True)).add(Waiting(item, index, content_digest(item)))
    return [layer for queue in queues.values() for layer in queue.layers()]


def _packed_layers(
    inputs: Sequence[Any], rows: int, shape: ShapeOf, prepare: Callable[[Any], Any] | None
) -> Iterator[list[Row]]:
    """The layers a packed :class:`RowQueue` per shape forms -- each shape's distinct inputs in the
    order they came, ``rows`` at a time, a repeated input in the row of its first -- each as soon
    as it is full, the partial ones at the end (so shapes may interleave)."""
    filling: dict[Hashable, list[Row]] = {}
    placed: dict[int, list[Row]] = {}  # digest -> rows, of every layer so far
    for index, raw in enumerate(inputs):
        item = raw if prepare is None else prepare(raw)
        waiting = Waiting(item, index, content_digest(item))
        twin = next((row for row in placed.get(waiting.digest, ()) if same_input(row.item, item)), None)
        if twin is not None:
            twin.receivers.append(waiting)
            continue
        key = shape(item)
        layer = filling.setdefault(key, [])
        row = Row(len(layer), item, [waiting])
        layer.append(row)
        placed.setdefault(waiting.digest, []).append(row)
        if len(layer) == rows:
            yield filling.pop(key)
    yield from filling.values()


def _held(owner: object) -> ContextManager[None]:
    return computing(owner) if owner is not None else nullcontext()
