"""Differential tests: mmverify's weight-free image rules against the published decisions
re-derived in :mod:`tests.reference.mmmg_image`, on seeded random cases.

Where mmverify deliberately reads differently (verdicts from the end of the reply, whitespace
inside a reading, the order of the Chinese intersection), a test pins the difference down.
"""

from __future__ import annotations

import json
import random
import re
import string

import numpy as np
import pytest
from PIL import Image

from mmverify.tasks.image_ocr import (
    cjk_characters,
    common_characters_once,
    mmmg_chinese_accuracy,
    normalize_mmmg_ocr,
    word_accuracy,
)
from mmverify.verifiers.image.preserve import check_preserved_outside, edited_crop, widen_box
from mmverify.verifiers.vlm.parse import parse_choice, parse_text_list, parse_yes_no
from mmverify.verifiers.vlm.templates import published_count_letter, question
from tests.reference import mmmg_image as ref

SEEDS = range(300)


# -- counting: the published option layout, and which letter passes --------------------------------------
def offered(prompt: str) -> dict[str, str]:
    """Option letter -> option text, as listed in a filled prompt."""
    return dict(re.findall(r"^([A-F])\. (.+)$", prompt, flags=re.MULTILINE))


def mmmg_count_template(count: int) -> str:
    return "count" if count <= 6 else "count_above_six"


@pytest.mark.parametrize("count", range(3, 11))
def test_the_mmmg_counting_question_has_the_published_layout(count):
    options = offered(question(mmmg_count_template(count), target="cats").prompt)
    assert list(options) == list("ABCDEF")
    for letter, meaning in zip("ABCDEF", ref.count_options(count)):
        assert options[letter] == str(meaning) if isinstance(meaning, int) else options[letter].startswith(meaning)
    # the letter the published value selects is the option naming the count
    assert published_count_letter(count) == ref.published_count_letter(count)
    assert options[published_count_letter(count)] == str(count)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_judge_picking_by_meaning_passes_exactly_when_the_published_rule_does(seed):
    rng = random.Random(seed)
    count, seen = rng.randint(3, 10), rng.choice([0, 1, 2, rng.randint(3, 10), rng.randint(3, 10), 11, 14])
    options = offered(question(mmmg_count_template(count), target="cats").prompt)
    chosen = ref.option_for(seen, ref.count_options(count))
    [picked] = [k for k, v in options.items() if v == str(chosen) or (isinstance(chosen, str) and v.startswith(chosen))]
    assert (picked == published_count_letter(count)) is ref.count_passes(count, seen)
    assert ref.count_reply_passes(count, f"I count {seen}.\nAnswer: {picked}") is ref.count_passes(count, seen)


def test_the_earlier_published_reader_required_the_option_below_the_count():
    # 0473209a counted A as 1, so with the same prompts "count - 2" selected the option below the count
    assert ref.count_reply_passes(3, "Answer: A", version="0473209a") and not ref.count_reply_passes(3, "Answer: A")
    assert ref.count_reply_passes(7, "Answer: B") and not ref.count_reply_passes(7, "Answer: B", version="0473209a")


# -- reading verdicts ----------------------------------------------------------------------------------
WORDS = ["the", "image", "shows", "a", "red", "balloon", "above", "green", "hills", "clearly", "visible", "there", "is", "one"]


def reasoning(rng: random.Random) -> str:
    """Random reasoning sentences with no "yes"/"no" substring anywhere."""
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))).capitalize() + "." for _ in range(rng.randint(1, 4))]
    text = " ".join(sentences)
    assert "yes" not in text.lower() and "no" not in text.lower()
    return text


@pytest.mark.parametrize("seed", SEEDS)
def test_well_formed_yes_no_replies_read_the_same(seed):
    rng = random.Random(seed)
    verdict = rng.choice(["Yes", "No"])
    reply = f"{reasoning(rng)}\n{rng.choice(['Answer: ', '', 'Answer: **'])}{verdict}{rng.choice(['', '.', '**'])}"
    assert parse_yes_no(reply) is ref.says_yes(reply) is (verdict == "Yes")
    assert (not parse_yes_no(reply)) is ref.says_no(reply)


def test_the_published_substring_reader_misreads_what_mmverify_reads_from_the_end():
    # "no" inside "snow" in the last 20 characters: the published exclusion reads it as absent
    reply = "The field is covered in snow.\nAnswer: Yes"
    assert ref.says_no(reply) and parse_yes_no(reply) is True
    # "yes" quoted in the reasoning right before a final No
    reply = 'I would not say "yes".\nAnswer: No'
    assert ref.says_yes(reply) and parse_yes_no(reply) is False


@pytest.mark.parametrize("seed", SEEDS)
def test_well_formed_choice_replies_read_the_same(seed):
    rng = random.Random(seed)
    letters = rng.choice(["ABC", "ABCDE", "ABCDEF"])
    choice = rng.choice(letters)
    reply = f"{reasoning(rng)}\nAnswer: {choice}{rng.choice(['', '.'])}"
    assert parse_choice(reply, letters) == ref.first_option(reply, letters) == choice
    if letters == "ABCDEF":
        assert ord(parse_choice(reply, letters)) - ord("A") + 1 == ref.count_value(reply)


def test_the_first_answer_marker_is_not_the_verdict():
    reply = "Answer: A would be wrong because the cat is on the right.\nAnswer: B"
    assert ref.first_option(reply, "ABC") == "A" and parse_choice(reply, "ABC") == "B"


@pytest.mark.parametrize("seed", SEEDS[:100])
def test_single_list_replies_read_the_same(seed):
    rng = random.Random(seed)
    pieces = [rng.choice(WORDS).upper() for _ in range(rng.randint(0, 3))]
    reply = f"{reasoning(rng)}\n{json.dumps(pieces)}"
    assert parse_text_list(reply) == ref.first_list(reply) == pieces


# -- OCR normalisation and WER -------------------------------------------------------------------------
VOCAB = [
    "hello", "World", "Café", "naïve", "ÜBER", "Straße", "don't", "e-mail", "(hi)", "wow!", "a,b", "x.y",
    "“quote”", "’tis", "&", "$5", "98105", "Mut", "Fuehrt", "Führt", "Ørsted", "niño", "—", "…", "#1", "ok?",
]  # fmt: skip


def phrase(rng: random.Random, low: int = 0) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(low, 6))]
    words = [w.upper() if rng.random() < 0.2 else w for w in words]
    return rng.choice(["", " "]) + (" " * rng.randint(1, 3)).join(words) + rng.choice(["", "  "])


def blank_but_not_empty(text: str) -> bool:
    """Texts the published normaliser leaves as spaces (punctuation only): its tokeniser then sees
    no words, while mmverify compares them as the empty text."""
    return ref.normalize_text(text) != ref.FAILED and not ref.normalize_text(text).strip()


@pytest.mark.parametrize("seed", SEEDS)
def test_ocr_scores_match_the_published_normalisation_and_wer(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 1, 2])
    references = [phrase(rng, low=1) if rng.random() < 0.9 else "" for _ in range(n)]
    references = [r if ref.normalize_text(r).strip() else "" for r in references]
    readings = [[phrase(rng) for _ in range(rng.randint(0, 2))] for _ in range(n)]
    if any(blank_but_not_empty(ref.reading(r)) for r in readings):
        pytest.skip("punctuation-only reading: see test_punctuation_only_readings_count_as_empty")
    accuracy, _ = word_accuracy(references, readings, normalize_mmmg_ocr)
    assert accuracy == pytest.approx(ref.ocr_score(references, readings), abs=1e-12)


def test_normaliser_examples_against_the_reference():
    for text in ["Don't STOP-believing, Café!", "“Curly” quotes’ stay", "ÉCOLE  élève", "", "!!!"]:
        expected = ref.normalize_text(text)
        ours = normalize_mmmg_ocr(text) or ref.FAILED
        assert ours == " ".join(expected.split()) or (not ours.strip() and not expected.strip())


def test_punctuation_only_readings_count_as_empty():
    # a text to be removed (reference "") read back as "!!!": the published tokeniser sees an
    # empty hypothesis and scores 0; mmverify compares "" with "": the text is gone, 1
    assert blank_but_not_empty("!! ??")
    assert ref.ocr_score([""], [["!! ??"]]) == 0.0
    assert word_accuracy([""], [["!! ??"]], normalize_mmmg_ocr)[0] == 1.0


def test_a_line_break_inside_a_reading_separates_words():
    # the published tokeniser keeps a lone newline inside a word ("happy\nbirthday" is one word)
    assert ref.ocr_score(["Happy Birthday"], [["Happy\nBirthday"]]) == 0.0
    assert word_accuracy(["Happy Birthday"], [["Happy\nBirthday"]], normalize_mmmg_ocr)[0] == 1.0


# -- Chinese: characters both readers saw ----------------------------------------------------------------
POOL = list("和平路梦想勇气友爱欢乐颂美好灯德成长记") + ["A", "1", "，", "。", " ", "\u3400", "和", "平"]
REFERENCES = ["和平", "梦想", "和平路", "勇气", "友爱", "欢乐颂", "美好", "灯", "德", "成长记"]


def chinese_reading(rng: random.Random, reference: str) -> list[str]:
    """Pieces mixing the reference's characters (some repeated, some dropped) with noise."""
    pieces = []
    for _ in range(rng.randint(0, 2)):
        chars = [ch * rng.choice([0, 1, 1, 2]) for ch in reference] + [rng.choice(POOL) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.2:
            rng.shuffle(chars)
        pieces.append("".join(chars))
    return pieces


@pytest.mark.parametrize("seed", SEEDS)
def test_chinese_scores_match_the_published_set_intersection(seed):
    rng = random.Random(seed)
    reference = rng.choice(REFERENCES)
    first, second = chinese_reading(rng, reference), chinese_reading(rng, reference)
    agreed = common_characters_once(cjk_characters(first), cjk_characters(second))
    accuracy, _ = mmmg_chinese_accuracy(reference, agreed)
    assert accuracy == pytest.approx(ref.chinese_score(reference, "".join(first), "".join(second)), abs=1e-12)


def test_the_published_set_order_decided_two_character_words_by_chance():
    # both readers read "和平" perfectly; the published set could come out in either order
    assert ref.chinese_score("和平", "和平", "和平", order="和平") == 1.0
    assert ref.chinese_score("和平", "和平", "和平", order="平和") == 0.0
    assert mmmg_chinese_accuracy("和平", common_characters_once("和平", "平和"))[0] == 1.0


# -- editing boxes, blackout, SSIM, crop -------------------------------------------------------------------
def random_box(rng: random.Random, width: int, height: int) -> list[int]:
    x0, y0 = rng.randint(-12, width - 2), rng.randint(-12, height - 2)
    return [x0, y0, rng.randint(max(x0 + 1, 1), width + 40), rng.randint(max(y0 + 1, 1), height + 40)]


@pytest.mark.parametrize("seed", SEEDS[:120])
def test_edit_boxes_blackout_ssim_and_crop_match_the_published_recipe(seed):
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    width, height, divisor = rng.randint(12, 90), rng.randint(12, 90), rng.choice([10, 20])
    bbox = random_box(rng, width, height)
    source = nprng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    if rng.random() < 0.5:  # a generation of another size is resized with PIL's default filter
        big = nprng.integers(0, 256, (height + rng.randint(-5, 30), width + rng.randint(-5, 30), 3), dtype=np.uint8)
        generated, resized = big, np.asarray(Image.fromarray(big).resize((width, height)))
    else:
        generated = np.clip(source.astype(int) + nprng.integers(-30, 31, source.shape), 0, 255).astype(np.uint8)
        resized = generated
    box = ref.edit_box(bbox, width, height, divisor)
    assert widen_box(bbox, width, height, divisor) == box
    check = check_preserved_outside(generated, source, bbox, margin_divisor=divisor)
    expected = ref.outside_ssim(resized, source, box)
    assert check.components["ssim_outside"] == pytest.approx(expected, abs=1e-9)
    assert check.score == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-9)
    assert np.array_equal(edited_crop(generated, source.shape, bbox, divisor), ref.edit_crop(resized, box))


def test_published_boxes_outside_the_image_are_clipped_like_the_published_code():
    # i_edit_object_remove rows 10 and 14 on a 500x500 source, margin 500 // 20 = 25
    assert widen_box([-1, 125, 223, 352], 500, 500, 20) == ref.edit_box([-1, 125, 223, 352], 500, 500, 20) == (0, 100, 248, 377)
    assert widen_box([350, 118, 701, 450], 500, 500, 20) == ref.edit_box([350, 118, 701, 450], 500, 500, 20) == (325, 93, 500, 475)


def test_string_punctuation_is_what_the_published_normaliser_removes():
    assert normalize_mmmg_ocr(string.punctuation + "a") == "a"
    assert normalize_mmmg_ocr("a\u2019b \u201cc\u201d") == "a\u2019b \u201cc\u201d"
