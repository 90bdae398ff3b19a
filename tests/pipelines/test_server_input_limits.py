"""The reward server's JSON limits hold for everything it decodes, the same way whatever thread
decodes it: /get_reward's labels (JSON strings) are counted within the body's value budget before
they are decoded, and one nesting limit is checked on the raw text of bodies and labels alike."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import mmverify.pipelines.adapter_items as adapter_items  # noqa: E402
import mmverify.pipelines.server as server_module  # noqa: E402
from mmverify.pipelines.reward_json import MAX_DECODED_DEPTH, json_depth  # noqa: E402
from mmverify.pipelines.server_limits import INLINE_DECODE_BYTES  # noqa: E402

PADS = (0, 2 * INLINE_DECODE_BYTES)  # decoded on the event loop / on a parser thread
GOOD = {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "fine"}]}


def post(port: int, path: str, body: bytes) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def reward_body(labels: list[str], pad: int) -> bytes:
    return json.dumps({"query": ["x" * pad] + ["x"] * (len(labels) - 1), "labels": labels}).encode()


def nested_label(levels: int) -> str:
    """A label whose own nesting is ``levels``: the object, its instance, and a list inside."""
    deep = "[" * (levels - 2) + "]" * (levels - 2)
    return '{"task": "i_structure", "instance": {"order": ["t"], "deep": ' + deep + "}}"


def test_json_depth_skips_strings_and_stops_past_the_limit():
    assert json_depth(b'[["[[[[", {"a": []}]]', 10) == 8  # within the limit on a cheap bound: no walk
    assert json_depth(b'[["[[[[", {"a": []}]]', 2) == 3  # walked, the string skipped
    assert json_depth('["]]]]", [[]], [[[[[[]]]]]]]', 2) == 3  # text too; stops on the first run past the limit


@pytest.mark.parametrize("pad", PADS)
def test_label_strings_are_counted_within_the_body_budget_before_decoding(serve, monkeypatch, pad):
    decoded: list[int] = []
    real = adapter_items.loads_json
    monkeypatch.setattr(adapter_items, "loads_json", lambda text: decoded.append(len(text)) or real(text))
    server = serve(max_json_values=1000, batch_wait_ms=0, on_error="zero")
    bomb = "[" + ",".join(["[]"] * 5000) + "]"  # a handful of values in the body, 10 000 once decoded
    status, reply = post(server.port, "/get_reward", reward_body([bomb], pad))
    assert (status, reply["error"]["code"]) == (413, "too_many_values") and decoded == []
    half = json.dumps({**GOOD, "instance": {"order": ["t"], "n": [[]] * 300}})  # ~600 values each
    status, reply = post(server.port, "/get_reward", reward_body([half, half], pad))
    assert (status, reply["error"]["code"]) == (413, "too_many_values")  # one budget for all labels
    status, reply = post(server.port, "/get_reward", reward_body([half], pad))
    assert status == 200 and reply["rewards"] == [1.0]


def test_large_bodies_become_items_off_the_event_loop(serve, monkeypatch):
    threads: list[str] = []
    real = server_module.openrlhf_items
    monkeypatch.setattr(server_module, "openrlhf_items", lambda *args: threads.append(threading.current_thread().name) or real(*args))
    server = serve(batch_wait_ms=0)
    status, _ = post(server.port, "/get_reward", reward_body([json.dumps(GOOD)], PADS[1]))
    assert status == 200 and len(threads) == 1 and threads[0].startswith("mmverify-parse")


@pytest.mark.parametrize("pad", PADS)
def test_one_nesting_limit_whatever_the_body_size(serve, pad):
    server = serve(batch_wait_ms=0, on_error="zero")

    def score(levels: int) -> tuple[int, Any]:
        deep = "[" * (levels - 4) + "]" * (levels - 4)  # the body, its items, the item, its instance
        text = '{"task": "i_structure", "instance": {"order": ["t"], "deep": ' + deep + '}, "parts": []}'
        body = ('{"pad": "' + "x" * pad + '", "items": [' + text + ", " + json.dumps(GOOD) + "]}").encode()
        assert json_depth(body, levels - 1) == levels
        return post(server.port, "/score", body)

    status, reply = score(MAX_DECODED_DEPTH)
    assert status == 200 and [r["status"] for r in reply["results"]] == ["scored", "scored"]
    for levels in (MAX_DECODED_DEPTH + 1, 985):
        status, reply = score(levels)
        assert (status, reply["error"]["code"]) == (400, "invalid_json") and "nested too deeply" in reply["error"]["message"]
    labels = [nested_label(MAX_DECODED_DEPTH), nested_label(MAX_DECODED_DEPTH + 1), nested_label(985)]
    status, reply = post(server.port, "/get_reward", reward_body(labels, pad))
    assert status == 200 and [r["status"] for r in reply["results"]] == ["scored", "error", "error"]
    assert {r["error"]["code"] for r in reply["results"][1:]} == {"malformed_line"}


def test_get_reward_takes_no_null_rewards():
    """OpenRLHF turns the rewards into a tensor: a null among them fails its training step."""
    from mmverify.pipelines.server_limits import ServerConfig

    with pytest.raises(ValueError, match="raise or zero"):
        ServerConfig(on_error="none")
    assert ServerConfig(on_error="zero").on_error == "zero"
