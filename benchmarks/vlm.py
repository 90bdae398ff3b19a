"""VLM judge throughput against a local chat-completions server that answers after a fixed delay.

The server (tests/vlm_server.py) runs in its own process so that it does not share the client's
interpreter lock; every question carries one image, encoded to PNG per request as in scoring.
For each concurrency the batch (a different image per question) goes through ``ask_many`` with a
cold cache; then four questions per image at the highest concurrency (each image is encoded once);
the last row reruns the largest batch against the now-warm cache, which must make no request at all.

    .venv/bin/python benchmarks/vlm.py [--items 256] [--delay 0.05] [--image-size 256]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from mmverify.models.judge import JudgeCache, JudgeRequest, OpenAICompatibleJudge  # noqa: E402
from tests.conftest import scene  # noqa: E402


def serve(delay: float, ready: "multiprocessing.Queue[str]", stop: "multiprocessing.Event") -> None:  # type: ignore[type-arg]
    from tests.vlm_server import VLMServer

    server = VLMServer().script(lambda request: f"Reasoning about the picture. Answer: {len(request.prompt) % 6}")
    server.delay = delay
    ready.put(server.url)
    stop.wait()
    server.close()


def stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/_stats") as response:
        return json.load(response)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=256, help="questions per concurrency level (a quarter at concurrency 1)")
    parser.add_argument("--delay", type=float, default=0.05, help="server reply delay in seconds")
    parser.add_argument("--image-size", type=int, default=256)
    parser.add_argument("--concurrency", default="1,8,32")
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    ready, stop = context.Queue(), context.Event()
    process = context.Process(target=serve, args=(args.delay, ready, stop), daemon=True)
    process.start()
    url = ready.get(timeout=60)
    base = scene(args.image_size, args.image_size, seed=0)

    def images(i: int) -> np.ndarray:  # a different picture per question, equally costly to encode
        return np.roll(base, i, axis=1)

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        last = None
        for level in (int(c) for c in args.concurrency.split(",")):
            n = max(8, args.items // 4) if level == 1 else args.items
            requests = [JudgeRequest(f"c{level} question {i}: how many objects?", [images(i)], max_tokens=64) for i in range(n)]
            judge = OpenAICompatibleJudge("bench-vlm", url, concurrency=level, cache=JudgeCache(Path(folder) / "judge.sqlite"))
            before = stats(url)["count"]
            start = time.perf_counter()
            replies = judge.ask_many(requests)
            elapsed = time.perf_counter() - start
            assert len(replies) == n and stats(url)["count"] - before == n
            ideal = level / args.delay
            rows.append((f"concurrency {level}", n, elapsed, n / elapsed, f"{100 * (n / elapsed) / ideal:.0f}% of {ideal:.0f}/s"))
            last = (judge, requests)
        # tasks ask several questions about one picture: each image is encoded once
        level, per_image = max(int(c) for c in args.concurrency.split(",")), 4
        requests = [JudgeRequest(f"shared {i}: is object {i % per_image} present?", [images(i // per_image)]) for i in range(args.items)]
        judge = OpenAICompatibleJudge("bench-vlm", url, concurrency=level)
        start = time.perf_counter()
        judge.ask_many(requests)
        elapsed = time.perf_counter() - start
        ideal = level / args.delay
        rows.append((f"c{level}, {per_image} q/image", args.items, elapsed, args.items / elapsed, f"{100 * (args.items / elapsed) / ideal:.0f}% of {ideal:.0f}/s"))
        assert last is not None
        judge, requests = last
        before = stats(url)["count"]
        start = time.perf_counter()
        judge.ask_many(requests)
        elapsed = time.perf_counter() - start
        assert stats(url)["count"] == before, "a warm cache must not call the server"
        rows.append(("cache-warm rerun", len(requests), elapsed, len(requests) / elapsed, "0 requests"))
    stop.set()
    process.join(timeout=10)

    print(f"server delay {args.delay * 1000:.0f} ms, one {args.image_size}x{args.image_size} PNG per question")
    print(f"{'run':<18} {'items':>6} {'seconds':>9} {'items/s':>10}  note")
    for name, n, seconds, rate, note in rows:
        print(f"{name:<18} {n:>6} {seconds:>9.3f} {rate:>10.1f}  {note}")


if __name__ == "__main__":
    main()
