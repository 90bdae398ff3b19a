"""How fast the host scores CLAP items around a device of a given speed (a simulated device).

Runs with any Python that has torch, transformers and soundfile (mmverify is imported from ./src).
It scores ``a_sound_cot`` through the Reward API with the tiny CLAP checkpoint, as
``device_contention.py`` does, but each batch of clip embeddings goes to a simulated device:

- launching a batch holds the interpreter lock for ``--launch-ms`` (Python work, as queuing a
  model's kernels is: a full-size CLAP audio forward makes about 2,000 torch calls from Python);
- its embeddings are ready ``--device-ms`` after the device finished the batch before it (one
  device, batches in launch order); waiting for them releases the lock, as waiting for a GPU does.

The embeddings are unit vectors drawn from each clip's samples: the scores mean nothing, the work
around them is the real one (decoding, resampling, hashing, the round's batching, combining,
rows).  For each pair of ``--launch-ms`` and ``--device-ms`` it prints the simulated backend
alone (the same clips, prepared beforehand, through ``embed_audio``), then the items/s of
``--in-flight`` items scored together with decoding in the item threads and in
``--decode-processes`` processes, and their share of the backend alone: the 0.8 goal of the
issue, on a device that costs nothing to simulate.  The process's CPU use is in cores.

    python3 benchmarks/host_ceiling.py --items 512
    python3 benchmarks/host_ceiling.py --items 2048 --launch-ms 0,40 --device-ms 0,133

``--device-ms 133`` at batch 128 is the full-size CLAP's measured rate alone on an H100 (961
clips/s); ``--launch-ms 0`` is a launch that costs the host nothing (a model replayed from a CUDA
graph, say).

``--served 2,4`` also scores the items with that many worker processes and one model process
(``Reward(workers=N, model_process=True)``, ``mmverify score --workers N --model-process``), the
simulated device in the model process, with ``--served-decode-processes`` decoding processes in
each worker.  Beside items/s it prints the CPU each kind of process spent per item (read from
``/proc``): on a machine with a core for each process, one over the model process's share is
about the most items/s it can feed its device, and the workers' share over their number what
each must spend of its own core and interpreter lock.

    python3 benchmarks/host_ceiling.py --items 1024 --launch-ms 0 --device-ms 0 --served 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from batched_scoring import CLASSES, esc50_references, process_cpu, rate_of, refuse_error_rows, write_clips  # noqa: E402
from mmverify.models.clap_hf import HFClap  # noqa: E402
from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.testing.tiny_models import build_tiny_clap  # noqa: E402


class SimulatedDevice:
    """One device that runs batches in launch order, ``device_s`` each, after ``launch_s`` on the host."""

    def __init__(self, launch_s: float, device_s: float) -> None:
        self.launch_s, self.device_s = launch_s, device_s
        self.free_at = 0.0
        self.lock = threading.Lock()

    def launch(self, clips: list[np.ndarray], dim: int) -> "Landing":
        hold_lock_for(self.launch_s)
        rows = np.stack([unit_row(clip, dim) for clip in clips])
        with self.lock:
            self.free_at = max(time.perf_counter(), self.free_at) + self.device_s
            return Landing(rows, self.free_at)


class Landing:
    """A batch's embeddings on their way back: ``ready()`` and ``result()``, as a ``HostCopy``'s."""

    def __init__(self, rows: np.ndarray, at: float) -> None:
        self.rows, self.at = rows, at

    def ready(self) -> bool:
        return time.perf_counter() >= self.at

    def result(self) -> np.ndarray:
        wait = self.at - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        return self.rows


def hold_lock_for(seconds: float) -> None:
    """Python work for ``seconds`` (the interpreter hands its lock on at its switch interval, as it
    does between torch operations)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def unit_row(clip: np.ndarray, dim: int) -> np.ndarray:
    row = np.resize(clip[:: max(1, clip.size // dim)], dim).astype(np.float32) + 1e-3
    return row / np.linalg.norm(row)


@contextmanager
def simulated(device: SimulatedDevice) -> Iterator[None]:
    """HFClap's audio batches go to ``device`` (its text embeddings stay the model's)."""
    launch = HFClap._launch_audio
    install(device)
    try:
        yield
    finally:
        HFClap._launch_audio = launch


def install(device: SimulatedDevice) -> None:
    def simulated_launch(self: HFClap, clips: list[np.ndarray], padding: str) -> Landing:
        return device.launch(clips, self._model.config.projection_dim)

    HFClap._launch_audio = simulated_launch


# A spawned process (the model process) imports this file again as __mp_main__: it simulates the
# device this variable names, "launch_ms,device_ms", set by the parent before it starts the pool.
DEVICE_VARIABLE = "HOST_CEILING_DEVICE"
if __name__ == "__mp_main__" and os.environ.get(DEVICE_VARIABLE):
    install(SimulatedDevice(*(float(ms) / 1000 for ms in os.environ[DEVICE_VARIABLE].split(","))))


def backend_alone(clap: Path, clips: list[Path], batch_size: int) -> float:
    backend = HFClap(source=str(clap), device="cpu", batch_size=batch_size, rows="packed")
    return rate_of(backend, lambda model, audio: model.embed_audio(audio), clips, repeats=1)


def trial(label: str, reward: Reward, items: list[dict], alone: float) -> None:
    cpu, started = sum(os.times()[:2]), time.perf_counter()
    rows = reward.rows(items)
    wall = time.perf_counter() - started
    refuse_error_rows(label, rows)
    rate = len(items) / wall
    print(f"  {label:24} {rate:8.1f} items/s  {rate / alone:5.2f} of alone  process {(sum(os.times()[:2]) - cpu) / wall:4.1f} cores", flush=True)


def served_trial(label: str, reward: Reward, items: list[dict], alone: float) -> None:
    """Like :func:`trial`, with the CPU per item of each kind of process: this one, the model
    process, the workers and their decoding processes."""
    executor = reward._processes._executor  # the pool kept between calls: its processes' pids
    model, workers = executor._models.process.pid, [worker.process.pid for worker in executor._pool._kept]  # type: ignore[union-attr]
    before, cpu, started = process_cpu(), sum(os.times()[:2]), time.perf_counter()
    rows = reward.rows(items)
    wall, parent_cpu, after = time.perf_counter() - started, sum(os.times()[:2]) - cpu, process_cpu()
    refuse_error_rows(label, rows)
    spent = {pid: seconds - before.get(pid, (ppid, 0.0))[1] for pid, (ppid, seconds) in after.items()}
    decoding = [pid for pid, (ppid, _) in after.items() if ppid in workers]
    per_item = {
        "this process": parent_cpu, "model process": spent.get(model, float("nan")),
        f"{len(workers)} workers": sum(spent[pid] for pid in workers), f"{len(decoding)} decoding": sum(spent[pid] for pid in decoding),
    }  # fmt: skip
    rate = len(items) / wall
    shares = ", ".join(f"{role} {1000 * seconds / len(items):.2f}" for role, seconds in per_item.items())
    print(f"  {label:24} {rate:8.1f} items/s  {rate / alone:5.2f} of alone  CPU ms an item: {shares}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=512)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--launch-ms", default="0,40", help="comma-separated host costs of launching a batch")
    parser.add_argument("--device-ms", default="0,133", help="comma-separated device times of a batch")
    parser.add_argument("--decode-processes", default="1", help="comma-separated numbers of decoding processes")
    parser.add_argument("--served", default="", help="comma-separated numbers of worker processes around one model process")
    parser.add_argument("--served-decode-processes", type=int, default=0, help="decoding processes in each of those workers")
    args = parser.parse_args()
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import where torchvision's compiled ops cannot load
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clap = build_tiny_clap(root / "clap")
        clips = write_clips(root / "clips", args.items, 5.0, seed=7)
        env = {"MMVERIFY_REFERENCES": f"esc50={esc50_references(root / 'ESC-50', per_class=12)}", "MMVERIFY_NO_OUTPUT_CACHE": "1"}
        items = [
            {"task": "a_sound_cot", "instance": {"target": CLASSES[i % len(CLASSES)]}, "parts": [{"type": "audio", "path": str(p)}]}
            for i, p in enumerate(clips)
        ]

        def reward(decode_processes: int, workers: int = 1) -> Reward:
            models = f"audio_text=clap-hf@{clap}?batch_size={args.batch_size}&rows=packed"
            built = Reward(
                models=models, device="cpu", env=env, in_flight=args.in_flight, cache_dir=root / "cache", decode_processes=decode_processes,
                workers=workers, model_process=workers > 1,
            )  # fmt: skip
            # loads the model, indexes the references, starts the processes (each worker's too)
            built.rows(items[: max(2, 4 * decode_processes, min(len(items), args.in_flight * (workers - 1) + 1))])
            return built

        counts = [int(text) for text in args.decode_processes.split(",") if text]
        rewards = {0: reward(0)} | {count: reward(count) for count in counts}
        print(f"{args.items} items of 5 s, {args.in_flight} in flight, batches of {args.batch_size}, {os.cpu_count()} CPUs", flush=True)
        try:
            for launch_ms in (float(text) for text in args.launch_ms.split(",")):
                for device_ms in (float(text) for text in args.device_ms.split(",")):
                    with simulated(SimulatedDevice(launch_ms / 1000, device_ms / 1000)):
                        alone = backend_alone(clap, clips, args.batch_size)
                        print(f"launch {launch_ms:g} ms, device {device_ms:g} ms a batch: backend alone {alone:.1f} clips/s", flush=True)
                        for count, scorer in rewards.items():
                            trial(f"{count} decoding processes" if count else "decoding in item threads", scorer, items, alone)
                        for workers in (int(text) for text in args.served.split(",") if text):
                            os.environ[DEVICE_VARIABLE] = f"{launch_ms},{device_ms}"  # the model process's device
                            served = reward(args.served_decode_processes, workers)
                            try:
                                served_trial(f"{workers} workers, model process", served, items, alone)
                            finally:
                                served.close()
        finally:
            for scorer in rewards.values():
                scorer.close()


if __name__ == "__main__":
    main()
