"""The VLM judge against a real local chat-completions server: protocol, retries, cache, concurrency,
roles and configuration; and the in-process transformers judge on a tiny random-init Qwen2.5-VL."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from typer.testing import CliRunner

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.core.registry import UnknownIdError
from mmverify.models.base import ModelUnavailable
from mmverify.models.hub import ModelHub
from mmverify.models.judge import (
    ROLES,
    JudgeCache,
    JudgeRequest,
    OpenAICompatibleJudge,
    _Failure,
    apply_cli_options,
    ask_many,
    config_from_env,
    encode_png,
    parse_retry_after,
)
from mmverify.models.protocols import VisionLanguageJudge
from tests.conftest import scene, write_manifest
from tests.waiting import wait_until
from tests.vlm_server import (  # noqa: F401  (fixtures)
    FOREVER,
    MODEL,
    Reply,
    VLMServer,
    always,
    by_prompt,
    empty_content,
    malformed_json,
    rate_limited_then,
    sequence,
    server_error_forever,
    together,
    vlm_env,
    vlm_server,
)

REPO = Path(__file__).resolve().parents[2]
IMAGE_A = scene(24, 32, seed=1)
IMAGE_B = scene(20, 20, seed=2)


def judge_failed(excinfo: pytest.ExceptionInfo[ScoringError]) -> str:
    assert excinfo.value.code == ErrorCode.JUDGE_FAILED
    return excinfo.value.message


# -- protocol -------------------------------------------------------------------------------------
def test_reply_and_request_follow_the_chat_completions_protocol(vlm_server: VLMServer):
    vlm_server.script(always("Two red apples on a plate. Answer: B"))
    judge = vlm_server.judge(seed=7)
    assert isinstance(judge, VisionLanguageJudge)
    assert judge.ask("How many apples?", [IMAGE_A, IMAGE_B], max_tokens=50) == "Two red apples on a plate. Answer: B"
    (request,) = vlm_server.requests
    assert request.path == "/v1/chat/completions" and request.model == MODEL
    body = request.body
    assert body["temperature"] == 0 and body["top_p"] == 1 and body["max_tokens"] == 50 and body["seed"] == 7
    assert body["stream"] is False
    content = body["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["image_url", "image_url", "text"]  # images, then the question
    assert all(url.startswith("data:image/png;base64,") for url in request.image_urls)
    assert request.prompt == "How many apples?"
    np.testing.assert_array_equal(request.images[0], IMAGE_A)  # lossless, same orientation
    np.testing.assert_array_equal(request.images[1], IMAGE_B)
    assert request.image_bytes[0] == encode_png(IMAGE_A)


def test_text_only_questions_send_a_plain_string_and_no_seed_by_default(vlm_server: VLMServer):
    vlm_server.script(always("The pattern is +3. Yes"))
    vlm_server.judge().ask("Is 1, 4, 7 the same pattern as n+3?")
    body = vlm_server.requests[0].body
    assert body["messages"] == [{"role": "user", "content": "Is 1, 4, 7 the same pattern as n+3?"}]
    assert "seed" not in body


def test_content_parts_and_alternative_token_field(vlm_server: VLMServer):
    body = {"choices": [{"message": {"content": [{"type": "text", "text": "Answer: "}, {"type": "text", "text": "A"}]}}]}
    vlm_server.script(lambda request: Reply(body=body))
    assert vlm_server.judge(max_tokens_field="max_completion_tokens").ask("q", max_tokens=9) == "Answer: A"
    assert vlm_server.requests[0].body["max_completion_tokens"] == 9


def test_png_encoding_is_deterministic_and_validated():
    assert encode_png(IMAGE_A) == encode_png(IMAGE_A.copy())
    assert encode_png(IMAGE_A[:, :, :1]) == encode_png(np.ascontiguousarray(IMAGE_A[:, :, 0]))
    with pytest.raises(ValueError, match="uint8"):
        encode_png(IMAGE_A.astype(np.float32))
    with pytest.raises(ValueError, match="shape"):
        encode_png(np.zeros((4, 4, 2), np.uint8))


# -- failures and retries -------------------------------------------------------------------------
def test_429_then_success_backs_off_and_retries(vlm_server: VLMServer):
    vlm_server.script(rate_limited_then("Answer: C", times=2))
    assert vlm_server.judge(max_retries=2).ask("count") == "Answer: C"
    assert vlm_server.count == 3


class _SleepSpy:
    """Stands in for the judge module's ``time``: records every ``sleep`` and then really sleeps."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        time.sleep(seconds)

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def test_retry_after_is_honoured_and_capped(vlm_server: VLMServer, monkeypatch: pytest.MonkeyPatch):
    import mmverify.models.judge as judge_module

    spy = _SleepSpy()
    monkeypatch.setattr(judge_module, "time", spy)
    vlm_server.script(rate_limited_then("ok", times=1, retry_after=0.4))
    assert vlm_server.judge().ask("q") == "ok"
    assert spy.sleeps == [0.4]  # the server's wait, not the millisecond back-off
    vlm_server.script(rate_limited_then("ok", times=1, retry_after=3600))
    assert vlm_server.judge(retry_after_max=0.05).ask("q2") == "ok"
    assert spy.sleeps == [0.4, 0.05] and vlm_server.count == 4


def test_retry_after_header_forms():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a past date
    assert parse_retry_after({"Retry-After": "soon"}) is None and parse_retry_after({}) is None


def test_backoff_doubles_with_deterministic_jitter(vlm_server: VLMServer):
    judge = vlm_server.judge(backoff_base=1.0, backoff_max=5.0)
    failure = _Failure("HTTP 503", retryable=True)
    delays = [judge._delay(attempt, failure, "key") for attempt in range(4)]
    assert delays == [judge._delay(attempt, failure, "key") for attempt in range(4)]
    for attempt, delay in enumerate(delays):
        nominal = min(5.0, 2.0**attempt)
        assert 0.5 * nominal <= delay <= nominal
    assert vlm_server.judge(backoff_base=1.0, backoff_max=10.0, jitter=False)._delay(2, failure, "key") == 4.0


def test_server_error_forever_fails_after_max_retries(vlm_server: VLMServer):
    vlm_server.script(server_error_forever(503))
    with pytest.raises(ScoringError) as excinfo:
        vlm_server.judge(max_retries=2).ask("q")
    message = judge_failed(excinfo)
    assert vlm_server.count == 3
    assert "HTTP 503" in message and "internal server error" in message and "3 attempts" in message


def test_client_errors_are_not_retried(vlm_server: VLMServer):
    vlm_server.script(lambda request: Reply(status=400, body={"error": {"message": "image too large"}}))
    with pytest.raises(ScoringError) as excinfo:
        vlm_server.judge(max_retries=3).ask("q")
    assert "HTTP 400" in judge_failed(excinfo) and "image too large" in excinfo.value.message
    assert vlm_server.count == 1


def test_timeouts_are_retried_then_fail(vlm_server: VLMServer):
    vlm_server.script(lambda request: Reply(content="never sent", delay=FOREVER))
    with pytest.raises(ScoringError) as excinfo:
        vlm_server.judge(timeout=0.2, max_retries=1).ask("q")
    assert "no reply within 0.2 s" in judge_failed(excinfo)
    # the client gives up on its second request without waiting for the server to have read it:
    # on a busy machine the server's thread records it only later
    wait_until(lambda: vlm_server.count >= 2, message=lambda: f"the retry to reach the server ({vlm_server.count} seen)")
    assert vlm_server.count == 2


def test_a_timeout_then_a_reply_succeeds(vlm_server: VLMServer):
    vlm_server.script(sequence(Reply(content="never sent", delay=FOREVER), then="on time"))
    assert vlm_server.judge(timeout=1.0, max_retries=4).ask("q") == "on time"
    # the first request never gets a reply; a machine too busy to answer the next one within the
    # timeout makes the client retry again, so only the lower bound is exact
    assert vlm_server.count >= 2


def test_connection_errors_are_retried_then_fail():
    with socket.socket() as probe:  # a port nobody listens on: held (bound, not listening) so that
        probe.bind(("127.0.0.1", 0))  # no other process can take it meanwhile; connecting is refused
        port = probe.getsockname()[1]
        judge = OpenAICompatibleJudge(MODEL, f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_base=0.001)
        with pytest.raises(ScoringError) as excinfo:
            judge.ask("q")
    assert "connection error" in judge_failed(excinfo) and "2 attempts" in excinfo.value.message


def test_a_base_url_without_a_scheme_fails_at_once():
    judge = OpenAICompatibleJudge(MODEL, "notaurl", max_retries=3, backoff_base=0.001)
    with pytest.raises(ScoringError) as excinfo:
        judge.ask("q")
    assert "unusable base URL" in judge_failed(excinfo) and "1 attempt" in excinfo.value.message


def test_empty_content_is_a_failure_never_an_answer(vlm_server: VLMServer, tmp_path: Path):
    vlm_server.script(empty_content())
    judge = vlm_server.judge(cache=tmp_path / "judge.sqlite", max_retries=3)
    with pytest.raises(ScoringError) as excinfo:
        judge.ask("q")
    assert "empty reply" in judge_failed(excinfo)
    assert vlm_server.count == 1  # temperature 0: asking again would give the same nothing
    vlm_server.script(lambda request: Reply(body={"choices": [{"message": {"content": None}, "finish_reason": "length"}]}))
    with pytest.raises(ScoringError, match="finish_reason='length'"):
        judge.ask("q")
    vlm_server.script(always("Yes"))
    assert judge.ask("q") == "Yes"  # the failures were not cached
    assert vlm_server.count == 3


def test_malformed_json_is_retried_then_fails(vlm_server: VLMServer):
    vlm_server.script(malformed_json())
    with pytest.raises(ScoringError) as excinfo:
        vlm_server.judge(max_retries=2).ask("q")
    assert "malformed JSON" in judge_failed(excinfo) and vlm_server.count == 3
    vlm_server.script(sequence(Reply(body="<html>bad gateway"), then="fine"))
    assert vlm_server.judge().ask("q") == "fine"


def test_api_key_is_sent_as_bearer_and_never_echoed(vlm_server: VLMServer, monkeypatch: pytest.MonkeyPatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("MY_JUDGE_KEY", secret)
    # a server that echoes the credentials it received into its error body
    vlm_server.script(lambda request: Reply(status=401, body={"error": f"bad key {request.headers['authorization']}"}))
    judge = vlm_server.judge(api_key_env="MY_JUDGE_KEY")
    with pytest.raises(ScoringError) as excinfo:
        judge.ask("q")
    assert vlm_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in str(excinfo.value) and "Bearer ***" in excinfo.value.message
    assert secret not in repr(judge) and secret not in repr(vars(judge).get("api_key_env"))
    monkeypatch.delenv("MY_JUDGE_KEY")
    vlm_server.script(always("ok"))
    vlm_server.judge(api_key_env="MY_JUDGE_KEY").ask("q")
    assert "authorization" not in vlm_server.requests[-1].headers  # local servers need none


# -- cache ----------------------------------------------------------------------------------------
def test_cache_hits_make_no_request_across_instances_and_processes(vlm_server: VLMServer, tmp_path: Path):
    cache = tmp_path / "judge.sqlite"
    vlm_server.script(lambda request: f"reply to {request.prompt} with {len(request.images)} images")
    first = vlm_server.judge(cache=cache).ask("Is there a cat?", [IMAGE_A])
    assert vlm_server.count == 1
    again = vlm_server.judge(cache=cache)  # a second judge instance, fresh connection
    assert again.ask("Is there a cat?", [IMAGE_A.copy()]) == first
    assert vlm_server.count == 1 and again.cache.hits == 1
    script = (
        "import numpy as np, sys; sys.path.insert(0, {repo!r}); from tests.conftest import scene;"
        "from mmverify.models.judge import OpenAICompatibleJudge as J;"
        "print(J({model!r}, {url!r}, cache={cache!r}).ask('Is there a cat?', [scene(24, 32, seed=1)]), end='')"
    ).format(repo=str(REPO), model=MODEL, url=vlm_server.url, cache=str(cache))
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert child.stdout == first and vlm_server.count == 1
    # anything that can change the reply is part of the key
    judge = vlm_server.judge(cache=cache)
    judge.ask("Is there a cat?", [IMAGE_B])
    judge.ask("Is there a cat?", [IMAGE_A], max_tokens=16)
    judge.ask("Is there a dog?", [IMAGE_A])
    vlm_server.judge(cache=cache, model="another-model").ask("Is there a cat?", [IMAGE_A])
    vlm_server.judge(cache=cache, seed=1).ask("Is there a cat?", [IMAGE_A])
    assert vlm_server.count == 6 and len(JudgeCache(cache)) == 6


def test_failures_are_not_cached(vlm_server: VLMServer, tmp_path: Path):
    judge = vlm_server.judge(cache=tmp_path / "judge.sqlite", max_retries=1)
    vlm_server.script(server_error_forever())
    with pytest.raises(ScoringError):
        judge.ask("q", [IMAGE_A])
    assert len(judge.cache) == 0
    vlm_server.script(always("recovered"))
    assert judge.ask("q", [IMAGE_A]) == "recovered" and vlm_server.count == 3


def test_offline_mode_answers_from_the_cache_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MMVERIFY_OFFLINE", "1")
    judge = OpenAICompatibleJudge("gpt-4o", "https://judge.invalid/v1", cache=tmp_path / "judge.sqlite")
    judge.cache.put(judge._prepare("cached?", [IMAGE_A], 1024).key, judge.model_id, "Yes")
    assert judge.ask("cached?", [IMAGE_A]) == "Yes"
    with pytest.raises(ModelUnavailable, match="offline"):
        judge.ask("not cached", [IMAGE_A])


# -- concurrency and batches ----------------------------------------------------------------------
# The server holds the first `bound` requests until that many are in flight together, so reaching
# the bound does not depend on the machine's speed; its slow replies (`delay`) give a client that
# overshoots the bound every chance to show it.  Its in-flight span lies inside the client's wait for
# the reply, so a correct client can never be seen above its bound.
def test_ask_many_respects_the_concurrency_bound(vlm_server: VLMServer):
    vlm_server.delay = 0.05
    vlm_server.script(together(3, lambda request: f"echo {request.prompt}"))
    replies = vlm_server.judge(concurrency=3, timeout=120).ask_many([f"question {i}" for i in range(10)])
    assert replies == [f"echo question {i}" for i in range(10)]
    assert vlm_server.count == 10 and vlm_server.max_in_flight == 3


def test_threads_share_the_process_wide_bound(vlm_server: VLMServer):
    vlm_server.delay = 0.05
    vlm_server.script(together(2, "ok"))
    judges = [vlm_server.judge(concurrency=2, timeout=120) for _ in range(2)]  # two instances, one endpoint
    errors: list[BaseException] = []

    def ask(judge: OpenAICompatibleJudge, prompt: str) -> None:
        try:
            judge.ask(prompt)
        except BaseException as exc:  # reported below: a thread's exception would be lost
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(judges[i % 2], f"q{i}")) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and vlm_server.count == 8 and vlm_server.max_in_flight == 2


def test_ask_many_keeps_request_order_and_sends_duplicates_once(vlm_server: VLMServer):
    # later questions answer sooner, so completion order is the reverse of request order
    vlm_server.script(lambda request: Reply(content=f"reply {request.prompt}", delay=0.02 * (9 - int(request.prompt[1:]))))
    judge = vlm_server.judge(concurrency=10)
    requests = [JudgeRequest(f"q{i}", [IMAGE_A]) for i in range(10)] + ["q3", ("q3",), {"prompt": "q4"}]
    replies = judge.ask_many(requests)
    assert replies == [f"reply q{i}" for i in range(10)] + ["reply q3", "reply q3", "reply q4"]
    assert vlm_server.count == 12  # the image-less q3 asked three times went out once (q4 too)


def test_ask_many_failures_in_their_slots_or_raised(vlm_server: VLMServer):
    vlm_server.script(by_prompt({"good": "Yes"}, default=Reply(status=500, body={"error": "down"})))
    judge = vlm_server.judge(max_retries=0)
    replies = judge.ask_many(["good 1", "bad", "good 2"], return_exceptions=True)
    assert replies[0] == replies[2] == "Yes" and isinstance(replies[1], ScoringError)
    assert replies[1].code == ErrorCode.JUDGE_FAILED
    with pytest.raises(ScoringError):
        judge.ask_many(["good 1", "bad"])


def test_aask_in_a_caller_loop_and_ask_many_inside_a_running_loop(vlm_server: VLMServer):
    vlm_server.delay = 0.05
    vlm_server.script(together(2, lambda request: request.prompt.upper()))
    judge = vlm_server.judge(concurrency=2, timeout=120)

    async def main() -> tuple[list[str], list[str]]:
        gathered = await asyncio.gather(*(judge.aask(f"a{i}") for i in range(4)))
        batch = await judge.aask_many(["c0", "c1", "c0", "c2"])
        nested = judge.ask_many(["b0", "b1"])  # an async server calling the blocking helper
        await judge.aclose()
        return list(gathered) + batch, nested

    assert asyncio.run(main()) == (["A0", "A1", "A2", "A3", "C0", "C1", "C0", "C2"], ["B0", "B1"])
    assert vlm_server.max_in_flight == 2 and vlm_server.count == 9


def test_each_image_is_encoded_once_per_batch_and_bad_images_never_leave(vlm_server: VLMServer, monkeypatch: pytest.MonkeyPatch):
    import mmverify.models.judge_wire as judge_module

    calls: list[tuple[int, ...]] = []
    real = judge_module.image_data_url
    monkeypatch.setattr(judge_module, "image_data_url", lambda image: calls.append(image.shape) or real(image))
    vlm_server.script(always("Yes"))
    judge = vlm_server.judge(concurrency=8)
    judge.ask_many([(f"object {i}?", [IMAGE_A]) for i in range(6)] + [("other?", [IMAGE_B])])
    assert vlm_server.count == 7 and sorted(calls) == sorted([IMAGE_A.shape, IMAGE_B.shape])
    with pytest.raises(ValueError, match="uint8"):
        judge.ask("q", [IMAGE_A.astype(np.float64)])
    assert vlm_server.count == 7


def test_module_ask_many_works_with_any_judge():
    class Fake:
        model_id = "fake"

        def ask(self, prompt: str, images=(), *, max_tokens: int = 1024) -> str:
            if prompt == "fail":
                raise ScoringError(ErrorCode.JUDGE_FAILED, "scripted")
            return prompt[::-1]

    assert ask_many(Fake(), ["ab", ("cd", [IMAGE_A])]) == ["ba", "dc"]
    assert isinstance(ask_many(Fake(), ["fail"], return_exceptions=True)[0], ScoringError)


# -- configuration --------------------------------------------------------------------------------
@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No MMVERIFY_VLM_* variables, a private cache dir, and os.environ restored afterwards
    (the CLI writes to it directly)."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("MMVERIFY_VLM_") or n == "MMVERIFY_OFFLINE"]:
        del os.environ[name]
    os.environ["MMVERIFY_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_roles_fall_back_to_default_field_by_field():
    env = {"MMVERIFY_VLM_BASE_URL": "http://127.0.0.1:8000/v1", "MMVERIFY_VLM_MODEL": "qwen-vl", "MMVERIFY_CACHE_DIR": "/tmp/x"}
    assert {config_from_env(role, env) for role in ROLES} == {config_from_env("default", env)}
    env |= {
        "MMVERIFY_VLM_SPATIAL_MODEL": "gemini-2.5-pro",
        "MMVERIFY_VLM_SPATIAL_BASE_URL": "https://generativelanguage.googleapis.com/v1beta/openai",
        "MMVERIFY_VLM_SPATIAL_API_KEY_ENV": "GEMINI_API_KEY",
        "MMVERIFY_VLM_OCR_SECOND_MODEL": "qwen-vl-72b",
        "MMVERIFY_VLM_CONCURRENCY": "16",
    }
    spatial, second, ocr = (config_from_env(role, env) for role in ("spatial", "ocr_second", "ocr"))
    assert spatial and second and ocr
    assert (spatial.model, spatial.api_key_env) == ("gemini-2.5-pro", "GEMINI_API_KEY")
    assert spatial.base_url == "https://generativelanguage.googleapis.com/v1beta/openai"
    assert (second.model, second.base_url, second.api_key_env) == ("qwen-vl-72b", "http://127.0.0.1:8000/v1", "OPENAI_API_KEY")
    assert ocr == config_from_env("default", env) and ocr.concurrency == 16
    assert config_from_env("default", {"MMVERIFY_VLM_MODEL": "m"}) is None  # a model without an endpoint
    assert config_from_env("llm", {}) is None
    with pytest.raises(UnknownIdError, match="ocr_second"):
        config_from_env("ocr_secnd", env)
    with pytest.raises(ValueError, match="CONCURRENCY"):
        config_from_env("default", env | {"MMVERIFY_VLM_CONCURRENCY": "many"})


def test_hub_judge_by_role(vlm_env: VLMServer, monkeypatch: pytest.MonkeyPatch):
    vlm_env.script(lambda request: f"{request.model}: ok")
    hub = ModelHub()
    default = hub.judge()
    assert isinstance(default, OpenAICompatibleJudge) and default.base_url == vlm_env.url
    assert hub.judge("ocr") is default and hub.judge("llm") is default  # one instance, one bound
    monkeypatch.setenv("MMVERIFY_VLM_SPATIAL_MODEL", "spatial-judge")
    spatial = hub.judge("spatial")
    assert spatial is not default and spatial.model_id == "spatial-judge" and spatial.base_url == vlm_env.url
    assert spatial.ask("left or right?") == "spatial-judge: ok"
    assert default.ask("left or right?") == f"{MODEL}: ok"
    assert vlm_env.count == 2
    assert default.ask("left or right?") == f"{MODEL}: ok" and vlm_env.count == 2  # cached under <cache dir>
    assert Path(os.environ["MMVERIFY_CACHE_DIR"], "judge.sqlite").is_file()


def test_unconfigured_judge_is_model_unavailable(clean_env: None):
    with pytest.raises(ModelUnavailable) as excinfo:
        ModelHub().judge("spatial")
    assert excinfo.value.code == ErrorCode.MODEL_UNAVAILABLE
    assert "no judge configured" in excinfo.value.message and "--vlm-base-url" in excinfo.value.message


def test_cli_options_set_the_scoring_context(clean_env: None, tmp_path: Path):
    from mmverify.cli import app
    from mmverify.pipelines.context import current

    manifest = write_manifest(tmp_path / "m.jsonl", [])
    args = [
        "score", str(manifest), "--out", str(tmp_path / "out"), "-q",
        "--vlm-base-url", "http://127.0.0.1:8000/v1", "--vlm-model", "Qwen/Qwen2.5-VL-7B-Instruct",
        "--vlm-role", "spatial=gemini-2.5-pro@https://generativelanguage.googleapis.com/v1beta/openai",
        "--vlm-role", "ocr_second=Qwen/Qwen2.5-VL-72B-Instruct", "--vlm-concurrency", "4",
        "--vlm-api-key-env", "VLLM_KEY",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert not any(k.startswith("MMVERIFY_VLM_") for k in os.environ)  # the context carries them, not the environment
    assert {k: v for k, v in current().settings.items() if k.startswith("MMVERIFY_VLM_")} == {
        "MMVERIFY_VLM_BASE_URL": "http://127.0.0.1:8000/v1",
        "MMVERIFY_VLM_MODEL": "Qwen/Qwen2.5-VL-7B-Instruct",
        "MMVERIFY_VLM_SPATIAL_MODEL": "gemini-2.5-pro",
        "MMVERIFY_VLM_SPATIAL_BASE_URL": "https://generativelanguage.googleapis.com/v1beta/openai",
        "MMVERIFY_VLM_OCR_SECOND_MODEL": "Qwen/Qwen2.5-VL-72B-Instruct",
        "MMVERIFY_VLM_CONCURRENCY": "4",
        "MMVERIFY_VLM_API_KEY_ENV": "VLLM_KEY",
    }
    second = config_from_env("ocr_second")
    assert second is not None and second.base_url == "http://127.0.0.1:8000/v1" and second.concurrency == 4


def test_cli_rejects_bad_judge_options(clean_env: None, tmp_path: Path):
    from mmverify.cli import app

    manifest = write_manifest(tmp_path / "m.jsonl", [])
    base = ["score", str(manifest), "--out", str(tmp_path / "out"), "-q"]
    result = CliRunner().invoke(app, base + ["--vlm-role", "spacial=gemini"])
    assert result.exit_code == 2 and "spatial" in result.output
    result = CliRunner().invoke(app, base + ["--vlm-role", "ocr"])
    assert result.exit_code == 2 and "ROLE=MODEL" in result.output
    result = CliRunner().invoke(app, base + ["--vlm-concurrency", "0"])
    assert result.exit_code == 2
    assert not any(k.startswith("MMVERIFY_VLM_") for k in os.environ)


def test_apply_cli_options_validates_before_writing():
    env: dict[str, str] = {}
    with pytest.raises(KeyError):
        apply_cli_options(model="m", roles=["spatial=x", "nope=y"], environ=env)
    assert env == {}
    apply_cli_options(roles=["default=m@http://h/v1", "llm=text-model"], environ=env)
    assert env == {"MMVERIFY_VLM_MODEL": "m", "MMVERIFY_VLM_BASE_URL": "http://h/v1", "MMVERIFY_VLM_LLM_MODEL": "text-model"}


# -- the in-process transformers judge ------------------------------------------------------------
def test_transformers_judge_unavailable_for_missing_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("transformers")
    from mmverify.models.judge_local import TransformersVLMJudge

    with pytest.raises(ModelUnavailable, match="does not exist"):
        TransformersVLMJudge(str(tmp_path / "no-such-model")).ask("q")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        TransformersVLMJudge("mmverify-tests/not-a-cached-model").ask("q")


def build_tiny_qwen25_vl(folder: Path, seed: int = 0) -> Path:
    """A random-init Qwen2.5-VL (2 layers, 64 wide, byte-level vocabulary) with a real processor
    and a chat template, saved the way a downloaded checkpoint is."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2TokenizerFast,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    vocab = {symbol: i for i, symbol in enumerate(sorted(ByteLevel.alphabet()))}
    tokenizer = Qwen2TokenizerFast(vocab=vocab, merges=[], unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in specials}
    template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
        "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
        "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112),
        tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor(), chat_template=template,
    )  # fmt: skip
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, fullatt_block_indexes=[1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )  # fmt: skip
    torch.manual_seed(seed)
    Qwen2_5_VLForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def use_local_judge(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """``path`` as the default judge, run in-process (``--vlm-model transformers:PATH``) without a
    reply cache, and a fresh hub for this process (the one a serving loop in it answers with)."""
    from mmverify.models import hub

    monkeypatch.setenv("MMVERIFY_VLM_MODEL", f"transformers:{path}")
    monkeypatch.delenv("MMVERIFY_VLM_BASE_URL", raising=False)
    monkeypatch.setenv("MMVERIFY_VLM_CACHE", "off")
    monkeypatch.setattr(hub, "_HUB", None)


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return build_tiny_qwen25_vl(tmp_path_factory.mktemp("qwen25vl"))


def test_transformers_judge_answers_deterministically(tiny_qwen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from mmverify.models.judge_local import TransformersVLMJudge

    judge = TransformersVLMJudge(str(tiny_qwen), device="cpu", cache=JudgeCache(tmp_path / "judge.sqlite"))
    assert isinstance(judge, VisionLanguageJudge)
    reply = judge.ask("Is there a cat? Answer Yes or No.", [IMAGE_A], max_tokens=8)
    assert isinstance(reply, str) and reply.strip()
    fresh = TransformersVLMJudge(str(tiny_qwen), device="cpu")  # no cache: really generates again
    assert fresh.ask("Is there a cat? Answer Yes or No.", [IMAGE_A], max_tokens=8) == reply
    assert judge.ask("Is there a cat? Answer Yes or No.", [IMAGE_A], max_tokens=8) == reply and judge.cache.hits == 1
    warm = TransformersVLMJudge(str(tiny_qwen), device="cpu", cache=judge.cache)
    assert warm.ask("Is there a cat? Answer Yes or No.", [IMAGE_A], max_tokens=8) == reply
    assert not warm._loaded  # a cache hit never loads the weights
    assert fresh.ask_many(["Text only?", ("Two images?", [IMAGE_A, IMAGE_B])], return_exceptions=True)
    assert judge.model_id.startswith("transformers-vlm:")
    # selected through the hub with --vlm-model transformers:<path>, no endpoint needed
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", f"transformers:{tiny_qwen}")
    monkeypatch.delenv("MMVERIFY_VLM_BASE_URL", raising=False)
    monkeypatch.setenv("MMVERIFY_VLM_CACHE", "off")
    assert isinstance(ModelHub().judge("ocr"), TransformersVLMJudge)


def test_credentials_in_the_base_url_are_used_but_never_shown(vlm_server):
    import base64

    from mmverify.models.judge_config import judge_identities, usage_identities
    from mmverify.models.judge_usage import usage_report, usage_totals
    from tests.vlm_server import Reply

    vlm_server.queue(Reply(status=400, body={"error": {"message": "bad request from alice:s3cr3tPW"}}))
    url = vlm_server.url.replace("http://", "http://alice:s3cr3tPW@")
    judge = vlm_server.judge(base_url=url, max_retries=0)
    with pytest.raises(ScoringError) as error:
        judge.ask("hi", max_tokens=5)
    assert vlm_server.requests[0].headers["authorization"] == "Basic " + base64.b64encode(b"alice:s3cr3tPW").decode()
    env = {"MMVERIFY_VLM_BASE_URL": url, "MMVERIFY_VLM_MODEL": "m", "MMVERIFY_VLM_CACHE": "off"}
    shown = [str(error.value), repr(judge), str(usage_identities(env)), str(judge_identities(["default"], env)),
             str(usage_report(usage_totals()))]  # fmt: skip
    assert not any("s3cr3tPW" in text or "alice" in text for text in shown), shown
    assert vlm_server.url in str(error.value) and "bad request from ***" in str(error.value)


def test_malformed_bodies_are_typed_failures_and_garbled_ones_are_retried(vlm_server):
    from tests.vlm_server import Reply, chat_completion

    parts = chat_completion("unused")
    parts["choices"][0]["message"]["content"] = [{"type": "text", "text": None}, {"type": "text", "text": "Answer: Yes"}]
    vlm_server.queue(Reply(body=parts))
    assert vlm_server.judge().ask("null text part", max_tokens=5) == "Answer: Yes"
    vlm_server.reset()
    garbled = Reply(body="definitely not gzip", headers={"Content-Encoding": "gzip"})
    deep = Reply(body="[" * 200_000)
    vlm_server.queue(garbled, deep, garbled)
    with pytest.raises(ScoringError) as error:
        vlm_server.judge(max_retries=2).ask("garbled", max_tokens=5)
    assert error.value.code == ErrorCode.JUDGE_FAILED and vlm_server.count == 3  # each one retried
    assert "DecodingError" in str(error.value)


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_timeout_that_is_not_finite_is_refused(value):
    from mmverify.models.judge_config import config_from_env

    with pytest.raises(ValueError, match="MMVERIFY_VLM_TIMEOUT"):
        config_from_env("default", {"MMVERIFY_VLM_MODEL": "m", "MMVERIFY_VLM_BASE_URL": "http://127.0.0.1:9/v1", "MMVERIFY_VLM_TIMEOUT": value})
