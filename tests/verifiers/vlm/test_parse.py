"""Verdicts are read from the end of a reply only; anything else is judge_unparseable."""

from __future__ import annotations

import pytest

from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.verifiers.vlm.parse import excerpt, parse_choice, parse_text_list, parse_yes_no


def unparseable(parse, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ScoringError) as info:
        parse(*args)
    assert info.value.code == ErrorCode.JUDGE_UNPARSEABLE
    return info.value.message


# -- yes / no --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("No, wait... Answer: Yes", True),
        ("No, there is no balloon at first sight.\nLooking again, it is in the top corner.\nAnswer: Yes", True),
        ("Yes, a cat is visible... but it has stripes, not spots.\nAnswer: No", False),
        ("**Answer:** No", False),
        ("**Answer**: **Yes**", True),
        ("Answer: [Yes]", True),
        ("answer: yes.", True),
        ("Final answer - No", False),
        ("ANSWER：Yes", True),  # full-width colon
        ("Reasoning...\nThe answer is yes.", True),
        ("Reasoning...\nNo.", False),
        ("Reasoning...\n`Yes`", True),
        ("Answer: Yes\n\nNote: the balloon is small.", True),  # a note after the answer line
        ("Answer: No\nAnswer: Yes", True),  # the last verdict wins
        ("Answer: No - it is missing", False),
        ("Answer: Yes, the balloon is there.", True),
        ("To answer: I look closely.\nNo.", False),  # an earlier 'answer:' in the reasoning is ignored
    ],
)
def test_yes_no_reads_the_final_verdict(reply, verdict):
    assert parse_yes_no(reply) is verdict


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   \n  ",
        "Yes\nThe image shows a beach, some people and a large balloon over the sea",  # verdict first, then prose
        "Yes, there is a balloon. It is red and round.",  # prose on the last line
        "Answer: Maybe",
        "Answer: Yes or No",
        "Answer: Not sure",
        "Answer: Yes\nAnswer: unclear",  # an earlier marker never stands in for a malformed last one
        "I cannot tell; there is no way to say yes",
        "Answer: 是",
    ],
)
def test_yes_no_refuses_anything_else(reply):
    message = unparseable(parse_yes_no, reply)
    if reply.strip():
        assert excerpt(reply)[-15:] in message
    else:
        assert "empty reply" in message


# -- multiple choice --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("I count 1, 2, 3, 4. A would be too few.\nAnswer: C", "C"),
        ("Answer: (B)", "B"),
        ("**Answer: D. 5**", "D"),
        ("Answer: F) more than 6", "F"),
        ("Answer: E - centre", "E"),
        ("Answer: b", "B"),  # a lone lower-case letter
        ("Options considered: A, B.\nB", "B"),  # a last line that is just the letter
        ("Answer: A\nThat is my final choice.", "A"),
        ("Answer: A\nAnswer: C", "C"),
    ],
)
def test_choice_reads_the_final_letter(reply, letter):
    assert parse_choice(reply, "ABCDEF") == letter


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Answer: G",  # not an option
        "Answer: a bottom-left quarter",  # 'a' the article is not option A
        "I think A or B",
        "Answer: B or C",
        "The answer is clearly option B because it has three.",
        "Answer: C\nAnswer: none of them",
    ],
)
def test_choice_refuses_anything_else(reply):
    unparseable(parse_choice, reply, "ABCDEF")


def test_choice_respects_the_allowed_letters():
    assert parse_choice("Answer: C", "ABC") == "C"
    unparseable(parse_choice, "Answer: D", "ABC")
    with pytest.raises(ValueError):
        parse_choice("Answer: A", ["AB"])


# -- lists of strings -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "items"),
    [
        ('["Hello"]', ["Hello"]),
        ("[]", []),
        ('The sign reads "Hello".\n["Hello", "World"]', ["Hello", "World"]),
        ('Example: ["first line"]\nActual:\n```json\n["Stay bold", "chase dreams"]\n```', ["Stay bold", "chase dreams"]),
        ('Text: ["Open"] and nothing else.', ["Open"]),
        ('["和平", "梦想"]', ["和平", "梦想"]),
        ('["\\u548c\\u5e73"]', ["和平"]),
        ('[98105, "WA"]', ["98105", "WA"]),
        ('["a [b] c"]', ["a [b] c"]),
    ],
)
def test_text_list_reads_the_last_json_list(reply, items):
    assert parse_text_list(reply) == items


@pytest.mark.parametrize(
    "reply",
    ["", "Hello World", "['Hello']", '[["a"], ["b"]]', '[{"text": "a"}]', '["a", true]', '["unterminated', '["a"]\n[1, [2]]'],
)
def test_text_list_refuses_anything_else(reply):
    unparseable(parse_text_list, reply)


def test_excerpt_keeps_the_end():
    long = "x" * 500 + "THE END"
    assert excerpt(long).endswith("THE END") and len(excerpt(long)) <= 201
    assert excerpt("  short  ") == "short"


PUBLISHED_LINE = (  # the verdict-line expression before its blanks were made one run
    r"(?:(?:the\s+)?(?:final\s+)?(?:answer|verdict|conclusion)(?:\s+is)?\s*[:：\-]?\s*)?[\"'(\[]?(yes|no)[\"')\]]?[.!]?"
)


@pytest.mark.parametrize("seed", range(300))
def test_the_verdict_line_reads_as_the_two_run_expression_read_it(seed):
    import random
    import re

    from mmverify.verifiers.vlm.parse import _YES_NO_LINE

    rng = random.Random(seed)
    line = "".join(rng.choice(["answer", " is", " ", "  ", ":", "-", "yes", "No", ".", "(", "final ", "x"]) for _ in range(rng.randint(0, 7)))
    before = re.fullmatch(PUBLISHED_LINE, line, re.IGNORECASE)
    after = _YES_NO_LINE.fullmatch(line)
    assert (before and before.group(1)) == (after and after.group(1)), line


def test_a_long_run_of_blanks_on_the_last_line_is_read_once():
    with pytest.raises(Exception, match="Answer: Yes"):
        parse_yes_no("Answer" + " " * 50_000 + "maybe")
    assert parse_yes_no("Answer" + " " * 50_000 + ": yes") is True


def test_a_list_nested_past_the_parsers_depth_is_unparseable_not_a_crash():
    from mmverify.core.errors import ScoringError

    with pytest.raises(ScoringError) as error:
        parse_text_list("[" * 5_000 + "]" * 5_000)
    assert error.value.code == "judge_unparseable"
    assert parse_text_list("[" * 5_000 + ' ["a", "b"]') == ["a", "b"]
