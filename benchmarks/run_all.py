"""Run every benchmark with one command and print their figures plus a summary table.

Each benchmark compares mmverify with the baseline its issue names (skimage fill, reload-per-clip
CLAP, serial uncached judge, the local executor for Ray) and prints its own table; this runner adds
wall time and peak memory per benchmark.  ``--quick`` shrinks every workload for a smoke run.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only fill,vlm]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SUITE: dict[str, tuple[list[str], list[str]]] = {  # name: (full arguments, quick arguments)
    "fill": ([], ["--images", "6", "--repeat", "1"]),
    "clap_reference": ([], ["--clips", "3", "--refs", "10"]),
    "audio": ([], ["--clips", "3", "--published-clips", "1", "--refs", "10"]),
    "vlm": ([], ["--items", "64", "--concurrency", "1,8"]),
    "reward": ([], ["--duration", "3", "--repeat", "50"]),
    "scaling": ([], ["--items", "1500"]),
    "clap_frontend": ([], ["--clips", "8", "--repeats", "1", "--numpy-clips", "8"]),
    "whisper_frontend": ([], ["--clips", "8", "--repeats", "1"]),
    "server_limits": ([], ["--limit", "20"]),
    "batched_scoring": ([], ["--items", "16", "--in-flight", "8", "--batch-size", "8", "--repeats", "1", "--check", "4"]),
    "clip_models": ([], ["--clips", "8", "--batch-size", "4", "--repeats", "1", "--check", "4"]),
    "dreamsim_batching": ([], ["--pairs", "8", "--batch-size", "4", "--repeats", "1", "--check", "4"]),
    "row_fill": ([], ["--batches", "200"]),
    "three_way_fit": ([], ["--sizes", "250,1000", "--repeats", "1"]),
    "device_contention": ([], ["--items", "16", "--in-flight", "8", "--batch-size", "8", "--prep-limits", "2", "--decode-processes", "1"]),
    "decode_contention": ([], ["--threads", "4", "--batches", "5"]),
    "adversarial_text": ([], ["--sizes", "2000,8000", "--largest", "32000"]),
    "wire_contention": ([], ["--clips", "16", "--batches", "3"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads (minutes, not tens of minutes)")
    parser.add_argument("--only", default="", help="comma-separated subset of: " + ", ".join(SUITE))
    args = parser.parse_args()
    chosen = [name for name in SUITE if not args.only or name in args.only.split(",")]
    summary = []
    for name in chosen:
        full, quick = SUITE[name]
        command = [sys.executable, str(HERE / f"{name}.py"), *(quick if args.quick else full)]
        print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
        start = time.perf_counter()
        process = subprocess.Popen(command)
        _pid, status, usage = os.wait4(process.pid, 0)  # this benchmark's own peak, not a running maximum
        process.returncode = os.waitstatus_to_exitcode(status)
        summary.append((name, process.returncode, time.perf_counter() - start, usage.ru_maxrss / 1024))
    print(f"\n{'benchmark':<18}{'status':>8}{'wall s':>10}{'peak RSS MiB*':>16}")
    for name, code, elapsed, peak in summary:
        print(f"{name:<18}{'ok' if code == 0 else f'rc {code}':>8}{elapsed:>10.1f}{peak:>16.0f}")
    print("* peak resident set of the benchmark process (and the children it waited for)")
    sys.exit(max((code for _, code, _, _ in summary), default=0))


if __name__ == "__main__":
    main()
