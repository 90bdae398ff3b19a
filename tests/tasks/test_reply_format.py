"""it_coherence_ocr's format search: plain text around one group is found in linear time with what
the format's own expression captures; other formats are left to the expression."""

from __future__ import annotations

import random
import re

import pytest

from mmverify.tasks.coherence_frame import EXPRESSION_SEARCHED, MAX_SEARCHED_TEXT, _FORMAT_SHAPE, written_in_format

PIECES = ["<t>", "</t>", "<", ">", "t", "a b", "\n", " ", "\\."]


def _format(rng: random.Random) -> str:
    literal = lambda: "".join(rng.choice(["<t>", "</t>", "t", "\\.", " ", "x:", ""]) for _ in range(rng.randint(0, 2)))  # noqa: E731
    return literal() + rng.choice(["(.*?)", "(.*)"]) + literal()


@pytest.mark.parametrize("seed", range(500))
def test_the_capture_is_what_the_formats_expression_captures(seed):
    rng = random.Random(seed)
    fmt = _format(rng)
    assert _FORMAT_SHAPE.fullmatch(fmt), fmt
    pattern = re.compile(fmt)
    text = "".join(rng.choice([*PIECES, "x:", "."]) for _ in range(rng.randint(0, 25)))
    match = pattern.search(text)
    assert written_in_format(pattern, text) == (match.group(1) if match else None), (fmt, text)


def test_a_long_reply_is_searched_whole_and_once():
    pattern = re.compile(r"<text>(.*?)</text>")
    reply = "<text>" * 2_000 + "\n" + "reasoning " * 1_000 + "<text>Dream big and work hard</text>"
    assert len(reply) > EXPRESSION_SEARCHED and written_in_format(pattern, reply) == "Dream big and work hard"
    assert written_in_format(pattern, "<text>" * (MAX_SEARCHED_TEXT // 6)) is None
    assert written_in_format(re.compile(r"(.*?)</text>"), "a" * MAX_SEARCHED_TEXT) is None


def test_a_format_that_is_not_plain_text_is_left_to_its_expression_over_a_shorter_window():
    counted = re.compile(r"Text{1}: (.*)")  # a brace: not plain text
    assert written_in_format(counted, "Text: five words are written here") == "five words are written here"
    assert written_in_format(counted, "x" * EXPRESSION_SEARCHED + " Text: late") is None  # beyond its window
    assert counted.search("x" * EXPRESSION_SEARCHED + " Text: late") is not None
