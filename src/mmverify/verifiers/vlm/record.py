"""Asking a judge a question and keeping the exchange for the result row's evidence.

Every judged score must be auditable: which question was asked (template and filled prompt), of
which judge, what it replied word for word, and what the parser read from the reply.  A
:class:`JudgeRecord` holds those entries in asking order; tasks put :meth:`JudgeRecord.evidence` in
the row.  A reply that cannot be read raises ``judge_unparseable``; a judge that gives no reply
raises ``judge_failed`` -- either way the item becomes an ``error`` row, never a score.  Questions
of the ``mmmg`` profile may name a published reader (:mod:`.published`): it reads as the published
evaluator did, "no option found" included (None), and the entry names the reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from ...core.errors import ErrorCode, ScoringError
from ...models.protocols import VisionLanguageJudge
from .parse import parse_choice, parse_text_list, parse_verdict, parse_yes_no
from .published import READERS
from .templates import Question

Verdict = Union[bool, str, list[str]]

DEFAULT_MAX_TOKENS = 1024  # room for the step-by-step reasoning that precedes the verdict


def read_reply(question: Question, reply: str) -> Verdict | None:
    """Parse ``reply`` the way ``question`` asked to be answered, with the reader it names: the
    strict end-anchored readers, or a published reader (whose "no option found" is None)."""
    if question.reader != "end":
        if question.reader not in READERS:
            raise ValueError(f"unknown reader {question.reader!r}")
        return READERS[question.reader](reply, question.letters)  # type: ignore[return-value]
    if question.kind == "yes_no":
        return parse_yes_no(reply)
    if question.kind == "choice":
        return parse_choice(reply, question.letters)
    if question.kind == "text_list":
        return parse_text_list(reply)
    if question.kind == "verdict":
        return parse_verdict(reply)
    raise ValueError(f"unknown answer kind {question.kind!r}")


@dataclass
class JudgeRecord:
    entries: list[dict[str, Any]] = field(default_factory=list)

    def ask(
        self,
        judge: VisionLanguageJudge,
        question: Question,
        images: Sequence[np.ndarray],
        *,
        step: str,
        role: str = "default",
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> Verdict | None:
        """Ask, parse, record; ``step`` names the question within the task ("scene", "object_0").
        The verdict is None only for a published reader that found no option in the reply."""
        judge_id = str(getattr(judge, "model_id", type(judge).__name__))
        where = f"{step} ({question.template_ref}, judge {judge_id!r})"
        try:
            reply = judge.ask(question.prompt, images, max_tokens=max_tokens)
        except ScoringError as exc:
            raise ScoringError(exc.code, f"{where}: {exc.message}") from None
        except Exception as exc:  # a client that leaks a transport error still must not yield a score
            raise ScoringError(ErrorCode.JUDGE_FAILED, f"{where}: {type(exc).__name__}: {exc}") from None
        if not isinstance(reply, str):
            raise ScoringError(ErrorCode.JUDGE_FAILED, f"{where}: the judge returned {type(reply).__name__}, not text")
        try:
            verdict = read_reply(question, reply)
        except ScoringError as exc:
            raise ScoringError(exc.code, f"{where}: {exc.message}") from None
        entry = {
            "step": step,
            "template": question.template_ref,
            "role": role,
            "judge": judge_id,
            "prompt": question.prompt,
            "reply": reply,
            "verdict": verdict,
        }
        if question.reader != "end":
            entry["reader"] = question.reader
        self.entries.append(entry)
        return verdict

    def evidence(self) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self.entries]
