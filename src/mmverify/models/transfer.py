"""Copies between host and device memory that never make the calling thread wait for the device.

On CUDA a plain ``tensor.to("cuda")`` or ``tensor.cpu()`` waits until every kernel queued before it
has run (torch synchronises the stream around a blocking copy), and copying from pageable memory
costs a second copy into a driver buffer.  A thread that prepares the next batch while the device
computes the last one -- a bulk call (:class:`~mmverify.models.rows.Staged`) or the device thread
of a round -- would stall at every such copy.  So on CUDA inputs are written once into pinned
(page-locked) host memory and copied without waiting, and outputs come back the same way, awaited
by an event recorded after their copy.  torch's pinned-memory cache keeps a buffer from being
reused until the copy that reads or writes it has finished.  Elsewhere (CPU, MPS) these are the
plain copies: the values are the same bytes either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch


def is_cuda(device: "torch.device | str") -> bool:
    import torch

    return torch.device(device).type == "cuda"


def upload_joined(arrays: Sequence[np.ndarray], device: "torch.device | str", dtype: type = np.float32) -> "torch.Tensor":
    """The 1-D ``arrays`` end to end, in ``dtype``, as one tensor on ``device``.

    The host joins them in one torch call, which gives up the interpreter lock once for the whole
    join (and copies in parallel); copying array by array gives it up once per array, and each time
    waits to win it back from whichever thread holds it -- in a round, hundreds of item threads."""
    import torch

    torch_dtype = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    parts = [torch.from_numpy(_flat(array, dtype)) for array in arrays]
    if not is_cuda(device):
        joined = torch.cat(parts) if parts else torch.zeros(0, dtype=torch_dtype)
        return joined.to(device=device)
    staged = torch.empty(sum(part.numel() for part in parts), dtype=torch_dtype, pin_memory=True)
    if parts:
        torch.cat(parts, out=staged)  # one copy, straight into pinned memory
    return staged.to(device=device, non_blocking=True)


def _flat(array: np.ndarray, dtype: type) -> np.ndarray:
    """``array`` as a contiguous 1-D array of ``dtype``: itself where it is one already, else a
    copy (a read-only array too: torch warns about sharing one)."""
    flat = np.ascontiguousarray(array, dtype=dtype).reshape(-1)
    return flat if flat.flags.writeable else flat.copy()


def upload(array: np.ndarray, device: "torch.device | str") -> "torch.Tensor":
    """``array`` (any shape) as a tensor on ``device``."""
    shape, array = np.shape(array), np.ascontiguousarray(array)  # the latter makes a 0-d array 1-d
    return upload_joined([array], device, array.dtype.type).reshape(shape)


class HostCopy:
    """A device tensor's values on their way to host memory: the copy starts now, :meth:`result`
    waits for it (on CUDA for that copy alone, not for work queued after it)."""

    def __init__(self, tensor: "torch.Tensor") -> None:
        import torch

        self._done: Any = None
        if not is_cuda(tensor.device):
            self._host = tensor.cpu()
            return
        self._host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        self._host.copy_(tensor, non_blocking=True)
        self._done = torch.cuda.Event()
        self._done.record(torch.cuda.current_stream(tensor.device))

    def ready(self) -> bool:
        """Whether the values have arrived (:meth:`result` would not wait)."""
        return self._done is None or bool(self._done.query())

    def result(self) -> np.ndarray:
        if self._done is not None:
            self._done.synchronize()
        return self._host.numpy()
