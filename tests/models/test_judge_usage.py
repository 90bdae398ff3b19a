"""Judge usage counters: what the blocking and asyncio clients count (requests, cache hits,
retries, failures, reported tokens), how a worker's change travels to its parent, and the summary
section that reports it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from mmverify.core.errors import ScoringError
from mmverify.models.judge_usage import (
    FIELDS,
    JudgeUsage,
    UsageForwarder,
    judge_identity,
    merge_usage,
    usage_for,
    usage_report,
    usage_since,
    usage_totals,
)
from tests.conftest import scene
from tests.vlm_server import MODEL, VLMServer, always, rate_limited_then, server_error_forever, vlm_server  # noqa: F401

IMAGE = scene(16, 16, seed=3)


def counted(before: dict, server: VLMServer) -> dict[str, int]:
    """This test's change in the counters of the judge at ``server``."""
    return usage_since(before).get(judge_identity(MODEL, server.url), dict.fromkeys(FIELDS, 0))


def test_requests_cache_hits_and_reported_tokens(vlm_server: VLMServer, tmp_path: Path) -> None:
    vlm_server.script(always("Answer: Yes"))
    vlm_server.usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    before = usage_totals()
    judge = vlm_server.judge(cache=tmp_path / "judge.sqlite")
    assert judge.usage is usage_for(judge_identity(MODEL, vlm_server.url + "/"))  # one set of counters per judge
    judge.ask_many([("one?", [IMAGE]), ("two?", [IMAGE]), ("one?", [IMAGE])])  # the repeat is sent once
    assert counted(before, vlm_server) == {
        "requests": 2, "replies": 2, "failures": 0, "retries": 0, "cache_hits": 0,
        "prompt_tokens": 22, "completion_tokens": 6, "tokens_reported_replies": 2,
    }  # fmt: skip
    again = vlm_server.judge(cache=tmp_path / "judge.sqlite")
    assert again.ask("one?", [IMAGE]) == "Answer: Yes" and asyncio.run(again.aask("two?", [IMAGE])) == "Answer: Yes"
    assert counted(before, vlm_server)["cache_hits"] == 2 and counted(before, vlm_server)["requests"] == 2
    assert vlm_server.count == 2


def test_absent_usage_is_unknown_not_zero(vlm_server: VLMServer) -> None:
    vlm_server.script(always("Answer: No"))
    vlm_server.usage = None
    before = usage_totals()
    judge = vlm_server.judge()
    judge.ask("q1")
    asyncio.run(judge.aask_many(["q2", "q3"]))
    counts = counted(before, vlm_server)
    assert counts["requests"] == counts["replies"] == 3 and counts["tokens_reported_replies"] == 0
    shown = usage_report({"j": counts})["judges"]["j"]
    assert shown["prompt_tokens"] is None and shown["completion_tokens"] is None and shown["requests"] == 3


def test_retries_and_failures_are_counted_on_both_paths(vlm_server: VLMServer) -> None:
    before = usage_totals()
    vlm_server.script(rate_limited_then("ok", times=2))
    assert vlm_server.judge().ask("sync") == "ok"
    vlm_server.script(rate_limited_then("ok", times=1))
    assert asyncio.run(vlm_server.judge().aask("async")) == "ok"
    assert counted(before, vlm_server)["retries"] == 3 and counted(before, vlm_server)["failures"] == 0
    vlm_server.script(server_error_forever(503))
    with pytest.raises(ScoringError):
        vlm_server.judge(max_retries=1).ask("sync fails")
    with pytest.raises(ScoringError):
        asyncio.run(vlm_server.judge(max_retries=0).aask("async fails"))
    counts = counted(before, vlm_server)
    assert counts == {**counts, "requests": 4, "replies": 2, "failures": 2, "retries": 4}


def test_counters_are_thread_safe() -> None:
    usage = JudgeUsage()

    def hammer() -> None:
        for _ in range(2000):
            usage.request()
            usage.reply((2, 1))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts = usage.counts()
    assert counts["requests"] == counts["replies"] == counts["tokens_reported_replies"] == 8000
    assert counts["prompt_tokens"] == 16000 and counts["completion_tokens"] == 8000
    with pytest.raises(KeyError):
        usage.add(tokens=1)


def test_a_worker_forwards_only_what_changed_and_the_parent_adds_it() -> None:
    identity = "forwarded-model@http://127.0.0.1:9/v1"
    forwarder = UsageForwarder()
    assert forwarder.new() == {}
    usage_for(identity).request()
    usage_for(identity).reply((5, 2))
    delta = forwarder.new()
    assert delta[identity]["requests"] == 1 and delta[identity]["prompt_tokens"] == 5
    assert forwarder.new() == {}  # sent once
    before = usage_totals()
    merge_usage(delta)  # as a parent would with a worker's report (here the same process: counts twice)
    assert usage_since(before)[identity]["requests"] == 1


def test_the_summary_section_names_judges_roles_and_totals(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmverify.pipelines.summary import judge_usage_section

    monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", "section-model")
    monkeypatch.setenv("MMVERIFY_VLM_OCR_MODEL", "section-ocr")
    before = usage_totals()
    usage_for("section-model@http://127.0.0.1:9/v1").reply((3, 1))
    usage_for("section-ocr@http://127.0.0.1:9/v1").cache_hit()
    section = judge_usage_section(before)
    assert section["roles"]["default"] == "section-model@http://127.0.0.1:9/v1"
    assert section["roles"]["ocr"] == "section-ocr@http://127.0.0.1:9/v1"
    assert set(section["judges"]) == {"section-model@http://127.0.0.1:9/v1", "section-ocr@http://127.0.0.1:9/v1"}
    assert section["total"]["cache_hits"] == 1 and section["total"]["prompt_tokens"] == 3
    assert section["judges"]["section-ocr@http://127.0.0.1:9/v1"]["prompt_tokens"] is None
