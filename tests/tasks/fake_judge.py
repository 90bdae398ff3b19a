"""A scripted stand-in for the VLM judge: recognises which template a prompt was filled from,
replies by rules, records every call, and can fail the way a real client fails.

    judges = install(monkeypatch)                     # every role answered by judges["default"]
    judges["default"].on("scene", yes()).on("existence", no(), target="tents")
    judges["spatial"] = FakeJudge("spatial-vlm").on("relative_horizontal", letter("A"))
"""

from __future__ import annotations

import hashlib
import json
import re
import string
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.verifiers.vlm.templates import TEMPLATES, Template

Reply = Union[str, BaseException, Callable[[str, dict], str]]


class UnscriptedPrompt(BaseException):
    """A prompt no rule answers: a BaseException, so no scorer can turn it into a row."""


def yes(reasoning: str = "I looked at the image.") -> str:
    return f"{reasoning}\nAnswer: Yes"


def no(reasoning: str = "I looked at the image.") -> str:
    return f"{reasoning}\nAnswer: No"


def letter(choice: str, reasoning: str = "Counting and comparing.") -> str:
    return f"{reasoning}\nAnswer: {choice}"


def texts(items: Sequence[str], reasoning: str = "The image shows some text.") -> str:
    return f"{reasoning}\n{json.dumps(list(items), ensure_ascii=False)}"


def verdict(value: str, reasoning: str = "Criterion 1: the nodes are right. MET") -> str:
    """A reply to a criteria question ending with ``VERDICT: <value>`` (PASS or FAIL)."""
    return f"{reasoning}\n**VERDICT: {value}**"


def failed(message: str = "HTTP 500 after 5 attempts") -> ScoringError:
    return ScoringError(ErrorCode.JUDGE_FAILED, message)


def _pattern(text: str) -> re.Pattern[str]:
    """The template text as a regex whose named groups capture the filled-in values."""
    out, seen = [], set()
    for literal, name, _, _ in string.Formatter().parse(text):
        out.append(re.escape(literal))
        if name is not None:
            out.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
            seen.add(name)
    return re.compile("".join(out), re.DOTALL)


_PATTERNS = {tid: _pattern(t.text) for tid, t in TEMPLATES.items()}
_AUTO = {"yes_no": yes(), "choice": letter("A"), "text_list": texts(["text"])}
_AUTO["verdict"] = verdict("PASS")


def learn(monkeypatch: Any, templates: Mapping[str, Template]) -> None:
    """Let the scripted judge also recognise prompts filled from ``templates`` (templates kept
    outside ``TEMPLATES``, such as the coherence or code ones), for the rest of the test."""
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "_PATTERNS", {**module._PATTERNS, **{tid: _pattern(t.text) for tid, t in templates.items()}})
    monkeypatch.setattr(module, "TEMPLATES", {**module.TEMPLATES, **templates})


def identify(prompt: str) -> tuple[str, dict[str, str]]:
    """Which template ``prompt`` was filled from, and with which values."""
    matches = [(tid, m.groupdict()) for tid, p in _PATTERNS.items() if (m := p.fullmatch(prompt))]
    assert len(matches) == 1, f"prompt matches {len(matches)} templates: {prompt[:200]!r}"
    return matches[0]


@dataclass
class Call:
    template: str
    values: dict[str, str]
    prompt: str
    image_digests: list[str]
    max_tokens: int
    reply: str | None = None


@dataclass
class FakeJudge:
    model_id: str = "fake-vlm"
    auto: bool = False  # unmatched prompts get a well-formed reply of the template's kind
    rules: list[tuple[str | None, dict[str, str], Reply]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    images: list[list[np.ndarray]] = field(default_factory=list)

    def on(self, template: str | None, reply: Reply, **contains: str) -> "FakeJudge":
        """Answer prompts of ``template`` (None: any) whose values contain the given substrings;
        rules are tried in the order they were added."""
        self.rules.append((template, contains, reply))
        return self

    def ask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str:
        template, values = identify(prompt)
        digests = [hashlib.sha256(np.ascontiguousarray(im).tobytes()).hexdigest()[:16] for im in images]
        call = Call(template, values, prompt, digests, max_tokens)
        self.calls.append(call)
        self.images.append([np.array(im) for im in images])
        for rule_template, contains, reply in self.rules:
            if rule_template not in (None, template):
                continue
            if all(needle in values.get(key, "") for key, needle in contains.items()):
                break
        else:
            if not self.auto:
                raise UnscriptedPrompt(f"{self.model_id}: no rule for {template} {values}")
            reply = _AUTO[TEMPLATES[template].kind]
        if isinstance(reply, BaseException):
            raise reply
        text = reply(prompt, values) if callable(reply) else reply
        call.reply = text
        return text

    def templates_asked(self) -> list[str]:
        return [call.template for call in self.calls]


class Judges(dict):
    """Role -> FakeJudge; roles without their own judge fall back as the hub's configuration does
    (``spatial_relative`` -> ``spatial`` -> ``default``)."""

    def for_role(self, role: str) -> FakeJudge:
        from mmverify.models.judge_config import role_chain

        return next(self[name] for name in role_chain(role) if name in self)

    def all_calls(self) -> list[Call]:
        seen, calls = set(), []
        for judge in self.values():
            if id(judge) not in seen:
                seen.add(id(judge))
                calls.extend(judge.calls)
        return calls


def install(monkeypatch: Any, default: FakeJudge | None = None, **roles: FakeJudge) -> Judges:
    """Make ``get_hub().judge(role)`` return these fakes for the rest of the test."""
    from mmverify.models import hub as hub_module

    judges = Judges(default=default or FakeJudge(), **roles)
    monkeypatch.setattr(hub_module, "_HUB", hub_module.ModelHub())  # no on-disk caches from the environment
    monkeypatch.setattr(hub_module.ModelHub, "judge", lambda self, role="default": judges.for_role(role), raising=False)
    return judges
