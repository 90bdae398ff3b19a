"""OCR scoring: normalisation, WER against jiwer, the two-judge Chinese intersection."""

from __future__ import annotations

import jiwer
import pytest

from mmverify.verifiers.vlm.ocr import (
    agreed_characters,
    chinese_accuracy,
    corpus_ocr_accuracy,
    has_cjk,
    normalize_ocr,
    ocr_accuracy,
    reading_text,
)


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("Hello", "hello"),
        ("  Happy   Birthday! ", "happy birthday"),
        ("Don't forget tomorrow's errands", "dont forget tomorrows errands"),
        ("Goals: learn daily, grow steadily", "goals learn daily grow steadily"),
        ("daily,grow", "daily grow"),
        ("Café Olé", "cafe ole"),
        ("Washington WA 98105", "washington wa 98105"),
        ("Best coffee ever!", "best coffee ever"),
        ("ＦＵＬＬ　ｗｉｄｔｈ", "full width"),
        ("", ""),
    ],
)
def test_normalize_ocr(text, normalised):
    assert normalize_ocr(text) == normalised


def test_umlaut_folding_matches_the_digraph_references():
    assert normalize_ocr("Führt Träume Öffnet Straße", fold_umlauts=True) == "fuehrt traeume oeffnet strasse"
    assert normalize_ocr("Führt") == "fuhrt"  # without folding the accent is simply dropped
    assert ocr_accuracy("Mut Fuehrt Weiter", ["MUT FÜHRT WEITER"], fold_umlauts=True) == (1.0, 0.0)
    assert ocr_accuracy("Mut Fuehrt Weiter", ["Mut Fuehrt Weiter"], fold_umlauts=True) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("reference", "pieces"),
    [
        ("Always Move Forward", ["Always Move", "Forward"]),
        ("Always Move Forward", ["Always Moves Forward"]),
        ("Always Move Forward", ["Forward"]),
        ("Join The Grand Event", ["JOIN THE GRAND EVENT!!", "extra words here"]),
        ("Hello", []),
    ],
)
def test_ocr_accuracy_is_one_minus_clipped_jiwer_wer(reference, pieces):
    hypothesis = normalize_ocr(reading_text(pieces)) or "<none>"
    expected_wer = jiwer.wer(normalize_ocr(reference), hypothesis)
    accuracy, rate = ocr_accuracy(reference, pieces)
    assert rate == pytest.approx(expected_wer)
    assert accuracy == pytest.approx(max(0.0, 1 - min(expected_wer, 1.0)))


def test_corpus_wer_pools_edits_over_objects():
    references = ["Stay bold, chase dreams", "Coffee fuels infinite morning possibilities"]
    accuracy, rate = corpus_ocr_accuracy(references, [["stay bold chase dreams"], []])
    assert rate == pytest.approx(5 / 9)  # the empty reading counts all 5 words of the second text
    assert accuracy == pytest.approx(4 / 9)
    accuracy, rate = corpus_ocr_accuracy(references, [["wrong"] * 20, []])
    assert accuracy == 0.0 and rate > 1


def test_reading_text_joins_non_empty_pieces():
    assert reading_text(["  Hello ", "", " ", "World"]) == "Hello World"


@pytest.mark.parametrize(
    ("first", "second", "agreed"),
    [
        (["和平"], ["和平"], "和平"),
        (["和平"], ["平"], "平"),
        (["和平", "路"], ["路和"], "和路"),  # the first reading's order
        (["好好"], ["好"], "好"),  # a multiset: one 好 read by both
        (["和，平！"], ["和 平"], "和平"),  # punctuation and spaces do not count
        ([], ["和平"], ""),
    ],
)
def test_agreed_characters(first, second, agreed):
    assert agreed_characters(first, second) == agreed


def test_chinese_accuracy_is_one_minus_clipped_cer():
    assert chinese_accuracy("和平", "和平") == (1.0, 0.0)
    assert chinese_accuracy("和平", "和") == (0.5, 0.5)
    assert chinese_accuracy("和平", "") == (0.0, 1.0)
    accuracy, rate = chinese_accuracy("德", "德国人")
    assert rate == pytest.approx(jiwer.cer("德", "德国人")) and accuracy == 0.0


def test_has_cjk():
    assert has_cjk("和平") and has_cjk("abc 德")
    assert not has_cjk("Freude") and not has_cjk("Träume") and not has_cjk("")
