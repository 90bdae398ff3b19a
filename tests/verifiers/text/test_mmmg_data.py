"""Every MMMG constraint row (a_speech_constraint, a_speech_modify, a_consistency_conversation) parses
and scores transcripts built to pass it and, constraint by constraint, to fail it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from mmverify.verifiers.text import evaluate, parse_mmmg_annotation
from mmverify.verifiers.text.mmmg import (
    End,
    ExactMatch,
    KeywordCount,
    KeywordExclude,
    KeywordInclude,
    LengthWord,
    MmmgChecker,
    Start,
)

FILES = ("a_speech_constraint", "a_speech_modify", "a_consistency_conversation")
FILLER = (
    "we share this moment with hope and kindness for one another every single day people learn build "
    "bright paths open minds gentle voices rise here now"
).split()


def rows(root: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for name in FILES:
        with open(root / f"{name}.jsonl", encoding="utf-8") as handle:
            for index, line in enumerate(handle):
                if line.strip():
                    yield name, index, json.loads(line)


def constraint_sets(parsed: Any) -> list[list[MmmgChecker]]:
    return list(parsed.values()) if isinstance(parsed, dict) else [parsed]


def _first(n_range: range, ok: Any) -> int | None:
    return next((n for n in n_range if ok(n)), None)


def synthesize(checkers: list[MmmgChecker], violate: int | None = None) -> str | None:
    """A transcript that meets every checker except number ``violate``, which it breaks.

    None when that checker cannot be broken (a published-semantics exclusion of a capitalised word).
    """
    bad = checkers[violate] if violate is not None else None
    exact = [c for c in checkers if isinstance(c, ExactMatch)]
    if exact:
        assert len(checkers) == 1, "exact_match is never combined in MMMG's data"
        return ("indeed " + exact[0].target) if bad is exact[0] else exact[0].target
    avoid = [k.lower() for c in checkers if isinstance(c, (KeywordInclude, KeywordExclude)) for k in c.keywords]
    avoid += [c.keyword.lower() for c in checkers if isinstance(c, KeywordCount)]
    filler = [w for w in FILLER if not any(k in w for k in avoid)]
    prefix: list[str] = []
    body: list[str] = []
    suffix: list[str] = []
    for c in checkers:
        broken = c is bad
        if isinstance(c, Start):
            prefix = (["so"] if broken else []) + c.phrase.split()
        elif isinstance(c, End):
            suffix = c.phrase.split() + (["today"] if broken else [])
        elif isinstance(c, KeywordInclude):
            body += [k.lower() for k in (c.keywords[1:] if broken else c.keywords)]
        elif isinstance(c, KeywordExclude) and broken:
            usable = [k for k in c.keywords if c.semantics == "word" or k == k.lower()]
            if not usable:
                return None
            body.append(usable[0].lower())
        elif isinstance(c, KeywordCount):
            n = _first(range(0, 60), lambda k: c.relation.holds(k) != broken)
            body += [c.keyword.lower()] * (n or 0)
    fixed = len(" ".join(prefix + body + suffix).split())
    lengths = [c for c in checkers if isinstance(c, LengthWord)]
    total = fixed + 3
    for c in lengths:
        found = _first(range(max(fixed, 3), fixed + 200), lambda t: c.relation.holds(t) != (c is bad))
        if found is None:
            return None
        total = found
    pad = [filler[i % len(filler)] for i in range(total - fixed)]
    return " ".join(prefix + body + pad + suffix)


def test_constraint_kinds_in_the_data(mmmg_instructions: Path) -> None:
    kinds: Counter[str] = Counter()
    relations: Counter[str] = Counter()
    for _, _, row in rows(mmmg_instructions):
        spec = row["constraint"]
        for item in (spec.values() if isinstance(spec, dict) else [spec]):
            for one in (item if isinstance(item[0], list) else [item]):
                kinds[one[0]] += 1
                if one[0] in ("keyword_count", "length_word"):
                    relations[one[-1]] += 1
    assert kinds == {
        "exact_match": 22, "keyword_count": 11, "length_word": 12, "keyword_include": 9,
        "keyword_exclude": 9, "start": 8, "end": 7,
    }
    # the published pipeline evaluates "count <relation>" as code, hence the "and count" ranges
    assert relations[">= 20 and count <= 35"] == 1 and relations[">= 25 and count <= 40"] == 1
    assert set(relations) == {"== 10", "< 20", "== 3", "== 2", ">= 2", "<= 25", "<= 10", "== 25", ">= 15",
                              ">= 3", ">= 20 and count <= 35", "<= 40", ">= 25 and count <= 40", "== 1", "< 30"}


@pytest.mark.parametrize("semantics", ["published", "word"])
def test_every_row_parses(mmmg_instructions: Path, semantics: str) -> None:
    count = 0
    for name, index, row in rows(mmmg_instructions):
        parsed = parse_mmmg_annotation(row, semantics=semantics)
        if name == "a_consistency_conversation":
            assert isinstance(parsed, dict) and parsed
            assert all(0 <= turn < len(row["order"]) for turn in parsed)
        else:
            assert isinstance(parsed, list) and parsed
        count += sum(len(s) for s in constraint_sets(parsed))
    assert count == 78


@pytest.mark.parametrize("semantics", ["published", "word"])
def test_every_row_passes_and_fails_on_built_transcripts(mmmg_instructions: Path, semantics: str) -> None:
    unbreakable = []
    for name, index, row in rows(mmmg_instructions):
        for checkers in constraint_sets(parse_mmmg_annotation(row, semantics=semantics)):
            good = synthesize(checkers)
            assert good is not None
            result = evaluate(good, checkers)
            assert result.passed, (name, index, good, result.evidence)
            for i, checker in enumerate(checkers):
                text = synthesize(checkers, violate=i)
                if text is None:
                    unbreakable.append((name, index, checker.kwargs["keywords"]))
                    continue
                verdicts = [c.check(text) for c in checkers]
                assert verdicts == [j != i for j in range(len(checkers))], (name, index, i, text)
                assert evaluate(text, checkers).score == 0.0
    if semantics == "published":
        # capitalised keywords never match the lower-cased transcript in the published pipeline
        assert unbreakable == [("a_speech_constraint", 1, ["NASA", "Mars"])]
    else:
        assert unbreakable == []


HANDCRAFTED = [
    # (file, line, transcript, passes)
    ("a_speech_constraint", 0, "Renewable energy gives our future a cleaner sky.", True),
    ("a_speech_constraint", 0, "Renewable energy gives us a cleaner sky.", False),
    ("a_speech_constraint", 2, "We celebrate diversity because every voice makes us all stronger.", True),
    ("a_speech_constraint", 2, "We celebrate diversity because every single voice makes us all stronger.", False),
    ("a_speech_constraint", 4, "Education opens doors to every child in every town.", True),
    ("a_speech_constraint", 4, "Truly, education opens doors to every child.", False),
    ("a_speech_constraint", 5, "When we give our time, we all grow.", True),
    ("a_speech_constraint", 5, "When we give our time, we all grow together.", False),
    ("a_speech_constraint", 6, "Fresh produce, fresh produce, and more fresh produce keep us healthy.", True),
    ("a_speech_constraint", 6, "Fresh produce and more fresh produce keep us healthy.", False),
    ("a_speech_constraint", 13, "Jobs and wages must grow for all.", True),
    ("a_speech_constraint", 13, "Without inflation, jobs and wages must grow for all.", False),
    ("a_speech_modify", 15, "We need to work together. It's important that communities listen and understand "
                            "each other.", True),
    ("a_speech_modify", 15, "We need to work together. It is important that communities listen.", False),
]


@pytest.mark.parametrize("name, line, transcript, passes", HANDCRAFTED)
def test_handcrafted_transcripts(mmmg_instructions: Path, name: str, line: int, transcript: str, passes: bool) -> None:
    row = next(r for n, i, r in rows(mmmg_instructions) if n == name and i == line)
    checkers = parse_mmmg_annotation(row)
    assert isinstance(checkers, list)
    assert evaluate(transcript, checkers).passed is passes


def test_handcrafted_conversation_turns(mmmg_instructions: Path) -> None:
    # line 9: Victoria's second turn (index 2) starts with "Contrary to your point"; James' last turn
    # (index 4) says "design" exactly twice
    row = next(r for n, i, r in rows(mmmg_instructions) if n == "a_consistency_conversation" and i == 9)
    turns = parse_mmmg_annotation(row)
    assert isinstance(turns, dict) and sorted(turns) == [2, 4]
    assert evaluate("Contrary to your point, density helps.", turns[2]).passed
    assert not evaluate("I think, contrary to your point, density helps.", turns[2]).passed
    assert evaluate("Good design is sustainable design.", turns[4]).passed
    assert not evaluate("Good design matters.", turns[4]).passed
    # line 2: between 20 and 35 words, written as ">= 20 and count <= 35"
    row = next(r for n, i, r in rows(mmmg_instructions) if n == "a_consistency_conversation" and i == 2)
    (checker,) = parse_mmmg_annotation(row)[2]
    assert not checker.check(" ".join(["word"] * 19)) and checker.check(" ".join(["word"] * 20))
    assert checker.check(" ".join(["word"] * 35)) and not checker.check(" ".join(["word"] * 36))


def test_whisper_normaliser_agrees_on_the_data_phrases(mmmg_instructions: Path) -> None:
    pytest.importorskip("whisper.normalizers")
    from mmverify.verifiers.text import normalize_transcript, whisper_normalizer

    whisper = whisper_normalizer()
    differ = set()
    for _, _, row in rows(mmmg_instructions):
        for checkers in constraint_sets(parse_mmmg_annotation(row)):
            for c in checkers:
                phrases = [c.kwargs[k] for k in ("text", "phrase") if k in c.kwargs]
                phrases += c.kwargs.get("keywords", [])
                for phrase in phrases:
                    if whisper(phrase) != normalize_transcript(phrase):
                        differ.add(phrase)
    # the bundled normaliser differs only where Whisper rewrites British spelling ("dialogue")
    assert len(differ) == 1 and "dialogue" in next(iter(differ))
    # and a checker built with Whisper's normaliser scores the same transcript identically
    row = next(r for n, i, r in rows(mmmg_instructions) if n == "a_speech_modify" and i == 15)
    (checker,) = parse_mmmg_annotation(row, normalizer=whisper)
    assert checker.check("We need to work together. It's important that communities listen and understand each other.")
    assert checker.kwargs["normalizer"] == "EnglishTextNormalizer"
