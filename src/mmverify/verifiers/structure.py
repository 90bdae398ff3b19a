"""Modality order: does the response's sequence of text/image/audio parts match an allowed order?

A response is reduced to letters (``t`` text, ``i`` image, ``a`` audio) with consecutive text merged
and whitespace-only text between media ignored.  Published quirk kept in version 1: text *before the
first media part* counts even when it is only whitespace (the published code compares the leading
text with "" without stripping); ``strip_leading_text=True`` drops that quirk.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..core.types import Check

LETTERS = {"text": "t", "image": "i", "audio": "a"}


def modality_sequence(parts: Iterable[tuple[str, str]], *, strip_leading_text: bool = False) -> str:
    """``parts`` are ``(type, text)`` pairs in response order; returns e.g. ``"tit"``.  Consecutive
    text parts are one ``t`` when, joined, they are not empty (not blank, after media or with
    ``strip_leading_text``); only whether they are is kept, never the joined text."""
    letters: list[str] = []
    any_text = visible_text = seen_media = False

    def flush() -> None:
        if visible_text if (seen_media or strip_leading_text) else any_text:
            letters.append("t")

    for kind, text in parts:
        if kind not in LETTERS:
            raise ValueError(f"unknown part type {kind!r}")
        if kind == "text":
            any_text = any_text or text != ""
            visible_text = visible_text or text.strip() != ""
            continue
        flush()
        any_text = visible_text = False
        seen_media = True
        letters.append(LETTERS[kind])
    flush()
    return "".join(letters)


def check_order(sequence: str, allowed: Sequence[str]) -> Check:
    """1 when ``sequence`` is exactly one of ``allowed``, else 0."""
    if not allowed:
        raise ValueError("allowed orders must not be empty")
    ok = sequence in allowed
    return Check(
        score=1.0 if ok else 0.0,
        passed=ok,
        evidence={"sequence": sequence, "allowed": list(allowed)},
    )
