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
    """The 1-D ``arrays`` end to end, in ``dtype``, as one tensor on ``device``."""
    import torch

    if not is_cuda(device):
        joined = np.concatenate([np.asarray(a, dtype=dtype).reshape(-1) for a in arrays]) if arrays else np.zeros(0, dtype)
        return torch.from_numpy(joined).to(device=device)
    total = sum(int(np.size(a)) for a in arrays)
    staged = torch.empty(total, dtype=torch.from_numpy(np.empty(0, dtype=dtype)).dtype, pin_memory=True)
    view, start = staged.numpy(), 0
    for array in arrays:
        size = int(np.size(array))
        view[start : start + size] = np.asarray(array).reshape(-1)  # one copy, straight into pinned memory
        start += size
    return staged.to(device=device, non_blocking=True)


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
