"""The reward server under hostile or broken input: one client's bad request never fails another's,
bodies are bounded before decoding, slow and stalled clients are cut off, shutdown is prompt, huge
media is never hashed, and every error reply is JSON without the server's own paths."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import mmverify.core.hashing as hashing  # noqa: E402
import mmverify.pipelines.server_limits as limits_module  # noqa: E402
from mmverify.core.hashing import FileDigests, oversize_digest, sha256_bytes, sha256_file_bounded  # noqa: E402
from mmverify.pipelines.reward import Reward  # noqa: E402
from mmverify.pipelines.server import BackgroundServer, ServerConfig, create_app  # noqa: E402
from mmverify.pipelines.server_gate import PathRedactor  # noqa: E402
from mmverify.pipelines.reward_json import count_json_values  # noqa: E402
from mmverify.pipelines.server_limits import MIN_CHARGE, Admission, ServerBusy  # noqa: E402

GOOD = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "fine"}]}
WAIT_S = 60.0  # generous bound for polled conditions; never a measured duration


# -- helpers -----------------------------------------------------------------------------------------


def post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def health(port: int) -> dict[str, Any]:
    return json.loads(get(port, "/healthz")[2])


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def items_body(*items: str) -> bytes:
    """A request body from raw JSON item texts (as a client would write them)."""
    return ('{"items": [' + ", ".join(items) + "]}").encode()


def error_json(status_headers_body: tuple[int, dict[str, str], bytes]) -> tuple[int, str]:
    status, headers, body = status_headers_body
    assert headers["content-type"].startswith("application/json"), (status, headers, body)
    return status, json.loads(body)["error"]["code"]


def stalled_request(port: int, declared: int = 1000, sent: bytes = b'{"items": [') -> socket.socket:
    """A POST whose body stops after ``sent`` (of ``declared`` bytes)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    head = f"POST /score HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    sock.sendall(head.encode() + sent)
    return sock


def read_reply(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of a reply on a raw socket, read until the server closes it."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


class HeldReward(Reward):
    """Holds its first batch until released, so requests sent meanwhile queue up and merge into
    the next batch; records each batch's size."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batch_sizes: list[int] = []

    def rows(self, items: Any, lines: Any = None, *, convert: bool = False) -> list[dict[str, Any]]:
        self.batch_sizes.append(len(items))
        if len(self.batch_sizes) == 1:
            self.entered.set()
            assert self.release.wait(WAIT_S)
        return super().rows(items, lines, convert=convert)


class ExplodingReward(HeldReward):
    """A pipeline that fails on any batch holding an item named "explode"."""

    def rows(self, items: Any, lines: Any = None, *, convert: bool = False) -> list[dict[str, Any]]:
        rows = super().rows(items, lines, convert=convert)
        if any(isinstance(item, dict) and item.get("instance_id") == "explode" for item in items):
            raise RuntimeError("/srv/secret/path: the pipeline broke")
        return rows


def send_all(port: int, bodies: list[bytes]) -> list[tuple[int, dict[str, str], bytes]]:
    """Each body on its own connection and thread; replies in body order."""
    replies: list[Any] = [None] * len(bodies)

    def one(index: int) -> None:
        replies[index] = post(port, "/score", bodies[index])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    return replies


def merged(server: BackgroundServer, reward: HeldReward, bodies: list[bytes], items: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``bodies`` while the first batch is held, check they all queued, then release them
    as one merged batch."""
    holder = threading.Thread(target=post, args=(server.port, "/score", json.dumps({"items": [GOOD]}).encode()))
    holder.start()
    assert reward.entered.wait(WAIT_S)
    replies: list[Any] = []
    sender = threading.Thread(target=lambda: replies.extend(send_all(server.port, bodies)))
    sender.start()
    wait_until(lambda: health(server.port)["queued_items"] == items, "every request to queue")
    reward.release.set()
    sender.join(WAIT_S)
    holder.join(WAIT_S)
    return replies


# -- one bad request never fails another -------------------------------------------------------------

POISONED = {  # raw item text -> error codes its row may carry
    '{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "\\udcff"}]}': {"malformed_line"},
    '{"task": "i_structure", "instance_id": "\\ud800", "instance": {"order": ["t"]}, "parts": []}': {"malformed_line"},
    '{"task": "i_structure", "model": "x\\udfff", "instance": {"order": ["t"]}, "parts": []}': {"malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"], "k\\udcff": 1}, "parts": []}': {"invalid_instance", "malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"], "x": NaN}, "parts": []}': {"invalid_instance", "malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"], "x": -Infinity}, "parts": []}': {"invalid_instance", "malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"], "x": 1e999}, "parts": []}': {"invalid_instance", "malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"], "x": ' + "9" * 5000 + '}, "parts": []}': {"invalid_instance"},
    '{"task": "i_structure", "sample": ' + "9" * 5000 + ', "instance": {"order": ["t"]}, "parts": []}': {"malformed_line"},
    '{"task": "i_structure", "instance": {"order": ["t"]}, "parts": ' + "[" * 300 + "]" * 300 + "}": {"malformed_line"},
    '{"task": 5, "instance": [], "parts": {"a": 1}}': {"malformed_line"},
    '{"task": "i_structure", "sample": "x", "instance": {"order": ["t"]}, "parts": [{"type": ["text"]}]}': {"malformed_line"},
    '{"task": "i_structure", "instance": "not an object", "parts": [{"type": "image", "data": 5}]}': {"malformed_line"},
    '[1, 2, 3]': {"malformed_line"},
}


def test_a_poisoned_item_leaves_the_other_items_of_its_request_untouched(serve):
    server = serve(batch_wait_ms=0)
    status, _, alone = post(server.port, "/score", json.dumps({"items": [GOOD]}).encode())
    assert status == 200
    good_row = json.loads(alone)["results"][0]
    for poison, codes in POISONED.items():
        status, headers, body = post(server.port, "/score", items_body(json.dumps(GOOD), poison, json.dumps(GOOD)))
        assert status == 200 and headers["content-type"] == "application/json", (poison[:80], status, body)
        first, bad, last = json.loads(body)["results"]
        assert bad["status"] == "error" and bad["error"]["code"] in codes, (poison[:80], bad)
        assert first == good_row and last["status"] == "scored" and last["score"] == good_row["score"]


def test_poisoned_requests_merged_with_good_ones_in_one_batch(serve):
    reward = HeldReward(None)
    server = serve(reward=reward, batch_wait_ms=0, max_batch_items=512)
    good_body = json.dumps({"items": [GOOD, {**GOOD, "sample": 1}]}).encode()
    bodies = [good_body] * 20 + [items_body(poison) for poison in POISONED]
    replies = merged(server, reward, bodies, items=40 + len(POISONED))
    assert reward.batch_sizes == [1, 40 + len(POISONED)]  # all of them scored as one batch
    alone = post(server.port, "/score", good_body)
    assert [reply[0] for reply in replies] == [200] * len(bodies)
    assert all(reply[2] == alone[2] for reply in replies[:20])
    for poison, (_, _, body) in zip(POISONED, replies[20:]):
        row = json.loads(body)["results"][0]
        assert row["status"] == "error" and row["error"]["code"] in POISONED[poison]


def test_a_pipeline_failure_fails_only_its_own_request(serve):
    reward = ExplodingReward(None)
    server = serve(reward=reward, batch_wait_ms=0, max_batch_items=512)
    good_body = json.dumps({"items": [GOOD]}).encode()
    explode = json.dumps({"items": [{**GOOD, "instance_id": "explode"}]}).encode()
    replies = merged(server, reward, [good_body, explode, good_body], items=3)
    assert [reply[0] for reply in replies] == [200, 500, 200]
    assert error_json(replies[1]) == (500, "internal_error")
    assert b"/srv/secret" not in replies[1][2]  # no exception text reaches the client
    assert json.loads(replies[0][2])["results"][0]["status"] == "scored"
    assert health(server.port)["status"] == "ok"


def test_an_overlong_integer_in_one_item_is_that_items_row(serve):
    server = serve(batch_wait_ms=0)
    body = items_body(json.dumps(GOOD), '{"task": "i_structure", "instance": {"order": ["t"], "n": ' + "1" * 4301 + '}, "parts": []}')
    status, _, reply = post(server.port, "/score", body)
    rows = json.loads(reply)["results"]
    assert status == 200 and rows[0]["status"] == "scored"
    assert rows[1]["error"]["code"] == "invalid_instance" and "4301 digits" in rows[1]["error"]["message"]


def test_openrlhf_labels_that_do_not_decode_are_their_own_rows(serve):
    server = serve(batch_wait_ms=0, on_error="zero")
    labels = [json.dumps({"task": "i_structure", "instance": {"order": ["t"]}}),
              '{"task": "i_structure", "instance": {"order": ["t"], "n": ' + "7" * 5000 + "}}",
              "[" * 5000]  # fmt: skip
    status, _, body = post(server.port, "/get_reward", json.dumps({"query": ["a", "b", "c"], "labels": labels}).encode())
    reply = json.loads(body)
    assert status == 200 and reply["rewards"] == [1.0, 0.0, 0.0]
    assert reply["extra_logs"]["mmverify_valid"] == [1.0, 0.0, 0.0]
    assert [r["error"]["code"] for r in reply["results"][1:]] == ["invalid_instance", "malformed_line"]


# -- every error reply is JSON ------------------------------------------------------------------------


def test_every_error_reply_is_json(serve):
    server = serve(max_body_bytes=4096, max_items=2)
    assert error_json(get(server.port, "/nowhere")) == (404, "not_found")
    assert error_json(get(server.port, "/score")) == (405, "method_not_allowed")
    assert error_json(get(server.port, "/healthz", method="DELETE")) == (405, "method_not_allowed")
    assert error_json(post(server.port, "/score", b"x" * 5000)) == (413, "body_too_large")
    assert error_json(post(server.port, "/score", json.dumps({"items": [GOOD] * 3}).encode())) == (413, "too_many_items")
    assert error_json(post(server.port, "/score", b"{nope")) == (400, "invalid_json")
    assert error_json(post(server.port, "/score", b"[" * 2000 + b"]" * 2000)) == (400, "invalid_json")
    assert error_json(post(server.port, "/score", b'{"items": 1}')) == (422, "invalid_body")
    guarded = serve(token="t0k")
    assert error_json(post(guarded.port, "/score", b"{}")) == (401, "unauthorized")
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    status, body = read_reply(sock)
    assert status == 400 and json.loads(body)["error"]["code"] == "bad_request"


def test_an_unexpected_failure_is_a_json_500(serve):
    class Broken(Reward):
        def rows(self, items: Any, lines: Any = None, *, convert: bool = False) -> list[dict[str, Any]]:
            raise KeyError("/home/server/secret")

    server = serve(reward=Broken(None))
    status, headers, body = post(server.port, "/score", json.dumps({"items": [GOOD]}).encode())
    assert error_json((status, headers, body)) == (500, "internal_error")
    assert b"secret" not in body
    assert health(server.port)["status"] == "ok"


# -- bounded parsing -----------------------------------------------------------------------------------


def test_value_count_skips_strings_and_stops_past_the_limit():
    body = b'["a,b,[c]", {"k\\"[": "{,,,"}, 3]'
    assert count_json_values(body, 100) == 5  # the document, '[', '{' and two ','
    assert count_json_values(body.decode(), 100) == 5  # text the same as bytes
    assert count_json_values(body, 3) == 4  # stops one past the limit
    flood = b"[" + b"[]," * 100_000 + b"[]]"
    assert count_json_values(flood, 10) == 11  # stops right after the limit


def test_a_body_of_many_values_is_refused_before_decoding(serve, monkeypatch):
    decoded: list[int] = []
    real = limits_module.loads_json
    monkeypatch.setattr(limits_module, "loads_json", lambda body: decoded.append(len(body)) or real(body))
    server = serve(max_json_values=1000)
    flood = b"[" + b"[]," * 50_000 + b"[]]"  # 150 KB: decoded on a parser thread if it got that far
    assert error_json(post(server.port, "/score", flood)) == (413, "too_many_values")
    strings = json.dumps({"items": [{**GOOD, "parts": [{"type": "text", "text": ",[{" * 20_000}]}]}).encode()
    status, _, body = post(server.port, "/score", strings)  # separators inside strings do not count
    assert status == 200 and json.loads(body)["results"][0]["status"] == "scored"
    assert decoded == [len(strings)]


def test_request_bodies_in_memory_are_bounded_and_waiters_are_capped(serve):
    reward = HeldReward(None)
    server = serve(reward=reward, max_inflight_bytes=MIN_CHARGE, max_waiting=1, batch_wait_ms=0)
    body = json.dumps({"items": [GOOD]}).encode()
    first: list[Any] = []
    holder = threading.Thread(target=lambda: first.append(post(server.port, "/score", body)))
    holder.start()
    assert reward.entered.wait(WAIT_S)  # the first request holds the whole budget while scored
    second: list[Any] = []
    waiter = threading.Thread(target=lambda: second.append(post(server.port, "/score", body)))
    waiter.start()
    wait_until(lambda: health(server.port)["waiting"] == 1, "the second request to wait for room")
    status, headers, reply = post(server.port, "/score", body)  # nobody else may wait: 429
    assert error_json((status, headers, reply)) == (429, "server_busy") and headers["retry-after"] == "1"
    reward.release.set()
    holder.join(WAIT_S)
    waiter.join(WAIT_S)
    assert first[0][0] == 200 and second[0][0] == 200 and first[0][2] == second[0][2]
    assert health(server.port)["inflight_bytes"] == 0


def post_chunked(port: int, body: bytes, piece: int = 4096) -> tuple[int, dict[str, str], bytes]:
    """A body without Content-Length (chunked transfer encoding)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        pieces = (body[i : i + piece] for i in range(0, len(body), piece))
        conn.request("POST", "/score", body=pieces, headers={"Content-Type": "application/json"}, encode_chunked=True)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_bodies_without_a_length_are_counted_as_they_grow(serve):
    body = json.dumps({"items": [{**GOOD, "parts": [{"type": "text", "text": "x" * 3 * MIN_CHARGE}]}]}).encode()
    roomy = serve(batch_wait_ms=0)
    status, _, reply = post_chunked(roomy.port, body)
    assert status == 200 and json.loads(reply)["results"][0]["status"] == "scored"
    assert health(roomy.port)["inflight_bytes"] == 0
    tight = serve(max_inflight_bytes=2 * MIN_CHARGE)  # room for the first 32 KiB of it only
    assert error_json(post_chunked(tight.port, body)) == (429, "server_busy")
    assert health(tight.port)["inflight_bytes"] == 0
    assert post(tight.port, "/score", json.dumps({"items": [GOOD]}).encode())[0] == 200


def test_admission_is_first_come_first_served_and_gives_up_cleanly():
    async def scenario() -> None:
        budget = Admission(limit=100, max_waiting=2)
        assert await budget.acquire(60) == 60
        big = asyncio.ensure_future(budget.acquire(80))
        small = asyncio.ensure_future(budget.acquire(10))  # would fit, but waits behind `big`
        await asyncio.sleep(0)
        assert budget.waiting == 2 and not big.done() and not small.done()
        with pytest.raises(ServerBusy):
            await budget.acquire(1)
        big.cancel()  # a waiter giving up lets the next one in
        with pytest.raises(asyncio.CancelledError):
            await big
        assert await small == 10 and budget.used == 70 and budget.waiting == 0
        budget.release(70)
        assert await budget.acquire(10**9) == 100  # never more than the whole budget
        assert not budget.grow(1)
        budget.release(100)
        assert budget.grow(50) and budget.used == 50

    asyncio.run(asyncio.wait_for(scenario(), WAIT_S))


# -- slow and stalled clients, shutdown --------------------------------------------------------------


def test_a_body_that_trickles_in_gets_408_and_the_connection_closes(serve):
    server = serve(body_timeout=0.2)
    sock = stalled_request(server.port)
    status, body = read_reply(sock)  # returns once the server has answered and closed
    assert status == 408 and json.loads(body)["error"]["code"] == "body_timeout"
    assert health(server.port)["inflight_bytes"] == 0


def test_headers_that_never_finish_are_cut_off(serve):
    server = serve(header_timeout=0.2)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    sock.sendall(b"POST /score HTTP/1.1\r\nHost: t\r\n")  # no blank line: headers never end
    assert sock.recv(1024) == b""  # closed by the server
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    assert silent.recv(1024) == b""
    # complete requests are unaffected; the client shares this process with the server, so a stall
    # between its connect and its send may outlast 0.2 s: a cut connection is tried again
    assert _health_within_header_limit(server.port)["status"] == "ok"


def _health_within_header_limit(port: int, attempts: int = 20) -> dict[str, Any]:
    """The health reply, trying again only where the connection was cut before any reply (a
    cut shows as the connection closed or reset; a garbled or wrong reply fails at once)."""
    for _ in range(attempts - 1):
        try:
            return health(port)
        except ConnectionError:  # http.client.RemoteDisconnected included
            continue
    return health(port)


def test_shutdown_answers_stalled_clients_at_once():
    server = BackgroundServer(create_app(ServerConfig(body_timeout=3600, shutdown_timeout=3600))).start()
    sock = stalled_request(server.port)
    wait_until(lambda: health(server.port)["inflight_bytes"] > 0, "the stalled request to be admitted")
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    status, body = read_reply(sock)
    assert status == 503 and json.loads(body)["error"]["code"] == "shutting_down"
    stopper.join(WAIT_S)
    assert not stopper.is_alive() and not server.running


def test_sigterm_with_a_stalled_client_exits():
    code = "from mmverify.pipelines.server import ServerConfig, run; run(ServerConfig(port=0, body_timeout=3600, shutdown_timeout=3600))"
    process = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        port = None
        deadline = time.monotonic() + 120
        while port is None:
            assert time.monotonic() < deadline and process.poll() is None, "the server did not start"
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                port = json.loads(line)["port"]
        sock = stalled_request(port)
        wait_until(lambda: health(port)["inflight_bytes"] > 0, "the stalled request to be admitted")
        process.send_signal(signal.SIGTERM)
        status, body = read_reply(sock)
        assert status == 503 and json.loads(body)["error"]["code"] == "shutting_down"
        assert process.wait(timeout=WAIT_S) in (0, -signal.SIGTERM, 128 + signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# -- huge media, the digest cache, server paths ------------------------------------------------------


def test_huge_media_is_never_hashed_and_replies_hide_server_paths(serve, tmp_path: Path, monkeypatch):
    from tests.conftest import save_png
    from tests.pipelines.conftest import bordered

    root = tmp_path / "root"
    save_png(root / "green.png", bordered("green"))
    with open(root / "huge.png", "wb") as handle:
        handle.truncate(hashing.DEFAULT_MAX_FILE_BYTES + 1)  # sparse: takes no disk space
    save_png(tmp_path / "outside.png", bordered("green"))
    hashed: list[str] = []
    real = hashing.sha256_file_bounded
    monkeypatch.setattr(hashing, "sha256_file_bounded", lambda path, limit: hashed.append(Path(path).name) or real(path, limit))
    server = serve(data_root=root)
    items = [{"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": path}]}
             for path in ("green.png", "huge.png", "../outside.png", str(tmp_path / "outside.png"))]  # fmt: skip
    status, _, body = post(server.port, "/score", json.dumps({"items": items}).encode())
    rows = json.loads(body)["results"]
    assert status == 200 and hashed == ["green.png"]  # the oversize file was judged by its size alone
    assert rows[0]["status"] == "scored" and rows[0]["score"] > 0.9
    assert rows[1]["status"] == "scored" and rows[1]["score"] == 0.0 and "media_too_large" in json.dumps(rows[1])
    assert rows[1]["evidence"]["message"].startswith("huge.png ")  # relative to the data root
    assert [r["error"]["code"] for r in rows[2:]] == ["path_outside_root", "path_outside_root"]
    for folder in {str(root), os.path.realpath(root)}:  # (the client's own paths may come back)
        assert folder not in body.decode()


def test_path_redactor_reports_paths_relative_to_the_data_root(tmp_path: Path):
    root, instructions = tmp_path / "data", tmp_path / "instr"
    redact = PathRedactor({"<data root>": root, "<instructions>": instructions, "<unused>": None})
    row = {"error": {"message": f"'../x' resolves outside the data root {root}"},
           "evidence": {"message": f"no such file: {root}/sub/a.png", "list": [f"{instructions}/image/b.png", 3]}}  # fmt: skip
    assert redact(row) == {"error": {"message": "'../x' resolves outside the data root"},
                           "evidence": {"message": "no such file: sub/a.png", "list": ["<instructions>/image/b.png", 3]}}  # fmt: skip
    assert PathRedactor({})(row) is row


def test_path_redactor_rewrites_whole_paths_only_and_never_a_rows_identity():
    redact = PathRedactor({"<data root>": Path("/srv/data"), "<instructions>": Path("/srv/instr/")})
    said = "no /srv/database, /x/srv/data or /srv/data-old here; see /srv/data. And /srv/instr."
    assert redact(said) == "no /srv/database, /x/srv/data or /srv/data-old here; see <data root>. And <instructions>."
    assert redact("'/srv/data/a.png' and /srv/instr/b/c.json") == "'a.png' and <instructions>/b/c.json"
    row = {"status": "scored", "task": "i_structure", "instance_id": "/srv/data/step3/sample7", "model": "/srv/data", "key": "k",
           "evidence": {"response": "/srv/data/step3", "model": "/srv/instr/ckpt"}}  # fmt: skip
    expected = {**row, "evidence": {"response": "step3", "model": "<instructions>/ckpt"}}  # the client's ids as sent, the rest redacted
    assert redact({"results": [row]}) == {"results": [expected]}
    assert redact("see /srv/data...") == "see <data root>..."


def test_oversize_files_are_judged_by_size_without_being_read(tmp_path: Path, monkeypatch):
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    small.write_bytes(b"0123456789")
    big.write_bytes(b"0123456789a")
    assert sha256_file_bounded(small, 10) == sha256_bytes(b"0123456789")
    assert sha256_file_bounded(big, 10) is None  # read stops one byte past the limit
    digests = FileDigests(max_bytes=10)
    assert digests(small) == sha256_bytes(b"0123456789")
    monkeypatch.setattr(hashing, "sha256_file_bounded", lambda path, limit: pytest.fail(f"{path} was read"))
    assert digests(big) == oversize_digest(11)
    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 40)  # 1 TiB, sparse
    assert FileDigests()(sparse) == oversize_digest(1 << 40)


def test_the_digest_cache_keeps_the_most_recently_used_entries(tmp_path: Path, monkeypatch):
    paths = []
    for name in "abc":
        paths.append(tmp_path / name)
        paths[-1].write_bytes(name.encode())
    hashed: list[str] = []
    real = hashing.sha256_file_bounded
    monkeypatch.setattr(hashing, "sha256_file_bounded", lambda path, limit: hashed.append(Path(path).name) or real(path, limit))
    monkeypatch.setattr(hashing, "_now_ns", lambda: 1 << 62)  # files written just now are otherwise never memoised
    digests = FileDigests(max_entries=2)
    a, b, c = paths
    for path in (a, b, a, c):  # c evicts b, the least recently used
        digests(path)
    assert len(digests) == 2 and hashed == ["a", "b", "c"]
    digests(a)
    digests(b)
    assert hashed == ["a", "b", "c", "b"] and len(digests) == 2
    copy = pickle.loads(pickle.dumps(digests))  # rewards (and their planners) travel to worker processes
    assert copy(b) == digests(b) and hashed[-1] == "b"
