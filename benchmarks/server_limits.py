"""Reward server robustness figures: poisoned neighbours, parse memory, slow clients, shutdown, huge media.

Starts the reward server as its own process on a loopback port (so its resident set is measured
alone) and prints one figure per scenario:

* ``poison``   -- good requests sent concurrently with requests holding lone surrogates, NaN,
  1e999, 5000-digit integers, deep nesting and wrongly typed fields: how many good requests did
  not come back as 200 with a scored row (the micro-batcher merges concurrent requests).
* ``memory``   -- the server's peak RSS growth for one, then three concurrent, 32 MB ``[[],[],...]``
  bodies, and the status each got.
* ``slow``     -- a body sent one byte every ``--drip`` seconds: the status the server answers with
  and how long it held the connection.
* ``shutdown`` -- SIGTERM while a client stalls mid-body: seconds until the process exits.
* ``hash``     -- an item naming an 8 GB sparse file under the data root: request latency.

    .venv/bin/python benchmarks/server_limits.py [--only poison,memory] [--src OTHER/src]

``--src`` runs the server from another source tree (e.g. an older checkout's ``src``) with this
interpreter, to print figures before and after a change.  Server options given with ``--config``
(JSON) are passed to ``ServerConfig``.
"""

from __future__ import annotations

import argparse
import http.client
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

REPO = Path(__file__).resolve().parents[1]
SERVER_CODE = """
import json, sys
from pathlib import Path
from mmverify.pipelines.server import ServerConfig, run
options = json.loads(sys.argv[1])
if options.get("data_root"):
    options["data_root"] = Path(options["data_root"])
run(ServerConfig(**options))
"""
GOOD_ITEM = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "fine"}]}


class ServerProcess:
    """``mmverify.pipelines.server.run`` in a child process; the port comes from its listening line."""

    def __init__(self, src: Path, options: dict[str, Any]) -> None:
        env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER_CODE, json.dumps(options)],
            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.port = self._wait_for_port()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise RuntimeError("the server exited before listening")
                continue
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                return int(json.loads(line)["port"])
        self.process.kill()
        raise RuntimeError("the server did not start")

    def rss_mib(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def post(port: int, path: str, body: bytes, timeout: float = 120) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("content-type") or ""
    except (OSError, http.client.HTTPException) as exc:
        return -1, repr(exc).encode(), ""
    finally:
        conn.close()


def poison_bodies() -> list[bytes]:
    """Request bodies whose items each break in a different way (raw JSON text, as a client sends it)."""
    base = '{"task": "i_structure", "instance": {"order": ["t"]%s}, "parts": [{"type": "text", "text": %s}]}'
    surrogate = '"\\udcff"'
    items = [
        base % ("", surrogate),
        '{"task": "i_structure", "instance_id": "\\udcff", "instance": {"order": ["t"]}, "parts": []}',
        '{"task": "i_structure", "model": "\\ud800", "instance": {"order": ["t"], "k\\udfff": 1}, "parts": []}',
        base % (', "x": NaN', '"t"'),
        base % (', "x": 1e999', '"t"'),
        base % (', "x": -Infinity', '"t"'),
        base % (', "x": ' + "7" * 5000, '"t"'),
        base % (', "x": ' + "[" * 200 + "]" * 200, '"t"'),
        '{"task": 5, "instance": [], "parts": {"a": 1}}',
        '{"task": "i_structure", "sample": "x", "instance": {"order": 5}, "parts": [{"type": ["text"]}]}',
    ]
    return [('{"items": [' + item + "]}").encode() for item in items]


def scenario_poison(src: Path, config: dict[str, Any], good: int = 100) -> None:
    server = ServerProcess(src, {"port": 0, "batch_wait_ms": 20.0, **config})
    try:
        bad = poison_bodies()
        good_body = json.dumps({"items": [GOOD_ITEM]}).encode()
        jobs: "queue.Queue[tuple[str, bytes]]" = queue.Queue()
        for i in range(good):
            jobs.put(("good", good_body))
            if i % 2 == 0:
                jobs.put(("bad", bad[(i // 2) % len(bad)]))
        outcomes: list[tuple[str, int, bytes, str]] = []
        lock = threading.Lock()

        def worker() -> None:
            while True:
                try:
                    kind, body = jobs.get_nowait()
                except queue.Empty:
                    return
                status, data, ctype = post(server.port, "/score", body)
                with lock:
                    outcomes.append((kind, status, data, ctype))

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = 0
        for kind, status, data, _ in outcomes:
            if kind == "good":
                ok = status == 200 and json.loads(data)["results"][0]["status"] == "scored"
                failed += not ok
        bad_statuses: dict[str, int] = {}
        for kind, status, _, ctype in outcomes:
            if kind == "bad":
                label = f"{status} {ctype.split(';')[0] or '-'}"
                bad_statuses[label] = bad_statuses.get(label, 0) + 1
        print(f"poison: {failed} of {good} good requests failed; poisoned requests answered: {bad_statuses}")
    finally:
        server.stop()


def list_body(size: int) -> bytes:
    count = (size - 2) // 3
    return b"[" + b"[]," * (count - 1) + b"[]]"


def scenario_memory(src: Path, config: dict[str, Any]) -> None:
    body = list_body(32 * 1024 * 1024 - 16)
    for parallel in (1, 3):
        server = ServerProcess(src, {"port": 0, **config})
        try:
            post(server.port, "/score", json.dumps({"items": [GOOD_ITEM]}).encode())  # warm: imports done
            before = server.rss_mib("VmHWM")
            results: list[int] = []
            threads = [threading.Thread(target=lambda: results.append(post(server.port, "/score", body)[0])) for _ in range(parallel)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            peak = server.rss_mib("VmHWM")
            print(f"memory: {parallel} x {len(body) / 2**20:.0f} MB '[]' body: peak RSS {before:.0f} -> {peak:.0f} MiB "
                  f"(+{peak - before:.0f} MiB), statuses {sorted(results)}")  # fmt: skip
        finally:
            server.stop()


def drip(port: int, drip_s: float, limit_s: float) -> tuple[str, float]:
    """Send a body one byte per ``drip_s`` seconds; returns what the server did and when."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(drip_s)
    head = b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    started = time.monotonic()
    sock.sendall(head)
    try:
        while time.monotonic() - started < limit_s:
            try:
                data = sock.recv(65536)
                status = data.split(b"\r\n", 1)[0].decode(errors="replace") if data else "closed"
                return status, time.monotonic() - started
            except socket.timeout:
                pass
            try:
                sock.sendall(b" ")
            except OSError:
                return "closed", time.monotonic() - started
        return "still open", time.monotonic() - started
    finally:
        sock.close()


def scenario_slow(src: Path, config: dict[str, Any], drip_s: float, limit_s: float) -> None:
    server = ServerProcess(src, {"port": 0, **config})
    try:
        status, held = drip(server.port, drip_s, limit_s)
        print(f"slow: a body sent one byte every {drip_s:g} s: {status!r} after {held:.1f} s")
    finally:
        server.stop()


def scenario_shutdown(src: Path, config: dict[str, Any], limit_s: float) -> None:
    server = ServerProcess(src, {"port": 0, **config})
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    time.sleep(0.5)  # the request is inside the application, waiting for its body
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=limit_s)
        print(f"shutdown: SIGTERM with a stalled client: exited after {time.monotonic() - started:.1f} s")
    except subprocess.TimeoutExpired:
        print(f"shutdown: SIGTERM with a stalled client: still running after {limit_s:g} s (killed)")
        server.process.kill()
        server.process.wait()
    finally:
        sock.close()


def scenario_hash(src: Path, config: dict[str, Any], size_gb: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with open(root / "huge.png", "wb") as handle:
            handle.truncate(int(size_gb * 2**30))  # sparse: no disk space used
        server = ServerProcess(src, {"port": 0, "data_root": str(root), **config})
        try:
            item = {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "huge.png"}]}
            started = time.monotonic()
            status, data, _ = post(server.port, "/score", json.dumps({"items": [item]}).encode(), timeout=600)
            elapsed = time.monotonic() - started
            row = json.loads(data)["results"][0] if status == 200 else {}
            outcome = row.get("reason") or (row.get("error") or {}).get("code")
            message = json.dumps(row.get("error") or row.get("evidence"))
            print(f"hash: an item naming a {size_gb:g} GB sparse file: {status} {outcome} in {elapsed:.2f} s; "
                  f"data root in the reply: {str(root) in message}")  # fmt: skip
        finally:
            server.stop()


SCENARIOS = ("poison", "memory", "slow", "shutdown", "hash")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated subset of: " + ", ".join(SCENARIOS))
    parser.add_argument("--src", type=Path, default=REPO / "src", help="source tree the server runs from")
    parser.add_argument("--config", default="{}", help="extra ServerConfig options as JSON")
    parser.add_argument("--drip", type=float, default=2.0, help="seconds between body bytes (slow)")
    parser.add_argument("--limit", type=float, default=60.0, help="give up waiting after this many seconds")
    parser.add_argument("--size-gb", type=float, default=8.0, help="sparse media file size (hash)")
    args = parser.parse_args()
    config = json.loads(args.config)
    chosen = [name for name in SCENARIOS if not args.only or name in args.only.split(",")]
    src = args.src.resolve()
    print(f"server source: {src}")
    for name in chosen:
        if name == "poison":
            scenario_poison(src, config)
        elif name == "memory":
            scenario_memory(src, config)
        elif name == "slow":
            scenario_slow(src, config, args.drip, args.limit)
        elif name == "shutdown":
            scenario_shutdown(src, config, args.limit)
        elif name == "hash":
            scenario_hash(src, config, args.size_gb)


if __name__ == "__main__":
    main()
