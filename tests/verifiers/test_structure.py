"""Modality order, including the published handling of leading whitespace."""

import pytest

from mmverify.verifiers.structure import check_order, modality_sequence


def seq(*parts, **kwargs):
    return modality_sequence(parts, **kwargs)


@pytest.mark.parametrize(
    "parts, expected",
    [
        ((("image", ""), ("text", "About it.")), "it"),
        ((("text", "Intro"), ("text", " more"), ("image", ""), ("text", "x")), "tit"),
        ((("image", ""), ("image", ""), ("text", "   \n")), "ii"),  # whitespace after media is not text
        ((("text", "a"), ("audio", ""), ("text", "b"), ("audio", ""), ("audio", "")), "tataa"),
        ((("text", "only text"),), "t"),
        ((), ""),
    ],
)
def test_sequences(parts, expected):
    assert seq(*parts) == expected


def test_leading_whitespace_counts_as_text_as_published_unless_stripped():
    parts = (("text", "\n"), ("image", ""), ("text", "caption"))
    assert seq(*parts) == "tit"
    assert seq(*parts, strip_leading_text=True) == "it"


def test_check_order_accepts_any_allowed_order():
    assert check_order("tit", ["tit", "iti"]).score == 1.0
    miss = check_order("ti", ["it"])
    assert miss.score == 0.0 and miss.passed is False and miss.evidence["sequence"] == "ti"
    with pytest.raises(ValueError):
        check_order("t", [])
    with pytest.raises(ValueError):
        seq(("video", ""))


def _sequence_by_joining(parts, strip_leading_text=False):
    """The rule with the text joined: consecutive text parts are a ``t`` when their join is not
    empty (not blank after media or when leading text is stripped)."""
    import itertools

    letters, seen_media = [], False
    for is_text, run in itertools.groupby(parts, key=lambda part: part[0] == "text"):
        run = list(run)
        if is_text:
            joined = "".join(text for _, text in run)
            if (joined.strip() if (seen_media or strip_leading_text) else joined):
                letters.append("t")
        else:
            letters.extend({"image": "i", "audio": "a"}[kind] for kind, _ in run)
            seen_media = True
    return "".join(letters)


@pytest.mark.parametrize("seed", range(300))
def test_the_sequence_is_the_one_the_joined_text_gives(seed):
    import random

    rng = random.Random(seed)
    parts = [(rng.choice(["text", "text", "image", "audio"]), rng.choice(["", " ", "\n", "x", " y "])) for _ in range(rng.randint(0, 8))]
    for strip in (False, True):
        assert modality_sequence(parts, strip_leading_text=strip) == _sequence_by_joining(parts, strip), parts


def test_many_text_parts_are_read_once():
    assert modality_sequence([("text", " " * 10)] * 50_000 + [("image", "")] + [("text", "x" * 10)] * 50_000) == "tit"
