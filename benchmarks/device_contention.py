"""Where items scored together lose time: the device thread's batches, alone vs among item threads.

Runs with any Python that has torch, transformers and soundfile (mmverify is imported from ./src).
It scores ``a_sound_cot`` (CLAP) through the Reward API, like ``batched_scoring.py``, and prints
one row per setting:

- items/s;
- the share of the wall time with a batch running (from its start, or launch, to its answers),
  the batches' count, and the milliseconds each took from start to answers;
- the process's CPU use in cores (decoding processes not counted);
- the share of the device thread's time in batches (running, launching or landing them; not its
  waits between them) that it spent on a CPU.

The settings are the defaults, the interpreter's switch interval, a cap on the number of items that
prepare at once (an item holds one of ``--prep-limits`` places while it decodes and combines, and
gives it up while it waits for its batch), media decoded in ``--decode-processes`` processes
(:mod:`mmverify.core.decoding`), and other numbers of items in flight.  Compare the
milliseconds per batch with *backend alone* (the same clips, prepared beforehand, through the
backend at the batch shape).  A batch that takes much longer among item threads, with the device
thread on a CPU for a small share of it, waits for the interpreter lock (waiting for a GPU may spin
and count as CPU time; waiting for the lock does not).

    python3 benchmarks/device_contention.py --items 256
    python3 benchmarks/device_contention.py --full --device cuda --items 2048

``--cuda-graphs`` adds the backend alone and the largest number of decoding processes with CLAP's
model replayed from CUDA graphs (an experiment, CUDA only: ``benchmarks/cuda_graphs.py``).
``--first-only`` runs the first setting alone, for a profile of who holds the lock
(``bash benchmarks/gpu_run.sh profile``, then ``benchmarks/gil_summary.py``).
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
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from batched_scoring import CLASSES, esc50_references, full_size_clap, rate_of, refuse_error_rows, write_clips  # noqa: E402
from cuda_graphs import graphed_clap  # noqa: E402
from mmverify.models import batching  # noqa: E402
from mmverify.pipelines import batch  # noqa: E402
from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.testing.tiny_models import build_tiny_clap  # noqa: E402


class Probe:
    """Wraps the round's batch runs (time, CPU time, count) and, with a limit, the items' own work."""

    def __init__(self) -> None:
        self.reset()
        self.places: threading.Semaphore | None = None
        run, land, submit, within = batching.BatchRound._run, batching.BatchRound._land, batching.BatchRound.submit, batch._within
        probe = self

        def timed_run(round_: Any, group: Any, layer: Any) -> Any:
            begun = probe.enter()
            launched = probe.on_thread(run, round_, group, layer)
            if launched is None:
                probe.leave(begun)
            else:  # launched on the device: it counts until it lands
                probe.begun[id(launched)] = begun
            return launched

        def timed_land(round_: Any, launched: Any) -> None:
            try:
                probe.on_thread(land, round_, launched)
            finally:
                probe.leave(probe.begun.pop(id(launched)))

        def waiting_submit(round_: Any, *args: Any, **kwargs: Any) -> Any:
            with probe.given_up():
                return submit(round_, *args, **kwargs)

        def limited_within(item: Any, timeout: Any, decoder: Any) -> Any:
            with probe.held():
                return within(item, timeout, decoder)

        batching.BatchRound._run, batching.BatchRound._land = timed_run, timed_land
        batching.BatchRound.submit, batch._within = waiting_submit, limited_within

    def reset(self) -> None:
        self.busy = self.latency = self.thread_wall = self.cpu = 0.0
        self.batches = self.running = 0
        self.busy_since = 0.0
        self.begun: dict[int, float] = {}

    def on_thread(self, step: Any, *args: Any) -> Any:
        """``step(*args)`` on the device thread, its wall and CPU time counted."""
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return step(*args)
        finally:
            self.thread_wall += time.perf_counter() - started
            self.cpu += time.thread_time() - cpu

    def enter(self) -> float:
        """A batch starts (the device thread is the only caller): its start time."""
        now = time.perf_counter()
        self.batches += 1
        if not self.running:
            self.busy_since = now
        self.running += 1
        return now

    def leave(self, begun: float) -> None:
        now = time.perf_counter()
        self.latency += now - begun
        self.running -= 1
        if not self.running:
            self.busy += now - self.busy_since

    @contextmanager
    def held(self) -> Iterator[None]:
        places = self.places
        if places is not None:
            places.acquire()
        try:
            yield
        finally:
            if places is not None:
                places.release()

    @contextmanager
    def given_up(self) -> Iterator[None]:
        places = self.places
        if places is not None:
            places.release()
        try:
            yield
        finally:
            if places is not None:
                places.acquire()

    def trial(self, label: str, reward: Reward, items: list[dict], switch: float | None = None, limit: int | None = None) -> None:
        default_switch = sys.getswitchinterval()
        sys.setswitchinterval(switch or default_switch)
        self.places = threading.Semaphore(limit) if limit else None
        self.reset()
        cpu, started = sum(os.times()[:2]), time.perf_counter()
        try:
            rows = reward.rows(items)
        finally:
            wall = time.perf_counter() - started
            sys.setswitchinterval(default_switch)
            self.places = None
        refuse_error_rows(label, rows)
        print(
            f"{label:30} {len(items) / wall:8.1f} items/s  device busy {self.busy / wall:5.2f}  {self.batches:4d} batches "
            f"{1000 * self.latency / max(self.batches, 1):7.1f} ms each  process {(sum(os.times()[:2]) - cpu) / wall:5.1f} cores  "
            f"device thread on a CPU {self.cpu / max(self.thread_wall, 1e-9):4.2f}", flush=True,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=256)
    parser.add_argument("--in-flight", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="full-size CLAP (else the tiny test checkpoint)")
    parser.add_argument("--prep-limits", default="16,4,2", help="comma-separated caps on items preparing at once")
    parser.add_argument("--decode-processes", default="4,8", help="comma-separated numbers of decoding processes")
    parser.add_argument("--first-only", action="store_true", help="only the first setting (to profile it: benchmarks/gil_summary.py)")
    parser.add_argument("--cuda-graphs", action="store_true", help="also with CLAP's model replayed from CUDA graphs (CUDA only)")
    args = parser.parse_args()
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # lets transformers import where torchvision's compiled ops cannot load
    probe = Probe()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        clap = full_size_clap(root / "clap") if args.full else build_tiny_clap(root / "clap")
        clips = write_clips(root / "clips", args.items, 5.0, seed=7)
        env = {"MMVERIFY_REFERENCES": f"esc50={esc50_references(root / 'ESC-50', per_class=12)}", "MMVERIFY_NO_OUTPUT_CACHE": "1"}
        items = [
            {"task": "a_sound_cot", "instance": {"target": CLASSES[i % len(CLASSES)]}, "parts": [{"type": "audio", "path": str(p)}]}
            for i, p in enumerate(clips)
        ]

        def reward(in_flight: int, batch_size: int, decode_processes: int = 0) -> Reward:
            models = f"audio_text=clap-hf@{clap}?batch_size={batch_size}&rows=packed"
            built = Reward(
                models=models, device=args.device, env=env, in_flight=in_flight, cache_dir=root / "cache", decode_processes=decode_processes
            )
            built.rows(items[:2])  # loads the model and indexes the references outside the timing
            built.rows(items[: min(len(items), 4 * decode_processes)])  # and starts the decoding processes
            return built

        print_backend_alone(clap, clips, args)
        print(f"{args.items} items of 5 s, {'full-size' if args.full else 'tiny'} CLAP on {args.device}, {os.cpu_count()} CPUs, "
              f"switch interval {sys.getswitchinterval() * 1000:g} ms", flush=True)  # fmt: skip
        together = reward(args.in_flight, args.batch_size)
        probe.trial(f"{args.in_flight} in flight", together, items)
        if args.first_only:
            return
        probe.trial("switch interval 0.5 ms", together, items, switch=0.0005)
        probe.trial("switch interval 50 ms", together, items, switch=0.05)
        for limit in (int(text) for text in args.prep_limits.split(",") if text):
            probe.trial(f"{limit} preparing at once", together, items, limit=limit)
        counts = [int(text) for text in args.decode_processes.split(",") if text]
        for processes in counts:
            decoding = reward(args.in_flight, args.batch_size, processes)
            probe.trial(f"{processes} decoding processes", decoding, items)
            decoding.close()
        probe.trial(f"{2 * args.in_flight} in flight", reward(2 * args.in_flight, args.batch_size), items)
        if args.cuda_graphs:
            graph_trials(probe, reward, items, clap, clips, args, max(counts, default=0))


def graph_trials(probe: Probe, reward: Any, items: list[dict], clap: Path, clips: list[Path], args: argparse.Namespace, processes: int) -> None:
    """The backend alone and ``processes`` decoding processes, with the model replayed from CUDA graphs."""
    if not args.device.startswith("cuda"):
        print("CUDA graph: needs a CUDA device", flush=True)
        return
    try:
        with graphed_clap():
            print_backend_alone(clap, clips, args, "backend alone, CUDA graph")
            graphed = reward(args.in_flight, args.batch_size, processes)
            try:
                probe.trial(f"CUDA graph, {processes} decoding", graphed, items)
            finally:
                graphed.close()
    except (Exception, SystemExit) as exc:  # noqa: BLE001  (a failed capture, or error rows, is the experiment's answer)
        print(f"CUDA graph: failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})", flush=True)


def print_backend_alone(clap: Path, clips: list[Path], args: argparse.Namespace, label: str = "backend alone") -> None:
    from mmverify.models.clap_hf import HFClap

    backend = HFClap(source=str(clap), device=args.device, batch_size=args.batch_size, rows="packed")
    rate = rate_of(backend, lambda model, audio: model.embed_audio(audio), clips, repeats=1)
    print(f"{label}: {rate:.1f} clips/s, {1000 * args.batch_size / rate:.1f} ms a batch of {args.batch_size}", flush=True)


if __name__ == "__main__":
    main()
