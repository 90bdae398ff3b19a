"""Evaluate a response against a list of instructions, in IFEval's strict or loose mode.

Strict: each instruction is checked on the response as given; an empty (whitespace-only) response
follows nothing.  Loose: an instruction counts as followed when *any* of eight variants passes -- the
response, the response without its first line, without its last line, without both, and each of those
four with every ``*`` removed (IFEval's upper bound that forgives a chatty preamble, a sign-off, or
markdown emphasis).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Literal, Mapping, Sequence, Union

from ...core.types import Check
from .base import TextChecker
from .registry import build_checker

Mode = Literal["strict", "loose"]
MODES: tuple[str, str] = ("strict", "loose")
InstructionSpec = Union[TextChecker, tuple[str, Mapping[str, Any] | None], Mapping[str, Any]]


def to_checker(spec: InstructionSpec) -> TextChecker:
    """A built checker, an ``(id, kwargs)`` pair, or ``{"id"|"instruction_id": ..., "kwargs": {...}}``."""
    if isinstance(spec, TextChecker):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
        return build_checker(spec[0], spec[1])
    if isinstance(spec, Mapping):
        ident = spec.get("id", spec.get("instruction_id"))
        if not isinstance(ident, str):
            raise ValueError(f"instruction mapping needs an 'id', got {dict(spec)!r}")
        return build_checker(ident, spec.get("kwargs"))
    raise ValueError(f"not an instruction: {spec!r}")


def response_variants(text: str, mode: Mode = "strict") -> list[str]:
    """The texts an instruction is tried on: ``[text]`` when strict, IFEval's eight when loose."""
    if mode == "strict":
        return [text]
    if mode != "loose":
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    lines = text.split("\n")
    trimmed = [
        "\n".join(lines[1:]).strip(),  # without the first line
        "\n".join(lines[:-1]).strip(),  # without the last line
        "\n".join(lines[1:-1]).strip(),  # without both
    ]
    return [text, text.replace("*", ""), *trimmed, *(t.replace("*", "") for t in trimmed)]


def follows(checker: TextChecker, text: str, mode: Mode = "strict", *, require_nonempty: bool = True) -> bool:
    """Does ``text`` follow one instruction in ``mode``?"""
    for variant in response_variants(text, mode):
        if (variant.strip() or not require_nonempty) and checker.check(variant):
            return True
    return False


def evaluate(
    text: str,
    instructions: Iterable[InstructionSpec],
    mode: Mode = "strict",
    *,
    require_nonempty: bool = True,
) -> Check:
    """Score ``text`` against every instruction: score 1.0 when all are followed, else 0.0.

    ``components`` maps each instruction id to 1.0/0.0 (a repeated id gets ``#2``, ``#3`` ...);
    ``evidence`` lists each instruction's arguments, description and verdict.  ``require_nonempty``
    (IFEval: True) makes an empty response fail every instruction; MMMG's published transcript checks
    do not have that rule, so its tasks may pass False.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    checkers = [to_checker(spec) for spec in instructions]
    if not checkers:
        raise ValueError("no instructions to evaluate")
    components: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = defaultdict(int)
    for checker in checkers:
        ok = follows(checker, text, mode, require_nonempty=require_nonempty)
        seen[checker.id] += 1
        key = checker.id if seen[checker.id] == 1 else f"{checker.id}#{seen[checker.id]}"
        components[key] = 1.0 if ok else 0.0
        rows.append({"id": key, "kwargs": dict(checker.kwargs), "description": checker.describe(), "passed": ok})
    all_ok = all(row["passed"] for row in rows)
    return Check(
        score=1.0 if all_ok else 0.0,
        passed=all_ok,
        components=components,
        evidence={"mode": mode, "all": all_ok, "instructions": rows},
    )


def evaluate_ifeval(
    text: str, instruction_id_list: Sequence[str], kwargs: Sequence[Mapping[str, Any] | None], mode: Mode = "strict"
) -> Check:
    """``evaluate`` for one IFEval input row (``instruction_id_list`` + parallel ``kwargs``)."""
    if len(instruction_id_list) != len(kwargs):
        raise ValueError(f"{len(instruction_id_list)} instruction ids but {len(kwargs)} kwargs entries")
    return evaluate(text, list(zip(instruction_id_list, kwargs)), mode)


def accuracy_report(checks: Iterable[Check]) -> dict[str, Any]:
    """IFEval's summary of many evaluated responses: prompt- and instruction-level accuracy, and the
    instruction-level accuracy per id prefix (``keywords``, ``mmmg`` ...) and per id."""
    prompts = prompt_ok = 0
    by_id: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for check in checks:
        prompts += 1
        prompt_ok += int(bool(check.passed))
        for key, value in check.components.items():
            ident = key.split("#", 1)[0]
            by_id[ident][0] += int(value == 1.0)
            by_id[ident][1] += 1
    by_prefix: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ident, (ok, total) in by_id.items():
        by_prefix[ident.split(":", 1)[0]][0] += ok
        by_prefix[ident.split(":", 1)[0]][1] += total
    followed = sum(ok for ok, _ in by_id.values())
    total = sum(n for _, n in by_id.values())
    return {
        "prompts": prompts,
        "prompt_level": prompt_ok / prompts if prompts else None,
        "instruction_level": followed / total if total else None,
        "by_prefix": {k: ok / n for k, (ok, n) in sorted(by_prefix.items())},
        "by_id": {k: ok / n for k, (ok, n) in sorted(by_id.items())},
    }
