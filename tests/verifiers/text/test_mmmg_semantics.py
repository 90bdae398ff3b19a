"""MMMG constraint semantics: relations, normalisation, published quirks vs word matching, parsing errors."""

from __future__ import annotations

import pytest

from mmverify.verifiers.text import (
    build_checker,
    build_constraint,
    canonical_kind,
    normalize_transcript,
    parse_mmmg_annotation,
    parse_mmmg_constraint,
    parse_mmmg_turn_constraints,
    parse_relation,
)


@pytest.mark.parametrize(
    "text, holds, fails",
    [
        ("== 10", [10], [9, 11]),
        ("< 20", [0, 19], [20]),
        ("<= 25", [25], [26]),
        (">= 2", [2, 9], [1]),
        (">= 20 and count <= 35", [20, 35], [19, 36]),  # as written in the data
        ("less than 2", [1], [2]),
        ("exactly 1", [1], [0, 2]),
        ("at least three", [3], [2]),
        ("at most 4 words", [4], [5]),
        ("no more than 40", [40], [41]),
        ("fewer than 30", [29], [30]),
        ("more than 2 times", [3], [2]),
        ("between 25 and 40", [25, 40], [24, 41]),
        ("25-40", [25, 40], [24, 41]),
        ("twice", [2], [1, 3]),
        ("3", [3], [2]),
        ("= 3", [3], [4]),
        ("≥ 5", [5], [4]),
        ("count >= 1", [1], [0]),
    ],
)
def test_relation_parsing(text: str, holds: list[int], fails: list[int]) -> None:
    relation = parse_relation(text)
    assert all(relation.holds(n) for n in holds)
    assert not any(relation.holds(n) for n in fails)


def test_relation_canonical_form_and_ints() -> None:
    assert str(parse_relation(">= 20 and count <= 35")) == ">= 20 and <= 35"
    assert str(parse_relation(4)) == "== 4"


@pytest.mark.parametrize(
    "bad, match",
    [
        ("about 3", "not a count"),
        (">= -1", "non-negative"),
        (-2, "non-negative"),
        ("< 3 or > 5", "alternatives"),
        (">= 2 and", "malformed"),
        ("", "non-empty"),
        (None, "non-empty"),
        (True, "string or a count"),
        ("between 9 and 3", "empty range"),
        ("~ 3", "not a count"),
    ],
)
def test_relation_errors(bad: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_relation(bad)


def test_normaliser() -> None:
    assert normalize_transcript("It's important, we're here. Don't stop!") == "it is important we are here do not stop"
    assert normalize_transcript("A well-known café [music] (laughs) uh costs 3.5 dollars.") == (
        "a well known cafe costs 3.5 dollars"
    )
    for text in ("Hello, World!", "We won't—can't—stop.", "  spaced   out  "):
        once = normalize_transcript(text)
        assert normalize_transcript(once) == once


@pytest.mark.parametrize(
    "spelling, kind",
    [
        ("keyword_include", "keyword_include"), ("Keyword Include", "keyword_include"),
        ("keywords-include", "keyword_include"), ("mmmg:keyword_exclude", "keyword_exclude"),
        ("starts_with", "start"), ("EndsWith", "end"), ("word_count", "length_word"),
        ("keyword_frequency", "keyword_count"), ("exact", "exact_match"),
    ],
)
def test_kind_spellings(spelling: str, kind: str) -> None:
    assert canonical_kind(spelling) == kind


def test_unknown_kind_suggests() -> None:
    with pytest.raises(ValueError, match="Did you mean 'keyword_include'"):
        canonical_kind("keyword_inclde")
    with pytest.raises(ValueError, match="unknown MMMG constraint kind"):
        canonical_kind("rhyme_scheme")
    with pytest.raises(ValueError, match="must be a string"):
        canonical_kind(3)


@pytest.mark.parametrize(
    "spec, match",
    [
        (["keyword_count", "data"], "takes 2 argument"),
        (["length_word"], "takes 1 argument"),
        (["length_word", "lots"], "not a count"),
        (["exact_match", "a", "b"], "takes 1 argument"),
        (["keyword_include"], "at least one keyword"),
        (["start", "!!!"], "empty after normalisation"),
        (["end", ""], "must not be empty"),
        ("keyword_include", "must be a list"),
        ([], "must be a list"),
        ({"0": ["start", "x"]}, "parse_mmmg_turn_constraints"),
    ],
)
def test_bad_constraints(spec: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_mmmg_constraint(spec)


def test_nested_keyword_lists_and_options() -> None:
    (checker,) = parse_mmmg_constraint(["keyword_include", ["curiosity", "discovery"]])
    assert checker.kwargs["keywords"] == ["curiosity", "discovery"]
    with pytest.raises(ValueError, match="semantics"):
        build_constraint(["start", "hi"], semantics="fuzzy")
    with pytest.raises(ValueError, match="callable"):
        build_constraint(["start", "hi"], normalizer="lower")


def test_turn_constraints() -> None:
    turns = parse_mmmg_turn_constraints({"3": ["end", "for all"], "1": [["start", "hi"], ["length_word", "< 5"]]}, n_turns=4)
    assert list(turns) == [1, 3] and len(turns[1]) == 2
    with pytest.raises(ValueError, match="outside the 3 turns"):
        parse_mmmg_turn_constraints({"3": ["end", "x"]}, n_turns=3)
    with pytest.raises(ValueError, match="non-negative integer"):
        parse_mmmg_turn_constraints({"first": ["end", "x"]})
    with pytest.raises(ValueError, match="twice"):
        parse_mmmg_turn_constraints({"1": ["end", "x"], " 1": ["end", "y"]})
    with pytest.raises(ValueError, match="non-empty mapping"):
        parse_mmmg_turn_constraints({})
    with pytest.raises(ValueError, match="no 'constraint'"):
        parse_mmmg_annotation({"instruction": "x"})
    # i_spacial_* rows spell the field "constraints"; the parser accepts either
    assert len(parse_mmmg_annotation({"constraints": ["start", "hi"]})) == 1


def test_published_quirks_and_word_semantics() -> None:
    # capitalised keywords never match the lower-cased transcript in the published pipeline
    published = build_checker("mmmg:keyword_exclude", {"keywords": ["NASA", "Mars"]})
    word = build_checker("mmmg:keyword_exclude", {"keywords": ["NASA", "Mars"], "semantics": "word"})
    assert published.check("NASA will fly to Mars.") is True
    assert word.check("NASA will fly to Mars.") is False
    assert word.check("Our agency will fly far away.") is True
    # substring matching: "AI" inside "said" does not trip the word semantics
    assert build_checker("mmmg:keyword_exclude", {"keywords": ["AI"], "semantics": "word"}).check("She said so.")
    # prefix / suffix tests without word boundaries
    start_pub = build_checker("mmmg:start", {"phrase": "Art"})
    start_word = build_checker("mmmg:start", {"phrase": "Art", "semantics": "word"})
    assert start_pub.check("Artists inspire us.") and not start_word.check("Artists inspire us.")
    assert start_word.check("Art, inspires us.")
    end_pub = build_checker("mmmg:end", {"phrase": "for all"})
    end_word = build_checker("mmmg:end", {"phrase": "for all", "semantics": "word"})
    assert end_pub.check("Justice is the goal for all.") and end_word.check("Justice is the goal for all.")
    assert end_pub.check("Justice is the goal, fortune for all") and end_word.check("fortune for all")
    assert end_pub.check("a goal comfor all") and not end_word.check("a goal comfor all")
    # counts: substrings in the published pipeline, whole words otherwise
    count_pub = build_checker("mmmg:keyword_count", {"keyword": "courage", "relation": "== 2"})
    count_word = build_checker("mmmg:keyword_count", {"keyword": "courage", "relation": "== 2", "semantics": "word"})
    text = "Courage! We encourage courage."
    assert count_pub.count(text) == 3 and count_word.count(text) == 2
    assert not count_pub.check(text) and count_word.check(text)


def test_exact_match_ignores_case_and_punctuation_only() -> None:
    checker = build_checker("mmmg:exact_match", {"text": "Society demands collaboration. Cooperation requires patience."})
    assert checker.check("society demands collaboration, cooperation requires patience")
    assert not checker.check("Society demands collaboration. Cooperation requires more patience.")


def test_length_word_counts_like_word_tokenize() -> None:
    published = build_checker("mmmg:length_word", {"relation": "== 7"})
    # contractions are expanded by the normaliser (do not = 2 words), hyphens split words
    assert published.count("Don't stop the well-known song.") == 7  # do not stop the well known song
    # a decimal number is not alphanumeric: the published filter skips it, the word semantics counts it
    word = build_checker("mmmg:length_word", {"relation": "== 3", "semantics": "word"})
    assert published.count("It costs 3.5") == 2 and word.count("It costs 3.5") == 3
    # without normalisation, Treebank tokens decide: punctuation is not a word, "n't" is
    raw = build_checker("mmmg:length_word", {"relation": "== 4", "normalizer": lambda s: s})
    assert raw.count("Don't stop, now!") == 4
