"""How long a batch of clips takes to cross the model process's socket while other threads run Python.

Runs with any Python that has numpy (mmverify is imported from ./src).  One thread sends
``--batches`` batches of ``--clips`` float32 clips of ``--seconds`` s at 48 kHz (CLAP's input: a
batch of 128 five-second clips is 123 MB) over a socket pair, and the main thread reads each one
while ``--spinners`` threads run pure Python, as the item threads of a worker and the launching
threads of the model process do.  It compares:

- ``socket streams``: the socket's plain file streams (``socket.makefile``), one write per part
  and one read per socket buffer, each of which gives the interpreter lock back and must win it
  again -- while a thread runs Python, winning it waits up to a switch interval (5 ms);
- ``SocketStream``: the wire of the model process, one gathered send per message and one read
  that waits for the whole payload (``MSG_WAITALL``).

For each it prints the median milliseconds per batch and the MB/s through the socket.

    python3 benchmarks/wire_contention.py
    python3 benchmarks/wire_contention.py --clips 128 --seconds 5 --spinners 0,1,3
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mmverify.core.decode_worker import SocketStream, arrays_in, description, payload_bytes, read_message, write_message  # noqa: E402

RATE = 48_000

Streams = Callable[[socket.socket, socket.socket], tuple[Any, Any]]
WIRES: dict[str, Streams] = {
    "socket streams": lambda left, right: (left.makefile("wb", buffering=0), right.makefile("rb", buffering=0)),
    "SocketStream": lambda left, right: (SocketStream(left), SocketStream(right)),
}


def spin(stop: threading.Event) -> None:
    total = 0
    while not stop.is_set():
        for i in range(1000):
            total += i


def batch_times(streams: Streams, clips: list[np.ndarray], batches: int, spinners: int) -> list[float]:
    """Seconds to read each batch (its header included) while ``spinners`` threads run Python."""
    left, right = socket.socketpair()
    sending, receiving = streams(left, right)
    header = {"arrays": [description(clip) for clip in clips]}

    def send() -> None:
        try:
            for _ in range(batches):
                write_message(sending, header, *(payload_bytes(clip) for clip in clips))
        finally:
            left.shutdown(socket.SHUT_WR)

    stop = threading.Event()
    busy = [threading.Thread(target=spin, args=(stop,), daemon=True) for _ in range(spinners)]
    for thread in busy:
        thread.start()
    writer = threading.Thread(target=send, daemon=True)
    times = []
    try:
        writer.start()
        for _ in range(batches):
            start = time.perf_counter()
            received, payload = read_message(receiving)
            arrays_in(received["arrays"], payload)
            times.append(time.perf_counter() - start)
    finally:
        stop.set()
        writer.join()
        left.close()
        right.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=128, help="clips a batch")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds a clip, at 48 kHz")
    parser.add_argument("--batches", type=int, default=6, help="batches sent (the first is left out: it pays for fresh memory)")
    parser.add_argument("--spinners", default="0,1", help="comma-separated numbers of threads running Python meanwhile")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    clips = [rng.standard_normal(int(args.seconds * RATE)).astype(np.float32) for _ in range(args.clips)]
    megabytes = sum(clip.nbytes for clip in clips) / 1e6
    print(f"{args.clips} clips of {args.seconds:g} s at 48 kHz a batch ({megabytes:.0f} MB), median of "
          f"{args.batches - 1} batches", flush=True)  # fmt: skip
    print(f"{'wire':16} {'threads running Python':>22} {'ms a batch':>11} {'MB/s':>8}", flush=True)
    for spinners in (int(n) for n in args.spinners.split(",")):
        for name, streams in WIRES.items():
            seconds = statistics.median(batch_times(streams, clips, args.batches, spinners)[1:])
            print(f"{name:16} {spinners:22d} {seconds * 1000:11.1f} {megabytes / seconds:8.0f}", flush=True)


if __name__ == "__main__":
    main()
