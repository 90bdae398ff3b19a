"""JudgeRecord: asks, parses, keeps the exchange; judge failures and bad replies raise, never score."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.verifiers.vlm.record import DEFAULT_MAX_TOKENS, JudgeRecord, read_reply
from mmverify.verifiers.vlm.templates import question


class Scripted:
    model_id = "scripted-vlm"

    def __init__(self, *replies: object) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[str, int, int]] = []

    def ask(self, prompt, images=(), *, max_tokens=1024):  # type: ignore[no-untyped-def]
        self.asked.append((prompt, len(images), max_tokens))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


IMAGE = np.zeros((8, 8, 3), dtype=np.uint8)


def test_record_keeps_question_reply_and_verdict_in_order():
    judge = Scripted("A cat.\nAnswer: Yes", "1, 2, 3.\nAnswer: B", 'Reads:\n["Hello"]')
    record = JudgeRecord()
    assert record.ask(judge, question("existence", target="a cat"), [IMAGE], step="object_0") is True
    assert record.ask(judge, question("count", target="cats"), [IMAGE], step="count") == "B"
    assert record.ask(judge, question("ocr"), [IMAGE], step="ocr", role="ocr") == ["Hello"]
    assert [e["step"] for e in record.evidence()] == ["object_0", "count", "ocr"]
    first = record.evidence()[0]
    assert first == {
        "step": "object_0",
        "template": "existence@1",
        "role": "default",
        "judge": "scripted-vlm",
        "prompt": question("existence", target="a cat").prompt,
        "reply": "A cat.\nAnswer: Yes",
        "verdict": True,
    }
    assert record.evidence()[2]["role"] == "ocr"
    assert [(n, t) for _, n, t in judge.asked] == [(1, DEFAULT_MAX_TOKENS)] * 3


def test_evidence_is_a_copy():
    record = JudgeRecord()
    record.ask(Scripted("Answer: No"), question("scene", target="a beach"), [IMAGE], step="scene")
    record.evidence()[0]["verdict"] = "tampered"
    assert record.entries[0]["verdict"] is False


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (ScoringError(ErrorCode.JUDGE_FAILED, "HTTP 503 after 5 attempts"), "judge_failed"),
        (ScoringError(ErrorCode.MODEL_UNAVAILABLE, "no endpoint configured"), "model_unavailable"),
        (TimeoutError("read timed out"), "judge_failed"),
        (RuntimeError("client bug"), "judge_failed"),
    ],
)
def test_judge_errors_keep_their_code_and_name_the_question(raised, code):
    record = JudgeRecord()
    with pytest.raises(ScoringError) as info:
        record.ask(Scripted(raised), question("scene", target="a beach"), [IMAGE], step="scene")
    assert info.value.code == code
    assert "scene (scene@1, judge 'scripted-vlm')" in info.value.message
    assert record.entries == []


def test_non_text_reply_is_a_judge_failure():
    with pytest.raises(ScoringError) as info:
        JudgeRecord().ask(Scripted(None), question("scene", target="x"), [IMAGE], step="scene")
    assert info.value.code == ErrorCode.JUDGE_FAILED


def test_unparseable_reply_names_the_question_and_quotes_the_reply():
    with pytest.raises(ScoringError) as info:
        JudgeRecord().ask(Scripted("Yes\nbut really I cannot tell"), question("scene", target="x"), [IMAGE], step="scene")
    assert info.value.code == ErrorCode.JUDGE_UNPARSEABLE
    assert "scene@1" in info.value.message and "cannot tell" in info.value.message


def test_read_reply_dispatches_on_the_question_kind():
    assert read_reply(question("absence", target="x"), "Answer: Yes") is True
    assert read_reply(question("absolute", target="x"), "Answer: E") == "E"
    with pytest.raises(ScoringError):
        read_reply(question("relative_vertical", first="a", second="b"), "Answer: D")  # only A-C
    assert read_reply(question("ocr_chinese"), '["和平"]') == ["和平"]
