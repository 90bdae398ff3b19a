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
def test_read_only_and_strided_arrays_are_joined_without_a_warning_and_left_as_they_were(device):
    import warnings

    frozen = np.arange(6, dtype=np.float32)
    frozen.flags.writeable = False
    strided = np.arange(10, dtype=np.float32)[::3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns when it shares a read-only array
        joined = upload_joined([frozen, strided, np.float32(7)], device)
    assert joined.cpu().tolist() == [0, 1, 2, 3, 4, 5, 0, 3, 6, 9, 7]
    joined.add_(1)  # the tensor is the join's own memory, not the arrays'
    assert frozen.tolist() == [0, 1, 2, 3, 4, 5] and strided.tolist() == [0, 3, 6, 9]


@pytest.mark.parametrize("device", DEVICES)
def test_an_array_keeps_its_shape_and_dtype(device):
    index = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]  # not contiguous
    sent = upload(index, device)
    assert sent.dtype == torch.int64 and tuple(sent.shape) == (3, 2)
    assert np.array_equal(sent.cpu().numpy(), index)


@pytest.mark.parametrize("device", DEVICES)
def test_a_host_copy_gives_the_tensors_values(device):
    tensor = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6) / 4  # exact in binary
    pending = HostCopy(tensor)
    copied = pending.result()
    assert pending.ready()  # nothing left to wait for
    assert isinstance(copied, np.ndarray) and copied.dtype == np.float32
    assert np.array_equal(copied, np.arange(24, dtype=np.float32).reshape(4, 6) / 4)
    assert upload(np.float64(2.5), device).shape == ()  # a 0-d array stays 0-d


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@CUDA
def test_on_cuda_neither_direction_waits_for_the_device():
    torch.cuda.set_sync_debug_mode("error")  # any copy that synchronises raises
    try:
        torch.cuda._sleep(1_000_000_000)  # about a second of queued device work the copies must not wait for
        sent = upload_joined([np.ones(1000, np.float32), np.zeros(10, np.float32)], "cuda")
        index = upload(np.arange(6).reshape(2, 3), "cuda")
        pending = HostCopy(sent[:6].reshape(2, 3) * 2 + index)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    # the result waits for its copy, which runs after the sleep
    assert np.array_equal(pending.result(), 2 + np.arange(6).reshape(2, 3)) and pending.ready()


@CUDA
def test_on_cuda_a_staging_buffer_is_not_reused_before_its_copy_has_run():
    torch.cuda._sleep(1_000_000_000)  # the first copy waits behind this
    first = upload_joined([np.full(1 << 20, 1.0, np.float32)], "cuda")
    second = upload_joined([np.full(1 << 20, 2.0, np.float32)], "cuda")  # same size: a cached pinned block
    assert float(first.sum()) == float(1 << 20) and float(second.sum()) == float(2 << 20)
