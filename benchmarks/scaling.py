"""Local executors vs Ray on a large synthetic program-task manifest.

Generates N generations (small PNGs for i_format_border / i_format_background, text+image orders
for i_structure), scores them with ``--workers 1``, ``--workers W`` (processes) and
``--executor ray --workers W``, checks the three results files are byte-identical, and prints
items/s and peak memory of each run.

    .venv/bin/python benchmarks/scaling.py [--items 20000] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image


def write_manifest(folder: Path, items: int) -> Path:
    rng = np.random.default_rng(0)
    images = []
    for i in range(64):  # a pool of distinct images reused across lines (lines differ by instance)
        image = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
        if i % 2 == 0:
            image[:10], image[-10:], image[:, :10], image[:, -10:] = (0, 128, 0), (0, 128, 0), (0, 128, 0), (0, 128, 0)
        else:
            image[:, :48] = (0, 0, 255)
        path = folder / f"img_{i}.png"
        Image.fromarray(image).save(path)
        images.append(path.name)
    lines = []
    for n in range(items):
        image = {"type": "image", "path": images[n % 64]}
        kind = n % 3
        if kind == 0:
            line = {"task": "i_format_border", "instance_id": f"b/{n}", "instance": {"color": "green"}, "parts": [image]}
        elif kind == 1:
            line = {"task": "i_format_background", "instance_id": f"g/{n}", "instance": {"region": "left half", "color": "blue"}, "parts": [image]}
        else:
            line = {"task": "i_structure", "instance_id": f"s/{n}", "instance": {"order": ["it"]}, "parts": [image, {"type": "text", "text": "caption"}]}
        lines.append(json.dumps(line))
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def run(manifest: Path, out: Path, *extra: str) -> tuple[float, float]:
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out), "-q", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, check=True)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        manifest = write_manifest(folder, args.items)
        runs = {
            "local, 1 worker (in-process)": ("--workers", "1"),
            f"local, {args.workers} worker processes": ("--workers", str(args.workers)),
            f"ray, {args.workers} actors (local instance)": ("--workers", str(args.workers), "--executor", "ray"),
        }
        outputs, rows = {}, []
        for label, extra in runs.items():
            out = folder / f"out{len(outputs)}"
            elapsed, peak_mib = run(manifest, out, *extra)
            outputs[label] = (out / "results.jsonl").read_bytes()
            rows.append((label, args.items / elapsed, elapsed, peak_mib))
        identical = len(set(outputs.values())) == 1
    print(f"{args.items} items (i_format_border / i_format_background / i_structure on 96x96 PNGs)")
    print(f"{'executor':<36}{'items/s':>10}{'seconds':>10}{'peak RSS MiB*':>15}")
    for label, rate, elapsed, peak in rows:
        print(f"{label:<36}{rate:>10.0f}{elapsed:>10.1f}{peak:>15.0f}")
    print(f"results byte-identical across executors: {identical}")
    print("* largest resident set of any child process so far (the scorer process, not Ray's workers)")


if __name__ == "__main__":
    main()
