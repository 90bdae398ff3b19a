"""Host/device copies: the same values as plain copies; on CUDA, no wait for the device."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mmverify.models.transfer import HostCopy, upload, upload_joined  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_joined_arrays_arrive_end_to_end_in_the_asked_dtype(device):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n) for n in (5, 0, 17, 1)]  # float64 in, float32 out
    joined = upload_joined(arrays, device)
    assert joined.device.type == device and joined.dtype == torch.float32
    assert np.array_equal(joined.cpu().numpy(), np.concatenate(arrays).astype(np.float32))
    assert upload_joined([], device).numel() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_an_array_keeps_its_shape_and_dtype(device):
    index = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]  # not contiguous
    sent = upload(index, device)
    assert sent.dtype == torch.int64 and tuple(sent.shape) == (3, 2)
    assert np.array_equal(sent.cpu().numpy(), index)


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_copy_gives_the_tensors_values(device):
    tensor = torch.linspace(-1, 1, 24, device=device).reshape(4, 6)
    copied = HostCopy(tensor).result()
    assert isinstance(copied, np.ndarray) and np.array_equal(copied, tensor.cpu().numpy())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_on_cuda_neither_direction_waits_for_the_device():
    big = torch.randn(2048, 2048, device="cuda")
    torch.cuda.set_sync_debug_mode("error")  # any copy that synchronises raises
    try:
        busy = big @ big  # queued work the copies must not wait for
        sent = upload_joined([np.ones(1000, np.float32), np.zeros(10, np.float32)], "cuda")
        index = upload(np.arange(6).reshape(2, 3), "cuda")
        pending = HostCopy(busy[:2, :3] + index)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert float(sent.sum()) == 1000.0
    expected = (big @ big)[:2, :3] + torch.arange(6, device="cuda").reshape(2, 3)
    assert np.allclose(pending.result(), expected.cpu().numpy())
