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
per batch (a *layer*), and identical inputs share one row.  A layer of ``n`` waiting inputs on
``rows`` rows fills about ``1 - exp(-n / rows)`` of them: 86 % when twice a batch is waiting, and
a bulk call needs as many batches as the most inputs any one row is wanted by.  Where rows are
known not to round by position, a backend packs them instead (``rows=packed``).
"""

from __future__ import annotations

import copy
import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np

Compute = Callable[[list[Any]], Sequence[Any]]
_WHOLE_BYTES = 1 << 16  # arrays up to this size are digested whole, larger ones by a fixed sample
_SAMPLE = 4096  # elements of the evenly spaced sample, plus the last few (a fade-out's tail)


def content_digest(value: Any) -> int:
    """A 64-bit digest of ``value``'s content (arrays, tensors, strings, numbers and tuples or lists
    of them); large arrays are digested from a sample, so different inputs may share a digest, but
    equal inputs always do.  Other types digest by type name alone: they all go to one row."""
    digest = hashlib.blake2b(digest_size=8)
    _feed(digest, value)
    return int.from_bytes(digest.digest(), "little")


def _feed(digest: "hashlib._Hash", value: Any) -> None:
    if isinstance(value, (tuple, list)):
        digest.update(b"(%d" % len(value))
        for part in value:
            _feed(digest, part)
        digest.update(b")")
    elif isinstance(value, np.ndarray):
        _feed_array(digest, value)
    elif isinstance(value, (str, bytes, bytearray, int, float, bool, type(None))):
        digest.update(type(value).__name__.encode() + b":")
        digest.update(value if isinstance(value, (bytes, bytearray)) else repr(value).encode())
    elif type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        digest.update(f"tensor:{value.dtype}{tuple(value.shape)}".encode())
        digest.update(_tensor_sample(value).tobytes())
    else:
        digest.update(b"?" + type(value).__qualname__.encode())


def _feed_array(digest: "hashlib._Hash", array: np.ndarray) -> None:
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    if array.dtype.hasobject:  # its bytes are addresses, which change from run to run
        return
    flat = array.reshape(-1)
    if flat.nbytes > _WHOLE_BYTES:
        flat = np.concatenate([flat[:: flat.size // _SAMPLE][:_SAMPLE], flat[-64:]])
    digest.update(np.ascontiguousarray(flat).tobytes())


def _tensor_sample(tensor: Any) -> np.ndarray:
    """A tensor's values as an array -- only a sample of a large one leaves its device."""
    import torch

    flat = tensor.detach().reshape(-1)
    if flat.numel() * flat.element_size() > _WHOLE_BYTES:
        flat = torch.cat([flat[:: flat.numel() // _SAMPLE][:_SAMPLE], flat[-64:]])
    flat = flat.cpu()
    if flat.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16
        flat = flat.float()
    return np.ascontiguousarray(flat.numpy())


def same_input(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are certainly the same input (so they may share one row)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_input(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (str, bytes, int, bool, type(None))):
        return a == b
    return False  # floats (NaN), tensors, anything else: computed once per request


@dataclass(eq=False)
class Waiting:
    """One input waiting for a row; ``receivers`` are told its output (see :meth:`RowQueue.layer`)."""

    item: Any
    receiver: Any
    digest: int
    asked_at: float = 0.0


@dataclass(eq=False)
class Row:
    """One row of a layer: the input computed there and everyone waiting for its output."""

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
    queues: dict[int, deque] = field(default_factory=dict)  # packed: one queue, under 0
    count: int = 0

    def add(self, waiting: Waiting) -> None:
        self.queues.setdefault(waiting.digest % self.rows if self.by_content else 0, deque()).append(waiting)
        self.count += 1

    @property
    def occupied(self) -> int:
        """Rows the next batch fills (before identical inputs are merged)."""
        return len(self.queues) if self.by_content else min(self.count, self.rows)

    def waited(self, now: float) -> float:
        """How long the oldest waiting input has waited (heads are the oldest of their queues)."""
        return max((now - queue[0].asked_at for queue in self.queues.values()), default=0.0)

    def layer(self) -> list[Row]:
        """The next batch: an input per row (by content: the first waiting for it), each with every
        waiting input identical to it."""
        if not self.by_content:
            return self._take(0, self.rows)
        return [row for slot in sorted(self.queues) for row in self._take(slot, 1)]

    def _take(self, key: int, count: int) -> list[Row]:
        """Rows for the first ``count`` distinct inputs of queue ``key`` (packed: rows 0, 1, ...)."""
        taken: list[Row] = []
        rest: deque = deque()
        for waiting in self.queues.pop(key):
            row = next((r for r in taken if r.receivers[0].digest == waiting.digest and same_input(r.item, waiting.item)), None)
            if row is not None:
                row.receivers.append(waiting)
            elif len(taken) < count:
                taken.append(Row(key if self.by_content else len(taken), waiting.item, [waiting]))
            else:
                rest.append(waiting)
        if rest:
            self.queues[key] = rest
        self.count -= sum(len(row.receivers) for row in taken)
        return taken

    def layers(self) -> Iterable[list[Row]]:
        while self.count:
            yield self.layer()


def run_rows(compute: Compute, placed: Sequence[tuple[int, Any]], rows: int) -> list[Any]:
    """``compute`` on one batch of ``rows`` rows holding each ``(slot, input)`` at its slot (the
    others padded with copies of the first input); the outputs of those slots, in order."""
    if not 0 < len(placed) <= rows:
        raise ValueError(f"a batch holds 1..{rows} inputs, got {len(placed)}")
    batch = [placed[0][1]] * rows
    for slot, item in placed:
        batch[slot] = item
    outputs = compute(batch)
    if len(outputs) != rows:
        raise RuntimeError(f"a batch of {rows} inputs gave {len(outputs)} outputs")
    return [outputs[slot] for slot, _ in placed]


def share(output: Any, receivers: int) -> list[Any]:
    """``output`` for the first receiver, independent copies for the others."""
    return [output] + [copy.deepcopy(output) for _ in range(receivers - 1)]
