"""Whisper's bracket removal in linear time: the same text as its two regular expressions, and,
disarmed, the same normalised text from Whisper's own normaliser (which then finds nothing to do)."""

from __future__ import annotations

import random
import re

import pytest

from mmverify.verifiers.text.brackets import drop_bracketed

SQUARE_OR_ANGLE = r"[<\[][^>\]]*[>\]]"  # as Whisper's EnglishTextNormalizer writes them
ROUND = r"\(([^)]+?)\)"


def _random_text(rng: random.Random, alphabet: str, longest: int = 40) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))


@pytest.mark.parametrize("seed", range(400))
def test_the_same_text_as_the_two_expressions(seed):
    rng = random.Random(seed)
    text = _random_text(rng, "([<>]){ab .")
    for replacement in ("", " "):
        expected = re.sub(ROUND, replacement, re.sub(SQUARE_OR_ANGLE, replacement, text))
        assert drop_bracketed(text, replacement) == expected, text


@pytest.mark.parametrize("seed", range(200))
def test_disarmed_text_leaves_whisper_nothing_to_remove_and_the_same_result(seed):
    transformers_normalizer = pytest.importorskip("transformers.models.whisper.english_normalizer")
    normalize = transformers_normalizer.EnglishTextNormalizer({})
    rng = random.Random(seed)
    text = _random_text(rng, "([<>]){ab 7.,'%$Mr", longest=60)
    disarmed = drop_bracketed(text, disarm=True)
    assert re.search(SQUARE_OR_ANGLE, disarmed) is None and re.search(ROUND, disarmed) is None
    assert all(disarmed[i + 1 : i + 2] == ")" for i, char in enumerate(disarmed) if char in "(<[")  # each fails at once
    assert normalize(disarmed) == normalize(text), text


def test_a_long_run_of_unclosed_openers_is_kept_as_the_expressions_keep_it():
    text = "keep [this] " + "(" * 50_000 + "<" * 50_000
    assert drop_bracketed(text) == "keep  " + "(" * 50_000 + "<" * 50_000
    assert drop_bracketed(text, disarm=True) == "keep  " + "{" * 100_000


@pytest.mark.parametrize("seed", range(100))
def test_normalize_english_gives_what_the_normaliser_in_use_gives(seed):
    from mmverify.verifiers.speech import text_metrics

    name, normalize = text_metrics._english()
    rng = random.Random(seed)
    text = _random_text(rng, "([<>]){ab 7.,'%$ Mr colour", longest=60)
    assert text_metrics.normalize_english(text) == " ".join(normalize(text).split()), (name, text)
