"""``evaluate``: strict vs loose modes (IFEval's evaluation_lib semantics) and the Check it returns."""

from __future__ import annotations

import json

import pytest

from mmverify.core.types import Check
from mmverify.verifiers.text import (
    accuracy_report,
    build_checker,
    evaluate,
    evaluate_ifeval,
    follows,
    response_variants,
)

from .test_ifeval_parity import CASES


@pytest.mark.parametrize(
    "ident, kwargs, response, strict, loose",
    [
        # a chatty first line breaks "wrap everything in quotes"; loose drops the first line
        ("startend:quotation", None, 'Sure, here it is:\n"All of my answer is quoted."', False, True),
        # a sign-off after the required ending; loose drops the last line
        ("startend:end_checker", {"end_phrase": "Any other questions?"},
         "The answer is 42. Any other questions?\nHope this helps!", False, True),
        # first and last lines both chatty: only the remove-both variant passes
        ("startend:quotation", None, 'Here you go:\n"Quoted answer."\nCheers!', False, True),
        # markdown emphasis around the repeated prompt; loose removes asterisks
        ("combination:repeat_prompt", {"prompt_to_repeat": "Write a haiku about rain."},
         "**Write a haiku about rain.** Rain taps the window.", False, True),
        # a JSON body after an introduction
        ("detectable_format:json_format", None, 'Here is the JSON:\n{"name": "x"}', False, True),
        # loose cannot rescue a comma in the middle of the text
        ("punctuation:no_comma", None, "First line\nsecond, third\nlast line", False, False),
        # both pass when the response is clean
        ("keywords:existence", {"keywords": ["rain"]}, "Rain again.", True, True),
        # removing asterisks can also *hurt* a variant; loose still passes through the original text
        ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "A *key* point.", True, True),
    ],
)
def test_strict_and_loose(ident: str, kwargs: dict | None, response: str, strict: bool, loose: bool) -> None:
    checker = build_checker(ident, kwargs)
    assert follows(checker, response, "strict") is strict
    assert follows(checker, response, "loose") is loose
    assert evaluate(response, [checker], "strict").score == float(strict)
    assert evaluate(response, [checker], "loose").score == float(loose)


def test_loose_variants_are_ifevals_eight() -> None:
    variants = response_variants("first *a*\nmiddle\nlast", "loose")
    assert variants == [
        "first *a*\nmiddle\nlast",
        "first a\nmiddle\nlast",
        "middle\nlast",
        "first *a*\nmiddle",
        "middle",
        "middle\nlast",
        "first a\nmiddle",
        "middle",
    ]
    assert response_variants("x", "strict") == ["x"]
    with pytest.raises(ValueError, match="mode"):
        response_variants("x", "lenient")  # type: ignore[arg-type]


@pytest.mark.parametrize("ident, kwargs, response, expected", CASES)
def test_loose_never_below_strict(ident: str, kwargs: dict | None, response: str, expected: bool) -> None:
    checker = build_checker(ident, kwargs)
    if follows(checker, response, "strict"):
        assert follows(checker, response, "loose")


def test_empty_response_follows_nothing_unless_allowed() -> None:
    # IFEval: `if response.strip() and instruction.check_following(response)`
    checker = build_checker("punctuation:no_comma")
    assert checker.check("   ") is True
    for mode in ("strict", "loose"):
        assert follows(checker, "   ", mode) is False  # type: ignore[arg-type]
        assert follows(checker, "   ", mode, require_nonempty=False) is True  # type: ignore[arg-type]
    assert evaluate("", [checker], require_nonempty=False).passed is True


def test_evaluate_returns_a_check_with_components_and_evidence() -> None:
    text = "My answer is yes. Rain falls softly on the quiet town"
    result = evaluate(
        text,
        [
            ("detectable_format:constrained_response", None),
            {"id": "keywords:existence", "kwargs": {"keywords": ["rain"]}},
            {"instruction_id": "keywords:existence", "kwargs": {"keywords": ["snow"]}},
            build_checker("punctuation:no_comma"),
        ],
        "strict",
    )
    assert isinstance(result, Check)
    assert result.score == 0.0 and result.passed is False
    assert result.components == {
        "detectable_format:constrained_response": 1.0,
        "keywords:existence": 1.0,
        "keywords:existence#2": 0.0,
        "punctuation:no_comma": 1.0,
    }
    assert result.evidence["mode"] == "strict" and result.evidence["all"] is False
    rows = result.evidence["instructions"]
    assert [r["passed"] for r in rows] == [True, True, False, True]
    assert rows[2]["kwargs"] == {"keywords": ["snow"]} and "snow" in rows[2]["description"]
    json.dumps(result.evidence)  # evidence goes into results.jsonl rows


def test_evaluate_all_pass_scores_one() -> None:
    result = evaluate("hello world", [("change_case:english_lowercase", None), ("punctuation:no_comma", {})])
    assert result.score == 1.0 and result.passed is True and result.evidence["all"] is True


def test_evaluate_ifeval_row_and_report() -> None:
    # the shape of one row of IFEval's input_data.jsonl: unused arguments are listed as null
    ids = ["keywords:frequency", "length_constraints:number_words"]
    kwargs = [
        {"keyword": "rain", "frequency": 2, "relation": "at least", "num_words": None},
        {"num_words": 5, "relation": "less than", "keyword": None},
    ]
    good = evaluate_ifeval("Rain, rain, go away.", ids, kwargs)
    bad = evaluate_ifeval("Rain is nice today for everyone here.", ids, kwargs)
    assert good.passed and not bad.passed
    report = accuracy_report([good, bad])
    assert report["prompts"] == 2 and report["prompt_level"] == 0.5
    assert report["instruction_level"] == 0.5
    assert report["by_prefix"] == {"keywords": 0.5, "length_constraints": 0.5}
    assert report["by_id"]["keywords:frequency"] == 0.5
    with pytest.raises(ValueError, match="kwargs entries"):
        evaluate_ifeval("x", ids, kwargs[:1])


def test_evaluate_rejects_bad_calls() -> None:
    with pytest.raises(ValueError, match="no instructions"):
        evaluate("text", [])
    with pytest.raises(ValueError, match="mode"):
        evaluate("text", [("punctuation:no_comma", None)], "medium")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not an instruction"):
        evaluate("text", [42])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="needs an 'id'"):
        evaluate("text", [{"kwargs": {}}])
    with pytest.raises(ValueError, match="string"):
        evaluate(b"bytes", [("punctuation:no_comma", None)])  # type: ignore[arg-type]
