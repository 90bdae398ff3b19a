"""CLAP front end: transformers' numpy ClapFeatureExtractor vs mmverify's torch log-mel, and the model.

Runs with any Python that has torch and transformers (mmverify is imported from ./src).  It saves a
random-init ClapModel with the default configuration (laion/clap-htsat-unfused's sizes, ~153 M
parameters) and the unfused checkpoint's extractor settings to a temporary folder, makes seeded
synthetic clips (5 s by default, so zero-padding fills half of CLAP's 10 s window), and prints
clips per second:

- front end: the extractor clip by clip (what ``HFClap(features="numpy")`` calls) vs the torch
  front end on the device in float64 (published parity) and float32 (used under bf16/fp16);
- model forward alone (fp32, bf16) on precomputed features, and end to end ``embed_audio``
  (crop, pad, features, model, normalisation; no cache) with each front end and precision; for the
  torch front end also with the earlier copies (blocking copies from pageable memory, each batch
  finished before the next starts: what staging through pinned memory replaced), and on CUDA
  whether queuing one batch makes the host wait for the device, the host's and the device's time
  for one batch (the device's with the host's queuing hidden behind a sleeping kernel, front end
  and model apart), the CUDA runtime calls that took the host the longest in one ``embed_audio``
  call (torch's profiler: a call that waits for the device shows there) beside how busy the device
  was, each batch's launch and wait in one such call (did the device finish the batch before while
  the host launched this one? were pinned host blocks created?), and ``embed_audio`` with the
  model replayed from a CUDA graph (an experiment: ``benchmarks/cuda_graphs.py``).

On the CPU the model rows are skipped unless ``--model`` is given (a forward pass of the full-size
model takes about 0.2 s per clip there).  Timings are the best of ``--repeats`` runs; the rows
also show clips per second of process CPU time, steadier than wall time when other jobs share the
machine.  The extractor runs on one core; ``--threads 1`` gives torch the same.

    python3 benchmarks/clap_frontend.py --clips 16 --device cpu --threads 1
    python3 benchmarks/clap_frontend.py --clips 512 --device cuda --batch-sizes 32,128
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from mmverify.models import transfer  # noqa: E402
from mmverify.models.clap import ClapBackend  # noqa: E402
from mmverify.models.clap_hf import HFClap  # noqa: E402
from mmverify.models.clap_features import ClapMelFeatures  # noqa: E402
from cuda_graphs import graphed_clap  # noqa: E402  (benchmarks/cuda_graphs.py)
from throughput import Rate, in_batches, measure  # noqa: E402  (benchmarks/throughput.py)

SR = 48_000


def save_checkpoint(folder: Path, seed: int = 0) -> int:
    """A default-size random-init ClapModel with laion/clap-htsat-unfused's extractor settings."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import a torchvision whose compiled ops cannot load
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, ClapProcessor, RobertaTokenizer

    vocab = {token: i for i, token in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>", *sorted(ByteLevel.alphabet())])}
    torch.manual_seed(seed)
    model = ClapModel(ClapConfig()).eval()
    extractor = ClapFeatureExtractor(
        feature_size=64, sampling_rate=SR, hop_length=480, max_length_s=10, fft_window_size=1024,
        frequency_min=50, frequency_max=14_000, truncation="rand_trunc", padding="repeatpad",
    )  # fmt: skip
    model.save_pretrained(folder)
    ClapProcessor(feature_extractor=extractor, tokenizer=RobertaTokenizer(vocab=vocab, merges=[])).save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def synth_clips(count: int, seconds: float, seed: int = 0, made: int = 64) -> list[np.ndarray]:
    """Harmonic tones with vibrato, a slow envelope and a little noise; a different one per clip.
    The first ``made`` are made from scratch, the rest are those shifted in time and scaled (making
    each of 2,048 from scratch took a minute on a GPU machine's host)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    clips = []
    for _ in range(min(count, made)):
        phase = 2 * np.pi * rng.uniform(110, 880) * t + rng.uniform(1, 6) * np.sin(2 * np.pi * rng.uniform(2, 7) * t)
        tone = sum(np.sin(k * phase) / k for k in range(1, 5))
        envelope = np.abs(np.sin(np.pi * t * rng.uniform(0.3, 2)))
        clips.append((0.3 * envelope * tone + 0.02 * rng.standard_normal(t.size)).astype(np.float32))
    for i in range(len(clips), count):
        shift, gain = int(rng.integers(1, max(2, t.size))), np.float32(rng.uniform(0.5, 1.0))
        clips.append(np.roll(clips[i % made], shift) * gain)
    return clips


def extractor_rate(source: str, clips: list[np.ndarray], batch: int, repeats: int) -> Rate:
    """The numpy extractor (what ``HFClap(features="numpy")`` calls) on cropped, zero-padded windows."""
    numpy_clap = HFClap(source=source, device="cpu", features="numpy")
    numpy_clap.ensure_loaded()
    filled = in_batches(numpy_clap.prepare(clips, "zero")[0], batch)
    return measure(lambda: [numpy_clap.input_features(b) for b in filled], len(clips), "cpu", repeats)


def torch_front_end_rates(source: str, clips: list[np.ndarray], device: str, batch: int, repeats: int) -> dict[str, Rate]:
    """The torch front end on the same cropped clips, zero-padded on the device as HFClap does, in
    float64 (published parity) and float32."""
    import torch

    clap = HFClap(source=source, device="cpu", features="numpy")
    clap.ensure_loaded()
    cropped = in_batches(clap.prepare(clips, "zero", fill=False)[0], batch)
    mel = ClapMelFeatures.from_extractor(clap._extractor)
    rows = {}
    for dtype in (torch.float64, torch.float32):
        name = f"torch front end ({device}, {str(dtype).replace('torch.', '')}), batch {batch}"
        with torch.inference_mode():
            rows[name] = measure(
                lambda: [mel(b, padding="zero", device=device, compute_dtype=dtype) for b in cropped], len(clips), device, repeats
            )
    return rows


@contextmanager
def earlier_copies() -> Iterator[None]:
    """``embed_audio`` as before staged batches: plain blocking copies, one batch after another."""
    saved = transfer.is_cuda, HFClap._audio_compute
    transfer.is_cuda = lambda device: False
    HFClap._audio_compute = ClapBackend._audio_compute
    try:
        yield
    finally:
        transfer.is_cuda, HFClap._audio_compute = saved


def launch_waits(clap: HFClap, clips: list[np.ndarray]) -> str:
    """Whether queuing one batch of ``embed_audio`` made the host wait for the device (CUDA only)."""
    import torch

    prepared, _ = clap.prepare(clips, "zero", fill=False)
    torch.cuda.set_sync_debug_mode("error")
    try:
        clap._launch_audio(prepared, "zero")
    except RuntimeError as exc:
        return f"yes ({str(exc).splitlines()[0]})"
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return "no"


def queue_ms(clap: HFClap, clips: list[np.ndarray], repeats: int) -> str:
    """The host's time to queue one batch of ``embed_audio`` (features and model, CUDA only): what
    ``host_ceiling.py --launch-ms`` simulates."""
    import torch

    prepared, _ = clap.prepare(clips, "zero", fill=False)
    times = []
    for _ in range(repeats + 1):  # the first one warms up
        torch.cuda.synchronize()
        started = time.perf_counter()
        handle = clap._launch_audio(prepared, "zero")
        times.append(time.perf_counter() - started)
        handle.result()
    return f"{1000 * min(times[1:]):.1f} ms (best of {repeats})"


SLEEP_CYCLES = 1_000_000_000  # about half a second at a GPU's 2 GHz: longer than the host takes to queue a batch


def device_ms(clap: HFClap, clips: list[np.ndarray], repeats: int) -> str:
    """The device's own time for one batch of ``embed_audio``, front end (with the copy of the
    samples) and model apart (CUDA only).  The batch is queued behind a kernel that sleeps longer
    than the host takes to queue it, so the device runs its work back to back; the row says so,
    or that the host was slower than the sleep (the times then include waits for the host).  The
    model's time is its forward; pooling and the copy back are left out."""
    import torch

    prepared, _ = clap.prepare(clips, "zero", fill=False)
    is_longer = torch.zeros((len(clips), 1), dtype=torch.bool, device=clap.device)
    front, model, hidden = [], [], True
    for _ in range(repeats + 1):  # the first one warms up
        slept, start, featured, done = (torch.cuda.Event(enable_timing=True) for _ in range(4))
        torch.cuda.synchronize()
        slept.record()
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        queued = time.perf_counter()
        with torch.inference_mode():
            features = clap.feature_batch(prepared, "zero")
            featured.record()
            clap._model.get_audio_features(input_features=features, is_longer=is_longer)
        done.record()
        queued = time.perf_counter() - queued
        torch.cuda.synchronize()
        if front:  # the first one warms up
            hidden = hidden and 1000 * queued < slept.elapsed_time(start)
        front.append(start.elapsed_time(featured))
        model.append(featured.elapsed_time(done))
    note = "the host queued it within the sleep" if hidden else "NOT hidden: the host took longer than the sleep"
    return f"front end {min(front[1:]):.1f} ms, model {min(model[1:]):.1f} ms ({note})"


def runtime_calls(clap: HFClap, clips: list[np.ndarray], top: int = 6) -> str:
    """Where the host waits in ``embed_audio`` (CUDA only): the CUDA runtime calls that took the
    most host time over one bulk call, from torch's profiler, and how busy the device was."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    clap.embed_audio(clips)  # warm: allocator pools, FFT plans
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
        started = time.perf_counter()
        clap.embed_audio(clips)
        torch.cuda.synchronize()
        wall_ms = 1000 * (time.perf_counter() - started)
    averages = trace.key_averages()
    on_host = [e for e in averages if e.device_type == DeviceType.CPU]
    calls = sorted((e for e in on_host if e.key.startswith("cu")), key=lambda e: e.cpu_time_total, reverse=True)  # cuda*, cu*
    # kernels and copies are events of their own on the device (host operations also count their
    # kernels' time, so only these are summed); one stream, so they do not overlap
    on_device = [e for e in averages if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    busy_ms = sum(e.self_device_time_total for e in on_device) / 1000
    listed = ", ".join(f"{e.key} {e.count}x {e.cpu_time_total / 1000:.1f} ms" for e in calls[:top])
    return f"{wall_ms:.0f} ms for {len(clips)} clips, device busy {busy_ms:.0f} ms; {listed}"


class _TimedLanding:
    """A launched batch's handle that notes when its result was asked for and how long that waited."""

    def __init__(self, handle: Any, step: dict[str, float]) -> None:
        self.handle, self.step = handle, step

    def ready(self) -> bool:
        return self.handle.ready()

    def result(self) -> Any:
        asked = time.perf_counter()
        try:
            return self.handle.result()
        finally:
            self.step["wait_ms"] = 1000 * (time.perf_counter() - asked)


def _pinned_blocks() -> tuple[int, float] | None:
    """Pinned host blocks torch's cache has created so far, and the microseconds that took."""
    import torch

    available = torch.cuda.is_available() and hasattr(torch.cuda, "host_memory_stats")
    stats = torch.cuda.host_memory_stats() if available else {}
    if "num_host_alloc" not in stats:
        return None
    return int(stats["num_host_alloc"]), float(stats.get("host_alloc_time.total", 0.0))


def batch_steps(clap: HFClap, clips: list[np.ndarray]) -> str:
    """Each batch of one bulk ``embed_audio`` call: the host's time to launch it, whether the device
    had finished the batch before it when the launch began and when it ended (done before: the
    device waited for the host; done only after: the launch waited for the device), how long its
    result was waited for, and the pinned host blocks created meanwhile (a fresh ``cudaHostAlloc``);
    and the call's time outside launches and waits, which the device does not overlap."""
    clap.embed_audio(clips)  # warm: allocator pools, FFT plans
    steps: list[dict[str, float]] = []
    launch = clap._launch_audio
    previous: list[Any] = []

    def logged(batch: list[np.ndarray], padding: str) -> _TimedLanding:
        before, blocks = (previous[-1].ready() if previous else None), _pinned_blocks()
        started = time.perf_counter()
        handle = launch(batch, padding)
        step = {"launch_ms": 1000 * (time.perf_counter() - started), "done_before": before}
        step["done_after"] = previous[-1].ready() if previous else None
        if blocks is not None:
            now = _pinned_blocks() or blocks
            step["blocks"], step["block_ms"] = now[0] - blocks[0], (now[1] - blocks[1]) / 1000
        steps.append(step)
        previous.append(_TimedLanding(handle, step))
        return previous[-1]

    clap._launch_audio = logged  # type: ignore[method-assign]
    try:
        started = time.perf_counter()
        clap.embed_audio(clips)
        wall_ms = 1000 * (time.perf_counter() - started)
    finally:
        clap._launch_audio = launch  # type: ignore[method-assign]

    def said(flag: Any) -> str:
        return "-" if flag is None else "yes" if flag else "no"

    def blocks(step: dict[str, Any]) -> str:
        return f", {step['blocks']} pinned blocks {step['block_ms']:.1f} ms" if "blocks" in step else ""

    rows = [
        f"#{i}: launch {s['launch_ms']:.1f} ms (previous done {said(s['done_before'])}/{said(s['done_after'])}), "
        f"wait {s.get('wait_ms', float('nan')):.1f} ms{blocks(s)}"
        for i, s in enumerate(steps)
    ]
    outside = wall_ms - sum(s["launch_ms"] + s.get("wait_ms", 0.0) for s in steps)  # preparing, batching, joining
    return f"{wall_ms:.0f} ms for {len(clips)} clips, {outside:.0f} outside launches and waits; " + "; ".join(rows)


def diagnosed(measure_it: Any, *args: Any) -> str:
    """A diagnostic row, or why it failed: the rows after it are measured all the same."""
    try:
        return measure_it(*args)
    except Exception as exc:  # noqa: BLE001  (a broken diagnostic must not cost a device call its other rows)
        return f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def graphed_rate(source: str, clips: list[np.ndarray], device: str, batch: int, precision: str, repeats: int) -> Rate | str:
    """``embed_audio`` with the model replayed from CUDA graphs, or why capturing failed."""
    try:
        with graphed_clap():
            clap = HFClap(source=source, device=device, batch_size=batch, precision=precision)
            clap.ensure_loaded()
            return measure(lambda: clap.embed_audio(clips), len(clips), device, repeats)
    except Exception as exc:  # noqa: BLE001  (a failed capture is the experiment's answer)
        return f"failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def model_rates(
    source: str, clips: list[np.ndarray], few: list[np.ndarray], device: str, batch: int, repeats: int
) -> Iterator[tuple[str, Any]]:
    """Model forward alone on precomputed features, and end-to-end embed_audio per front end and
    precision (the numpy front end on the ``few`` clips only: it is the slow one); each row as
    soon as it is measured, so a time cap keeps those before it."""
    import torch

    for precision in ("fp32", "bf16"):
        clap = HFClap(source=source, device=device, batch_size=batch, precision=precision)
        clap.ensure_loaded()
        prepared, _ = clap.prepare(clips[:batch], "zero")
        features = clap.feature_batch(prepared)
        is_longer = torch.zeros((features.shape[0], 1), dtype=torch.bool, device=clap.device)
        with torch.inference_mode():
            forward = measure(
                lambda: clap._model.get_audio_features(input_features=features, is_longer=is_longer),
                features.shape[0], device, repeats,
            )  # fmt: skip
        yield f"model forward, {precision}, batch {features.shape[0]}", forward
        for features_name, subset in (("torch", clips), ("numpy", few)):
            end_to_end = HFClap(source=source, device=device, batch_size=batch, precision=precision, features=features_name)
            end_to_end.ensure_loaded()
            yield f"embed_audio, {features_name} front end, {precision}, batch {batch}", measure(
                lambda: end_to_end.embed_audio(subset), len(subset), device, repeats
            )
            if features_name == "torch":
                staged = end_to_end.embed_audio(subset)
                with earlier_copies():
                    earlier_rate = measure(lambda: end_to_end.embed_audio(subset), len(subset), device, repeats)
                    earlier = end_to_end.embed_audio(subset)
                yield f"embed_audio, torch, {precision}, earlier copies", earlier_rate
                yield f"embed_audio staged = earlier copies ({precision})", (
                    "same bytes" if np.array_equal(staged, earlier) else f"NOT the same (max |diff| {np.abs(staged - earlier).max():.3g})"
                )
                if device.startswith("cuda"):
                    yield f"queuing a batch of {batch} waits for the device ({precision})", launch_waits(end_to_end, clips[:batch])
                    yield f"host time to queue a batch of {batch} ({precision})", queue_ms(end_to_end, clips[:batch], repeats)
                    yield f"device time of a batch of {batch} ({precision})", diagnosed(device_ms, end_to_end, clips[:batch], repeats)
                    yield f"CUDA runtime calls of embed_audio ({precision})", diagnosed(runtime_calls, end_to_end, clips[: 4 * batch])
                    yield f"batch by batch in embed_audio ({precision})", diagnosed(batch_steps, end_to_end, clips[: 4 * batch])
                    yield f"embed_audio, torch, {precision}, CUDA graph", graphed_rate(source, subset, device, batch, precision, repeats)


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16, help="synthetic clips per measurement")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of every clip")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-sizes", default=None, help="comma-separated (default: 8 on the CPU, 32,128 on a GPU)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", action="store_true", help="also time the model on the CPU (slow)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument("--numpy-clips", type=int, default=64, help="at most this many clips through the numpy extractor")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    on_cpu = args.device == "cpu"
    sizes = [int(s) for s in (args.batch_sizes or ("8" if on_cpu else "32,128")).split(",")]

    with tempfile.TemporaryDirectory(prefix="clap-frontend-") as tmp:
        start = time.perf_counter()
        params = save_checkpoint(Path(tmp) / "clap")
        source = str(Path(tmp) / "clap")
        clips = synth_clips(args.clips, args.seconds)
        few = clips[: args.numpy_clips]
        name = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, {torch.get_num_threads()} torch threads"
        print(f"{name}; random-init ClapModel {params / 1e6:.1f} M parameters (saved in {time.perf_counter() - start:.1f} s); "
              f"{args.clips} clips of {args.seconds:g} s ({len(few)} through the numpy extractor); best of {args.repeats}")
        extractor = extractor_rate(source, few, sizes[0], args.repeats)
        print(f"{'numpy ClapFeatureExtractor (CPU, clip by clip)':<58} {extractor}")
        for size in sizes:
            for key, value in torch_front_end_rates(source, clips, args.device, size, args.repeats).items():
                print(f"{key:<58} {value}   {value.wall / extractor.wall:6.1f}x the extractor ({value.cpu / extractor.cpu:.1f}x per CPU-s)")
            if not on_cpu or args.model:
                for key, value in model_rates(source, clips, few, args.device, size, args.repeats):
                    print(f"{key:<58} {value}")


if __name__ == "__main__":
    main()
