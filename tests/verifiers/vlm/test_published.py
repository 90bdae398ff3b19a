"""The published readers (mmmg profile) against the independent re-derivations in tests/reference, on
seeded random replies built from the characters and markers those readers are sensitive to."""

from __future__ import annotations

import random

import pytest

from mmverify.core.errors import ScoringError
from mmverify.verifiers.vlm.published import first_answer_letter, first_character, first_line_list, first_nswer_letter
from tests.reference import mmmg_image as ref
from tests.reference import mmmg_interleaved as ref_inter

PIECES = [
    "Answer:", "Answer: ", "answer: ", "nswer: ", "ANSWER:", "Answer:\n", "Answer:\u00a0", "**", " ", "\n", "\r", "\t",
    "A", "B", "C", "D", "E", "F", "G", "a", "b", "(", ")", "[", "]", '"', "'", ",", "x", "yes", '"hi"', "1", "{", "}",
    '["a", "b"]', "[]", "[1]", "[true]", '["x"', "\u3000",
]  # fmt: skip


def reply(seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 25)))


@pytest.mark.parametrize("seed", range(2000))
def test_readers_match_the_reference(seed):
    text = reply(seed)
    value = ref.count_value(text, a_is=1)
    assert (first_answer_letter(text) or "") == ("ABCDEF"[value - 1] if value else "")
    for letters in ("ABC", "ABCDE"):
        assert first_nswer_letter(text, letters) == ref.first_option(text, letters)
    for claim in range(3, 7):
        expected = ref_inter.count_reply_passes(claim, text)
        if expected is None:
            with pytest.raises(ScoringError):
                first_character(text)
        else:
            assert (first_character(text) == chr(claim + 95)) is expected
    published = ref.first_list(text)
    if all(isinstance(item, str) for item in published):
        assert first_line_list(text) == published
    elif all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in published):
        assert first_line_list(text) == [str(item) for item in published]  # the published join crashed
    else:
        with pytest.raises(ScoringError):
            first_line_list(text)


def test_counter_examples():
    assert first_line_list('The sign reads:\n```json\n[\n  "hello",\n  "world"\n]\n```') == []
    assert first_line_list('see [note]\n["a"]') == [] and first_line_list('["a"] then ["b"]') == ["a"]
    assert first_nswer_letter("**Answer:** B", "ABC") is None and first_nswer_letter("answer: B", "ABC") == "B"
    assert first_answer_letter("Answer: A is wrong\nAnswer: B") == "A" and first_answer_letter("answer: B") is None
    assert first_character("  Based on the image") == "b"


def test_many_lines_of_unclosed_brackets_are_read_once():
    assert first_line_list("[\n" * 100_000 + '["a"]') == ["a"]
    assert first_line_list("[\n" * 100_000) == []
