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
