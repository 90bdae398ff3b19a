"""The reward server over real loopback HTTP: results, auth, limits, determinism, concurrency."""

from __future__ import annotations

import asyncio
import base64
import http.client
import io
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from mmverify.api import score_items  # noqa: E402
from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.pipelines.server import BackgroundServer  # noqa: E402
from mmverify.pipelines.server_batch import MicroBatcher  # noqa: E402
from mmverify.pipelines.server_gate import PathRedactor  # noqa: E402
from tests.conftest import save_png  # noqa: E402
from tests.pipelines.conftest import bordered  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

TOKEN = "test-token-7f3a"


class Client:
    """A keep-alive HTTP/1.1 client (TCP_NODELAY, as requests/urllib3 set it)."""

    def __init__(self, port: int, token: str | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.token = token

    def call(self, method: str, path: str, body: Any = None, *, raw: Any = None, headers: dict | None = None) -> tuple[int, bytes]:
        sent = {"Content-Type": "application/json", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        payload = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        self.conn.request(method, path, body=payload, headers=sent, encode_chunked=not isinstance(payload, (bytes, type(None))))
        response = self.conn.getresponse()
        return response.status, response.read()

    def json(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        status, data = self.call(method, path, body, **kwargs)
        return status, json.loads(data)

    def close(self) -> None:
        self.conn.close()


def b64png(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
def media(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    save_png(root / "green.png", bordered("green"))
    save_png(root / "red.png", bordered("red", seed=1))
    save_png(tmp_path / "outside.png", bordered("green"))
    return root


def border_item(path_or_data: str, color: str = "green", inline: bool = False) -> dict:
    part = {"type": "image", "data": path_or_data} if inline else {"type": "image", "path": path_or_data}
    return {"task": "i_format_border", "instance": {"color": color}, "parts": [part]}


def test_score_rows_equal_in_process_scoring(media: Path, serve):
    items = [
        border_item("green.png"),
        border_item("red.png", "red"),
        border_item(b64png(bordered("green", seed=2)), inline=True),
        border_item("../outside.png"),
        border_item(str(media.parent / "outside.png")),
        border_item("absent.png"),
        {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "path": "green.png"}, {"type": "text", "text": "A border."}]},
        {"task": "a_structure", "instance_id": "a_structure/0", "parts": []},  # no instruction set: unknown_instance
        {"task": "i_format_bordr", "instance": {}, "parts": []},
        "not an object",
    ]
    server = serve(data_root=media)
    status, body = Client(server.port).json("POST", "/score", {"items": items})
    assert status == 200
    # the same rows as in-process scoring, except that client-visible messages never show the data root
    expected = PathRedactor({"<data root>": media})(score_items(items, base_dir=media, data_root=media))
    assert body["results"] == expected
    codes = [r["error"]["code"] if r["error"] else r["status"] for r in body["results"]]
    assert codes == ["scored", "scored", "scored", "path_outside_root", "path_outside_root", "missing_media",
                     "scored", "unknown_instance", "unknown_task", "malformed_line"]  # fmt: skip


@pytest.mark.slow
def test_a_server_with_worker_processes_gives_the_rows_of_one_process_and_ends_them_at_shutdown(media: Path, serve):
    import multiprocessing

    items = [
        border_item("green.png"), border_item("red.png", "red"), border_item(b64png(bordered("green", seed=2)), inline=True),
        border_item("../outside.png"), border_item("absent.png"), {"task": "i_format_bordr", "instance": {}, "parts": []},
    ]  # fmt: skip
    before = set(multiprocessing.active_children())
    server = serve(data_root=media, reward_options={"workers": 2})
    client = Client(server.port)
    expected = PathRedactor({"<data root>": media})(score_items(items, base_dir=media, data_root=media))
    for _ in range(2):  # the second request finds the same workers
        status, body = client.json("POST", "/score", {"items": items})
        assert status == 200 and body["results"] == expected
    workers = set(multiprocessing.active_children()) - before
    assert len(workers) == 2
    client.close()
    server.stop()
    assert wait_until(lambda: not any(worker.is_alive() for worker in workers))


def test_without_a_data_root_paths_are_refused(media: Path, serve):
    server = serve()
    status, body = Client(server.port).json("POST", "/score", {"items": [border_item(str(media / "green.png"))]})
    assert status == 200 and body["results"][0]["error"]["code"] == "path_outside_root"


def test_auth(media: Path, serve, caplog):
    caplog.set_level(logging.INFO, logger="mmverify.server")
    server = serve(token=TOKEN, data_root=media)
    request = {"items": [border_item("green.png")]}
    assert Client(server.port).call("POST", "/score", request)[0] == 401
    assert Client(server.port, token="wrong").call("POST", "/score", request)[0] == 401
    assert Client(server.port).call("POST", "/score", request, headers={"Authorization": f"Basic {TOKEN}"})[0] == 401
    assert Client(server.port).call("GET", "/tasks")[0] == 401
    assert Client(server.port).call("GET", "/healthz")[0] == 200  # liveness probes carry no token
    status, body = Client(server.port, TOKEN).json("POST", "/score", request)
    assert status == 200 and body["results"][0]["status"] == "scored"
    # the line is written after the response has gone out
    wait_until(lambda: len([r for r in caplog.records if r.name == "mmverify.server"]) >= 6, message="six access-log lines")
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mmverify.server"]
    assert [line["status"] for line in lines] == [401, 401, 401, 401, 200, 200]
    assert {"id", "method", "path", "status", "items", "errors", "latency_ms"} <= set(lines[-1])
    assert lines[-1]["items"] == 1 and lines[-1]["errors"] == 0
    assert all(TOKEN not in r.getMessage() for r in caplog.records)

    open_server = serve(data_root=media)
    assert Client(open_server.port).call("POST", "/score", request)[0] == 200


def test_limits(media: Path, serve):
    server = serve(data_root=media, max_body_bytes=4096, max_items=3)
    client = Client(server.port)
    big = {"items": [border_item(b64png(bordered("green")), inline=True)]}
    status, body = client.json("POST", "/score", big)
    assert status == 413 and body["error"]["code"] == "body_too_large"
    chunks = iter([b'{"items": [', b" " * 5000, b"]}"])  # no Content-Length: counted while streaming
    status, body = Client(server.port).json("POST", "/score", raw=chunks)
    assert status == 413 and body["error"]["code"] == "body_too_large"
    status, body = Client(server.port).json("POST", "/score", {"items": [border_item("green.png")] * 4})
    assert status == 413 and body["error"]["code"] == "too_many_items"
    status, body = Client(server.port).json("POST", "/score", raw=b"{not json")
    assert status == 400 and body["error"]["code"] == "invalid_json"
    status, body = Client(server.port).json("POST", "/score", {"items": 3})
    assert status == 422 and body["error"]["code"] == "invalid_body"
    status, body = Client(server.port).json("POST", "/score", {"items": []})
    assert status == 200 and body == {"results": []}
    assert Client(server.port).call("GET", "/score")[0] == 405


def test_the_same_request_100_times_is_bit_identical(media: Path, serve):
    server = serve(data_root=media)
    client = Client(server.port)
    request = {"items": [border_item("green.png"), border_item("red.png", "red"),
                         border_item(b64png(bordered("green", seed=5)), inline=True)]}  # fmt: skip
    first = client.call("POST", "/score", request)
    assert first[0] == 200
    for _ in range(99):
        assert client.call("POST", "/score", request) == first
    rewards = [r["score"] for r in json.loads(first[1])["results"]]
    assert rewards[0] > 0.9 and rewards[1] > 0.9 and rewards[2] > 0.9


def test_concurrent_requests_get_the_results_of_sequential_ones(media: Path, serve):
    server = serve(data_root=media, batch_wait_ms=5)
    requests = []
    for i in range(24):
        colour = ("green", "red", "blue")[i % 3]
        items = [border_item("green.png", colour), border_item(b64png(bordered("red", seed=i)), "red", inline=True)][: 1 + i % 2]
        if i % 4 == 0:
            items.append({"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": str(i)}]})
        requests.append({"items": items})
    sequential = [Client(server.port).call("POST", "/score", r) for r in requests]
    batches_before = server_batches(server)
    results: dict[int, tuple[int, bytes]] = {}

    def worker(indices: list[int]) -> None:
        client = Client(server.port)
        for index in indices:
            results[index] = client.call("POST", "/score", requests[index])

    threads = [threading.Thread(target=worker, args=(list(range(k, 24, 8)),)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [results[i] for i in range(24)] == sequential
    assert server_batches(server) - batches_before <= 24


def server_batches(server: BackgroundServer) -> int:
    return json.loads(Client(server.port).call("GET", "/healthz")[1])["batches"]


def test_micro_batcher_merges_requests_and_keeps_their_line_numbers():
    calls: list[tuple[list, list]] = []

    def score(items: list, lines: list) -> list:
        calls.append((list(items), list(lines)))
        return [{"item": item, "line": line} for item, line in zip(items, lines)]

    async def scenario() -> list:
        batcher = MicroBatcher(score, wait_s=0.01, max_items=5)
        batcher.start()
        futures = [batcher.submit(["a", "b"]), batcher.submit(["c"]), batcher.submit(["d", "e", "f"])]
        done = await asyncio.gather(*futures)
        await batcher.stop()
        return done

    done = asyncio.run(scenario())
    assert calls == [(["a", "b", "c"], [1, 2, 1]), (["d", "e", "f"], [1, 2, 3])]  # the third would pass max_items
    assert done[0] == [{"item": "a", "line": 1}, {"item": "b", "line": 2}] and done[1] == [{"item": "c", "line": 1}]


class _BlockedReward(Reward):
    """Scores only once the test sets ``released``: the request deadline always passes first."""

    released: threading.Event

    def rows(self, items, lines=None, *, convert=False):  # noqa: ANN001
        assert self.released.wait(120), "the test never released the reward"  # a hang guard
        return super().rows(items, lines, convert=convert)


def test_request_timeout_gives_504_and_the_server_goes_on(serve):
    reward = _BlockedReward("i_structure")
    reward.released = threading.Event()
    # the blocked request always outlives the limit; the one after the release must be scored within
    # it on however busy a machine: seconds, not a fraction of one
    server = serve(reward=reward, request_timeout=6.0)
    request = {"items": [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "x"}]}]}
    try:
        status, body = Client(server.port).json("POST", "/score", request)
    finally:
        reward.released.set()
    assert status == 504 and body["error"]["code"] == "request_timeout"
    assert Client(server.port).call("GET", "/healthz")[0] == 200
    status, body = Client(server.port).json("POST", "/score", request)  # the scoring thread is free again
    assert status == 200 and body["results"][0]["status"] == "scored"


def test_tasks_and_healthz(serve):
    server = serve(tasks=["i_structure", "i_format_border"])
    status, body = Client(server.port).json("GET", "/tasks")
    by_id = {t["id"]: t for t in body["tasks"]}
    assert status == 200 and by_id["i_structure"]["enabled"] and not by_id["a_structure"]["enabled"]
    assert by_id["i_structure"]["implemented"] and by_id["a_structure"]["implemented"]
    status, body = Client(server.port).json("GET", "/healthz")
    assert status == 200 and body["status"] == "ok"
    status, body = Client(server.port).json("POST", "/score", {"items": [{"task": "a_structure", "instance": {"order": ["t"]}, "parts": []}]})
    assert body["results"][0]["error"]["code"] == "unknown_task"


def test_openrlhf_endpoint(media: Path, serve):
    good = {
        "query": ["<s>prompt</s>The answer.", "<s>prompt</s>Image below."],
        "prompts": ["<s>prompt</s>", "<s>prompt</s>"],
        "labels": [json.dumps({"task": "i_structure", "instance": {"order": ["t"]}}),
                   json.dumps({"task": "i_structure", "instance": {"order": ["ti"]},
                               "parts": [{"type": "response"}, {"type": "image", "path": "green.png"}]})],
    }  # fmt: skip
    server = serve(data_root=media)
    status, body = Client(server.port).json("POST", "/get_reward", good)
    assert status == 200 and body["rewards"] == [1.0, 1.0] and body["scores"] == [1.0, 1.0]
    assert body["extra_logs"] == {"mmverify_valid": [1.0, 1.0]}
    bad = {"query": ["x"], "labels": [json.dumps({"task": "i_structure", "instance": {"wrong": 1}})]}
    status, body = Client(server.port).json("POST", "/get_reward", bad)
    assert status == 500 and body["error"]["code"] == "unscorable_items"
    assert body["error"]["message"].startswith("1 of 1 items") and body["errors"][0]["code"] == "invalid_instance"
    status, body = Client(server.port).json("POST", "/get_reward", {"query": ["x"]})
    assert status == 422
    lenient = serve(data_root=media, on_error="zero")
    status, body = Client(lenient.port).json("POST", "/get_reward", bad)
    assert status == 200 and body["rewards"] == [0.0] and body["extra_logs"]["mmverify_valid"] == [0.0]


# -- a real `mmverify serve` process -----------------------------------------------------------------


def start_cli_server(media: Path, cache: Path) -> tuple[subprocess.Popen, int, "queue.Queue[str | None]"]:
    env = {**os.environ, "MMVERIFY_CACHE_DIR": str(cache), "MMVERIFY_SERVER_TOKEN": TOKEN, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mmverify.cli", "serve", "--port", "0", "--data-root", str(media)],
        env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: "queue.Queue[str | None]" = queue.Queue()

    def read() -> None:
        for line in process.stderr:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)  # end of stderr: the process has closed it

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=120)  # a hang guard
        except queue.Empty:
            process.kill()
            raise AssertionError("the server did not start") from None
        assert line is not None, f"the server exited with {process.wait(timeout=30)}"
        if line.startswith("{") and json.loads(line).get("event") == "listening":
            return process, json.loads(line)["port"], lines


def stop_cli_server(process: subprocess.Popen, lines: "queue.Queue[str | None]") -> list[str]:
    """Stop the server; every stderr line it wrote, up to the end of its stderr."""
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    out = []
    while (line := lines.get(timeout=30)) is not None:  # a hang guard
        out.append(line)
    return out


def test_rewards_survive_a_server_restart_bit_for_bit(media: Path, tmp_path: Path, serve):
    request = {"items": [border_item("green.png"), border_item("red.png", "red"), border_item(b64png(bordered("blue")), "blue", inline=True),
                         {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "path": "green.png"}, {"type": "text", "text": "t"}]}]}  # fmt: skip
    bodies, logs = [], []
    for _ in range(2):
        process, port, lines = start_cli_server(media, tmp_path / "cache")
        try:
            assert Client(port).call("POST", "/score", request)[0] == 401
            status, body = Client(port, TOKEN).call("POST", "/score", request)
            assert status == 200
            bodies.append(body)
        finally:
            logs.append(stop_cli_server(process, lines))
        assert process.returncode in (0, 130, -signal.SIGINT)  # uvicorn re-raises the signal after a clean shutdown
    assert bodies[0] == bodies[1]
    in_thread = serve(data_root=media)
    assert Client(in_thread.port).call("POST", "/score", request)[1] == bodies[0]
    requests = [json.loads(line) for line in logs[0] if line.startswith("{") and '"request"' in line]
    assert [r["status"] for r in requests] == [401, 200] and requests[1]["items"] == 4
    assert not any(TOKEN in line for log in logs for line in log)


def test_a_reward_the_server_built_is_closed_at_shutdown_and_one_it_was_given_is_not(serve, monkeypatch):
    closed: list[Reward] = []
    monkeypatch.setattr(Reward, "close", lambda self: closed.append(self))
    given = Reward("i_structure")
    serve(reward=given).stop()
    assert closed == []  # the caller's: it may serve again
    built = serve(reward_options={"decode_processes": 1, "in_flight": 2})
    built.stop()  # its decoding processes end with it
    assert len(closed) == 1 and closed[0] is not given and closed[0].decode_processes == 1
