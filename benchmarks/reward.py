"""Reward server latency under a fixed request rate, and in-process adapter overhead.

Starts ``mmverify serve`` as its own process on a loopback port, then sends an open-loop load:
request i is due at ``start + i / rate`` whether or not earlier ones have returned, and its latency
is measured from that due time (so a stall shows up as latency instead of silently lowering the
rate).  Each request scores one program-verified item -- solid background region, solid border, or
image/text order -- over small PNGs, half sent as paths under the server's data root and half
inline as base64.  Then times each adapter against the bare pipeline in this process.

    .venv/bin/python benchmarks/reward.py [--rate 100] [--duration 10] [--size 128]

Target (issue 7): p99 < 20 ms at 100 requests/s with zero errors.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mmverify.pipelines.adapters import FlowGRPOReward, TRLReward, compute_score  # noqa: E402
from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.verifiers.image.fill import NAMED_COLORS, region_boxes  # noqa: E402


def picture(size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([np.sin(x / 5.0 + seed), np.cos(y / 4.0), np.sin((x + y) / 6.0)], axis=-1)
    return np.clip((base + rng.normal(0, 0.3, base.shape) + 1.2) * 100, 0, 255).astype(np.uint8)


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def make_items(root: Path, size: int) -> list[tuple[str, dict[str, Any]]]:
    """Six request kinds: {fill, border, order} x {path, base64}."""
    border = picture(size, 1)
    band = round(0.1 * size)
    for sl in (np.s_[:band], np.s_[-band:], np.s_[:, :band], np.s_[:, -band:]):
        border[sl] = NAMED_COLORS["green"]
    fill = picture(size, 2)
    x0, y0, x1, y1 = region_boxes("left half", size, size)[0]
    fill[y0:y1, x0:x1] = NAMED_COLORS["blue"]
    order = picture(size, 3)
    items = []
    for name, array, task, instance, text in (
        ("fill", fill, "i_format_background", {"region": "left half", "color": "blue"}, None),
        ("border", border, "i_format_border", {"color": "green"}, None),
        ("order", order, "i_structure", {"order": ["it"]}, "A caption after the image."),
    ):
        (root / f"{name}.png").write_bytes(png(array))
        for how, part in (("path", {"type": "image", "path": f"{name}.png"}),
                          ("base64", {"type": "image", "data": base64.b64encode(png(array)).decode()})):  # fmt: skip
            parts = [part] + ([{"type": "text", "text": text}] if text else [])
            items.append((f"{name}/{how}", {"task": task, "instance": instance, "parts": parts}))
    return items


def start_server(root: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mmverify.cli", "serve", "--port", "0", "--data-root", str(root)],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("{") and json.loads(line).get("event") == "listening":
            port = json.loads(line)["port"]
            # keep draining the request log so the pipe never fills up
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore[union-attr]
            return process, port
    raise RuntimeError(f"the server exited with code {process.wait()}")


class Connection:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def post(self, body: bytes) -> tuple[int, bytes]:
        self.conn.request("POST", "/score", body=body, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        return response.status, response.read()


def run_load(port: int, bodies: list[tuple[str, bytes]], rate: float, duration: float, connections: int) -> dict[str, Any]:
    total = int(rate * duration)
    due: "queue.Queue[tuple[int, float] | None]" = queue.Queue()
    latencies = np.full(total, np.nan)
    kinds = [bodies[i % len(bodies)][0] for i in range(total)]
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        conn = Connection(port)
        while (job := due.get()) is not None:
            index, when = job
            delay = when - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            try:
                status, data = conn.post(bodies[index % len(bodies)][1])
                failed = status != 200 or any(r["status"] != "scored" for r in json.loads(data)["results"])
            except (OSError, http.client.HTTPException, ValueError) as exc:
                status, failed, conn = -1, True, Connection(port)
                data = str(exc).encode()
            latencies[index] = time.perf_counter() - when
            if failed:
                with lock:
                    errors.append(f"{kinds[index]}: HTTP {status}: {data[:200]!r}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    start = time.perf_counter() + 0.05
    for i in range(total):
        due.put((i, start + i / rate))
    for _ in threads:
        due.put(None)
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    ms = latencies * 1000
    by_kind = {
        kind: round(float(np.percentile(ms[[k == kind for k in kinds]], 99)), 2) for kind in sorted(set(kinds))
    }
    return {
        "requests": total,
        "offered_rps": rate,
        "throughput_rps": round(total / elapsed, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(np.max(ms)), 2),
        "p99_ms_by_kind": by_kind,
        "errors": len(errors),
        "error_examples": errors[:3],
    }


def time_call(fn: Any, repeat: int) -> float:
    """Median microseconds per call."""
    fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return float(np.median(samples) * 1e6)


def adapter_overhead(size: int, repeat: int) -> dict[str, Any]:
    """Per-call cost of each adapter vs the bare pipeline on the same item (one item per call)."""
    border = picture(size, 1)
    band = round(0.1 * size)
    for sl in (np.s_[:band], np.s_[-band:], np.s_[:, :band], np.s_[:, -band:]):
        border[sl] = NAMED_COLORS["green"]
    inline = {"type": "image", "data": base64.b64encode(png(border)).decode()}
    reward = Reward()
    trl_text, trl_image = TRLReward("i_structure"), TRLReward("i_format_border")
    flow = FlowGRPOReward("i_format_border")
    structure_item = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "text"}]}
    border_item = {"task": "i_format_border", "instance": {"color": "green"}, "parts": [inline]}
    batch = np.stack([border])
    results = {
        "i_structure (text)": {
            "pipeline": time_call(lambda: reward.rows([structure_item]), repeat),
            "Reward()": time_call(lambda: reward([({"order": ["t"]}, ["text"])], tasks=["i_structure"]), repeat),
            "TRL": time_call(lambda: trl_text(prompts=["p"], completions=["text"], instance=['{"order": ["t"]}']), repeat),
            "verl": time_call(lambda: compute_score("i_structure", "text", '{"order": ["t"]}', {}), repeat),
        },
        f"i_format_border ({size}x{size} image)": {
            "pipeline": time_call(lambda: reward.rows([border_item]), repeat),
            "Reward()": time_call(lambda: reward([({"color": "green"}, [border])], tasks=["i_format_border"]), repeat),
            "TRL": time_call(lambda: trl_image(prompts=["p"], completions=[[{"type": "image", "image": border}]], instance=['{"color": "green"}']), repeat),
            "Flow-GRPO": time_call(lambda: flow(batch, ["p"], [{"color": "green"}]), repeat),
        },
    }
    return {task: {name: round(us, 1) for name, us in calls.items()} for task, calls in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load")
    parser.add_argument("--size", type=int, default=128, help="image side in pixels")
    parser.add_argument("--connections", type=int, default=16, help="client keep-alive connections")
    parser.add_argument("--repeat", type=int, default=300, help="calls per adapter timing")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        items = make_items(root, args.size)
        bodies = [(kind, json.dumps({"items": [item]}).encode()) for kind, item in items]
        process, port = start_server(root)
        try:
            warm = Connection(port)
            for _ in range(3):  # first calls load the compiled kernels
                for kind, body in bodies:
                    status, data = warm.post(body)
                    assert status == 200 and all(r["status"] == "scored" for r in json.loads(data)["results"]), (kind, data[:300])
            load = run_load(port, bodies, args.rate, args.duration, args.connections)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)
    overhead = adapter_overhead(args.size, args.repeat)

    print(f"server: {load['requests']} requests at {load['offered_rps']:g}/s offered, "
          f"{load['throughput_rps']:g}/s done; latency p50 {load['p50_ms']} ms, p95 {load['p95_ms']} ms, "
          f"p99 {load['p99_ms']} ms, max {load['max_ms']} ms; errors {load['errors']}")  # fmt: skip
    print("p99 by request kind (ms):", json.dumps(load["p99_ms_by_kind"]))
    for example in load["error_examples"]:
        print("  error:", example)
    target = load["p99_ms"] < 20 and load["errors"] == 0
    print(f"target p99 < 20 ms with zero errors at {load['offered_rps']:g}/s: {'met' if target else 'NOT met'}")
    print("in-process cost per call, median microseconds (one item per call):")
    for task, calls in overhead.items():
        base = calls["pipeline"]
        print(f"  {task}: " + ", ".join(f"{name} {us:.0f}" + ("" if name == "pipeline" else f" (+{us - base:.0f})") for name, us in calls.items()))
    print(json.dumps({"load": load, "adapters_us": overhead, "args": vars(args)}))


if __name__ == "__main__":
    main()
