"""Transcript metrics against jiwer (the reference implementation) and Whisper's normaliser."""

from __future__ import annotations

import subprocess
import sys

import jiwer
import pytest

from mmverify.verifiers.speech import text_metrics as tm

# (reference, hypothesis, word edits, reference words) -- already normalised text
WORD_PAIRS = [
    ("the cat sat down", "the cat sit down", 1, 4),  # one substitution
    ("the cat sat down", "the cat down", 1, 4),  # one deletion
    ("the cat sat down", "the big cat sat down", 1, 4),  # one insertion
    ("a b c d e", "a x c e f g", 4, 5),  # sub + del + 2 ins
    ("hello world", "hello world", 0, 2),
]


@pytest.mark.parametrize("ref, hyp, edits, words", WORD_PAIRS)
def test_wer_matches_jiwer_and_edit_counts(ref, hyp, edits, words):
    expected = jiwer.wer(ref, hyp)
    assert expected == pytest.approx(edits / words)
    assert tm.wer(ref, hyp) == pytest.approx(expected)
    assert tm.wer(ref, hyp, normalize=None) == pytest.approx(expected)
    assert tm.word_accuracy(ref, hyp) == pytest.approx(max(1 - edits / words, 0.0))


def test_word_accuracy_is_floored_at_zero():
    assert tm.wer("yes", "no not at all") == pytest.approx(4.0)
    assert tm.word_accuracy("yes", "no not at all") == 0.0


def test_wer_normalises_both_sides_before_jiwer():
    ref = "Mr. Smith bought twenty-one apples."
    hyp = "mister smith bought 21 apples"
    assert tm.wer(ref, hyp) == 0.0
    assert tm.wer(ref, hyp, normalize=None) == pytest.approx(jiwer.wer(ref, hyp))
    assert tm.wer(ref, hyp, normalize=None) > 0


def test_corpus_wer_matches_jiwer_lists():
    refs = ["the cat sat down", "a b c d e"]
    hyps = ["the cat sit down", "a x c e f g"]
    assert tm.corpus_wer(refs, hyps) == pytest.approx(jiwer.wer(refs, hyps))
    assert tm.corpus_wer(refs, hyps) == pytest.approx(5 / 9)
    with pytest.raises(ValueError):
        tm.corpus_wer(refs, hyps[:1])


@pytest.mark.skipif(tm.english_normalizer_name() == "basic", reason="no Whisper normaliser installed")
@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith", "mister smith"),
        ("Dr. Jones and Mrs. Brown", "doctor jones and missus brown"),
        ("I have twenty-one apples.", "i have 21 apples"),
        ("one oh one", "101"),
        ("Hello, World!!", "hello world"),
        ("  spaced   out\ttext ", "spaced out text"),
        ("Hmm, [laughs] fine", "fine"),
    ],
)
def test_whisper_english_normaliser(text, expected):
    assert tm.normalize_english(text) == expected


@pytest.mark.skipif(tm.english_normalizer_name() != "openai-whisper", reason="needs openai-whisper's spelling map")
def test_british_spelling_is_americanised():
    assert tm.normalize_english("The colour of the centre") == "the color of the center"


def test_whisper_normaliser_does_not_import_torch():
    code = (
        "import sys\n"
        "from mmverify.verifiers.speech.text_metrics import normalize_english, english_normalizer_name\n"
        "normalize_english('Mr. Smith')\n"
        "print(english_normalizer_name(), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "False"


def test_basic_fallback_normaliser():
    assert tm._basic_english("Hello, World! It's 5 o'clock.") == "hello world it's 5 o'clock"
    assert tm._basic_english("ＡＢＣ — done?") == "abc done"


def test_chinese_normalisation():
    assert tm.normalize_chinese("你好，世界！") == "你好世界"
    assert tm.normalize_chinese(" 今天 是 ２０２４年。") == "今天是2024年"
    assert tm.normalize_chinese("《红楼梦》 Chapter ONE") == "红楼梦chapterone"


@pytest.mark.parametrize(
    "ref, hyp, edits, chars",
    [
        ("你好世界", "你好视界", 1, 4),
        ("今天天气很好", "今天天气好", 1, 6),
        ("我爱北京", "我爱北京天安门", 3, 4),
        ("你好，世界。", "你好 世界", 0, 4),
    ],
)
def test_cer_matches_jiwer_on_normalised_chinese(ref, hyp, edits, chars):
    expected = jiwer.cer(tm.normalize_chinese(ref), tm.normalize_chinese(hyp))
    assert expected == pytest.approx(edits / chars)
    assert tm.cer(ref, hyp) == pytest.approx(expected)
    assert tm.char_accuracy(ref, hyp) == pytest.approx(max(1 - edits / chars, 0.0))


def test_empty_texts_use_a_placeholder_unit():
    assert tm.wer("", "") == 0.0
    assert tm.wer("?", "!") == 0.0  # both empty after normalisation
    assert tm.wer("a b c", "") == pytest.approx(1.0)  # all deletions, like jiwer
    assert tm.wer("", "a b") == pytest.approx(2.0)  # <none> -> 1 substitution + 1 insertion
    assert tm.word_accuracy("", "a b") == 0.0
    assert tm.cer("", "") == 0.0
    assert tm.cer("你好", "") == pytest.approx(1.0)
    assert tm.cer("", "你好") == pytest.approx(2.0)
    assert tm.wer("<none>", "", normalize=None) == 0.0  # the placeholder itself, as MMMG wrote it


def test_transcript_accuracy_dispatches_on_language():
    assert tm.transcript_accuracy("the cat sat down", "the cat sit down", "en") == pytest.approx(0.75)
    assert tm.transcript_accuracy("你好世界", "你好视界", "zh") == pytest.approx(0.75)
    assert tm.transcript_accuracy("你好世界", "你好视界", "Chinese") == pytest.approx(0.75)
    with pytest.raises(ValueError):
        tm.transcript_accuracy("a", "a", "fr")


def test_transformers_fallback_matches_whisper_without_spelling(monkeypatch):
    pytest.importorskip("transformers")
    text = "Mr. Smith paid twenty-one dollars, um, for [noise] the Colour TV!"
    expected = tm.normalize_english(text) if tm.english_normalizer_name() == "openai-whisper" else None
    monkeypatch.setattr(tm, "_whisper_normalizers_module", lambda: None)
    tm._english.cache_clear()
    try:
        assert tm.english_normalizer_name() == "transformers-no-spelling-map"
        result = tm.normalize_english(text)
        assert result.startswith("mister smith paid $21")
        if expected is not None:
            assert result == expected.replace("color", "colour")
    finally:
        tm._english.cache_clear()


def test_published_chinese_cer_counts_punctuation_turned_into_spaces():
    """Both sides through the English normaliser: "，" becomes a space; the reference then loses its
    spaces, the hypothesis keeps its one, so a perfect reading has one inserted character in 4."""
    text = "你好，世界。"
    assert tm.published_cer(text, text) == pytest.approx(1 / 4)
    assert tm.published_char_accuracy(text, text) == pytest.approx(3 / 4)
    assert tm.char_accuracy(text, text) == 1.0  # strict: characters only
    assert tm.published_cer("你好世界", "你好世界") == 0.0
    assert tm.published_cer("你好世界", "你好世") == pytest.approx(1 / 4)
    assert tm.published_char_accuracy("你好世界", "") == 0.0
    assert tm.published_char_accuracy("你好世界", "完全不同的一句很长的话") == 0.0
