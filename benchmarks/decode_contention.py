"""What decoding in item threads costs a device thread, and what decoding processes give back.

A stand-in for the device thread launches a "batch" of small torch operations: each gives the
interpreter lock up and must win it back, as a kernel launch does.  Beside it, item threads decode
5 s WAV clips (resampled to 48 kHz, as for CLAP) over and over, either in the threads themselves
or through a :class:`~mmverify.core.decoding.DecodePool`.  For each setting it prints the
milliseconds per batch (median and worst of ``--batches``) and the clips decoded per second.
Runs with any Python that has torch, numpy, scipy and soundfile (mmverify is imported from ./src).

    python3 benchmarks/decode_contention.py
    python3 benchmarks/decode_contention.py --threads 1,4,16 --processes 4 --launches 1000
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402

from mmverify.core.decoding import INLINE, DecodePool  # noqa: E402


def clip_bytes(seconds: float = 5.0, rate: int = 44_100) -> bytes:
    samples = (np.random.default_rng(0).standard_normal(int(seconds * rate)) * 0.1).astype(np.float32)
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def launches(count: int) -> Callable[[], float]:
    """A batch of ``count`` small torch operations on one thread; returns its milliseconds."""
    import torch

    torch.set_num_threads(1)
    value = torch.zeros(8)

    def batch() -> float:
        started, out = time.perf_counter(), value
        for _ in range(count):
            out = out + 1.0
        return 1000 * (time.perf_counter() - started)

    return batch


def measure(batch: Callable[[], float], batches: int, threads: int, decode: Callable[[], Any] | None) -> tuple[list[float], float]:
    """Batch milliseconds while ``threads`` threads run ``decode`` in a loop, and their clips/s."""
    stop, decoded, lock = threading.Event(), [0], threading.Lock()

    def loop() -> None:
        while not stop.is_set():
            decode()  # type: ignore[misc]
            with lock:
                decoded[0] += 1

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads if decode else 0)]
    for worker in workers:
        worker.start()
    while workers and not decoded[0]:  # every setting is timed with its decoders already running
        time.sleep(0.001)
    started, before = time.perf_counter(), decoded[0]
    times = [batch() for _ in range(batches)]
    rate = (decoded[0] - before) / (time.perf_counter() - started)
    stop.set()
    for worker in workers:
        worker.join()
    return times, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,4,16", help="comma-separated numbers of item threads")
    parser.add_argument("--processes", type=int, default=max(1, min(4, (os.cpu_count() or 2) - 1)), help="decoding processes")
    parser.add_argument("--launches", type=int, default=2000, help="torch operations per batch")
    parser.add_argument("--batches", type=int, default=15)
    args = parser.parse_args()
    data = clip_bytes()
    batch = launches(args.launches)
    print(f"{os.cpu_count()} CPUs; a batch is {args.launches} small torch operations; items decode a 5 s 44.1 kHz WAV to 48 kHz")
    alone, _ = measure(batch, args.batches, 0, None)
    print(f"{'device thread alone':44} {statistics.median(alone):8.1f} ms a batch (worst {max(alone):7.1f})", flush=True)
    with DecodePool(args.processes) as pool:
        starting = [threading.Thread(target=pool.audio, args=(data, 48_000)) for _ in range(args.processes)]
        for thread in starting:  # the workers start outside the timing
            thread.start()
        for thread in starting:
            thread.join()
        for threads in (int(text) for text in args.threads.split(",") if text):
            for label, decoder in (("in their threads", INLINE), (f"in {args.processes} decoding processes", pool)):
                times, rate = measure(batch, args.batches, threads, lambda decoder=decoder: decoder.audio(data, 48_000))
                print(
                    f"{threads:3d} item threads decoding {label:24} {statistics.median(times):8.1f} ms a batch "
                    f"(worst {max(times):7.1f})  {rate:7.1f} clips/s", flush=True,
                )  # fmt: skip


if __name__ == "__main__":
    main()
