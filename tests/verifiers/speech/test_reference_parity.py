"""Speech rules against the independent re-derivation of the published evaluator (tests/reference/
mmmg_audio.py) on seeded random texts, values and clips: transcript terms (WER, and the published
Chinese CER normalisation), pitch and rate bands, speaking rate, dominant pitch, and the transcript
constraints."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.tasks.speech import SpeechAttribute, SpeechChinese
from mmverify.verifiers.speech import prosody
from mmverify.verifiers.speech.text_metrics import english_normalizer_name, published_char_accuracy, word_accuracy
from mmverify.verifiers.text import evaluate, parse_mmmg_constraint
from mmverify.verifiers.speech.text_metrics import normalize_english
from tests.reference import mmmg_audio as ref

SR = ref.SR
needs_whisper_normalizer = pytest.mark.skipif(
    english_normalizer_name() != "openai-whisper", reason="the published normaliser's spelling map ships with openai-whisper"
)

WORDS = (
    "the a we our future energy renewable clean mars nasa moon people will send go to of and is it "
    "colour favourite mister doctor twenty one hundred three 3 42 1999 fresh produce together volunteer"
).split()
CAPITALISED = ("NASA", "Mars", "Renewable", "Mr.", "Dr.", "AI")
EXTRAS = ("don't", "it's", "we're", "they'll", "can't", "John's", "$20", "50%", "3.5", "twenty-one", "o'clock")
PUNCTUATION = (",", ".", "!", "?", ";", ":", " -")
HANZI = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
ZH_PUNCTUATION = "，。！？、：；"


def english_sentence(rng: np.random.Generator, n: int) -> str:
    words = []
    for _ in range(n):
        roll = rng.random()
        pool = CAPITALISED if roll < 0.1 else EXTRAS if roll < 0.25 else WORDS
        word = str(rng.choice(pool))
        if rng.random() < 0.15:
            word += str(rng.choice(PUNCTUATION))
        words.append(word.capitalize() if rng.random() < 0.1 else word)
    return " ".join(words)


def edit_words(rng: np.random.Generator, text: str) -> str:
    words = text.split()
    for _ in range(int(rng.integers(0, 4))):
        op = int(rng.integers(0, 3))
        at = int(rng.integers(0, len(words) + 1))
        if op == 0 and at < len(words):
            words[at] = str(rng.choice(WORDS))
        elif op == 1 and at < len(words):
            del words[at]
        else:
            words.insert(at, str(rng.choice(WORDS)))
    return " ".join(words)


def chinese_sentence(rng: np.random.Generator, n: int) -> str:
    out = []
    for _ in range(n):
        roll = rng.random()
        out.append(ZH_PUNCTUATION[int(rng.integers(len(ZH_PUNCTUATION)))] if roll < 0.12 else " " if roll < 0.15 else HANZI[int(rng.integers(len(HANZI)))])
    return "".join(out)


def edit_chars(rng: np.random.Generator, text: str) -> str:
    chars = list(text)
    for _ in range(int(rng.integers(0, 4))):
        at = int(rng.integers(0, len(chars) + 1))
        op = int(rng.integers(0, 4))
        if op == 0 and at < len(chars):
            chars[at] = HANZI[int(rng.integers(len(HANZI)))]
        elif op == 1 and at < len(chars):
            del chars[at]
        elif op == 2:
            chars.insert(at, ZH_PUNCTUATION[int(rng.integers(len(ZH_PUNCTUATION)))])
        else:
            chars.insert(at, HANZI[int(rng.integers(len(HANZI)))])
    return "".join(chars)


# -- transcript terms ---------------------------------------------------------------------------------


@needs_whisper_normalizer
@pytest.mark.parametrize("seed", range(40))
def test_english_word_accuracy_matches_the_published_term(seed):
    rng = np.random.default_rng(seed)
    reference = english_sentence(rng, int(rng.integers(3, 25)))
    hypothesis = edit_words(rng, reference) if rng.random() < 0.8 else english_sentence(rng, int(rng.integers(0, 10)))
    expected = ref.transcript_term(reference, hypothesis, "english")
    assert expected is not None
    assert word_accuracy(reference, hypothesis) == pytest.approx(expected, abs=1e-12)


@needs_whisper_normalizer
@pytest.mark.parametrize("seed", range(40))
def test_chinese_char_accuracy_matches_the_published_term(seed):
    rng = np.random.default_rng(100 + seed)
    reference = chinese_sentence(rng, int(rng.integers(8, 50)))
    hypothesis = edit_chars(rng, reference) if rng.random() < 0.8 else chinese_sentence(rng, int(rng.integers(0, 20)))
    expected = ref.transcript_term(reference, hypothesis, "chinese")
    assert expected is not None
    assert published_char_accuracy(reference, hypothesis) == pytest.approx(expected, abs=1e-12)


@needs_whisper_normalizer
def test_a_perfect_chinese_transcript_with_punctuation_loses_a_character_per_mark():
    """15 characters and one comma: published 1 - 1/15 (the comma became a space the reference lacks)."""
    text = "今天的天气很好，我们一起去公园吧"
    assert len(text) == 16
    assert ref.transcript_term(text, text, "chinese") == pytest.approx(1 - 1 / 15)
    assert published_char_accuracy(text, text) == pytest.approx(1 - 1 / 15)


@needs_whisper_normalizer
def test_empty_hypotheses_score_zero_like_the_published_term():
    assert word_accuracy("the cat sat down", "") == ref.transcript_term("the cat sat down", "", "english") == 0.0
    assert published_char_accuracy("你好世界", "") == ref.transcript_term("你好世界", "", "chinese") == 0.0


# -- bands, speaking rate and pitch ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_band_scores_match_the_published_formulas(seed):
    rng = np.random.default_rng(200 + seed)
    for _ in range(50):
        mel = float(rng.uniform(100, 320))
        gender = int(rng.integers(0, 2))
        level = str(rng.choice(["high", "low"]))
        band = prosody.PITCH_BANDS_MEL["male" if gender == 0 else "female"]
        assert prosody.band_score(mel, band, level) == pytest.approx(ref.pitch_score(mel, gender, level), abs=1e-12)
        language = str(rng.choice(["english", "chinese"]))
        rate = float(rng.uniform(100, 320))
        assert prosody.band_score(rate, prosody.RATE_BANDS[language], level) == pytest.approx(ref.speed_score(rate, language, level), abs=1e-12)


def speech_like(rng: np.random.Generator) -> np.ndarray:
    """Voiced-sounding bursts (a harmonic tone with vibrato) separated by pauses, with silence at
    both ends, plus faint noise."""
    parts = [np.zeros(int(rng.uniform(0.0, 0.8) * SR))]
    f0 = float(rng.uniform(90, 300))
    for _ in range(int(rng.integers(1, 5))):
        n = int(rng.uniform(0.3, 1.5) * SR)
        t = np.arange(n) / SR
        pitch = f0 * (1 + 0.03 * np.sin(2 * np.pi * rng.uniform(3, 7) * t))
        phase = 2 * np.pi * np.cumsum(pitch) / SR
        burst = sum(np.sin(k * phase) / k for k in range(1, 6)) * np.hanning(n) * rng.uniform(0.1, 0.5)
        parts += [burst, np.zeros(int(rng.uniform(0.05, 0.5) * SR))]
    parts.append(np.zeros(int(rng.uniform(0.0, 0.8) * SR)))
    audio = np.concatenate(parts)
    return (audio + rng.normal(0, 1e-4, audio.size)).astype(np.float32)


@needs_whisper_normalizer
@pytest.mark.parametrize("seed", range(12))
def test_speaking_rate_matches_the_published_formula(seed):
    rng = np.random.default_rng(300 + seed)
    audio = speech_like(rng)
    english = english_sentence(rng, int(rng.integers(0, 30)))
    chinese = chinese_sentence(rng, int(rng.integers(0, 40)))
    for task, transcript, language in ((SpeechAttribute(), english, "english"), (SpeechChinese(), chinese, "chinese")):
        units = task.speech_units(transcript)
        rate = prosody.speaking_rate(units, audio, SR, guard_silence=False)
        assert rate == pytest.approx(ref.speaking_rate(ref.whisper_normalizer()(transcript), audio, language), rel=1e-12)


def test_digital_silence_gets_the_published_rate_unless_guarded():
    silence = np.zeros(2 * SR, np.float32)
    assert prosody.speaking_rate(3, silence, SR) == pytest.approx(ref.speaking_rate("a b c", silence, "english"))
    assert prosody.speaking_rate(3, silence, SR, guard_silence=True) is None


@pytest.mark.parametrize("seed", range(12))
def test_dominant_pitch_matches_the_published_extraction(seed):
    rng = np.random.default_rng(400 + seed)
    audio = speech_like(rng)
    expected = ref.dominant_pitch(audio.astype(np.float64))
    assert expected is not None
    assert prosody.dominant_pitch_mel(audio, SR, align="published") == pytest.approx(expected, rel=1e-9)


def test_unvoiced_audio_has_no_pitch():
    noise = np.random.default_rng(0).normal(0, 0.1, SR).astype(np.float32)
    assert prosody.dominant_pitch_mel(noise, SR) is None or isinstance(prosody.dominant_pitch_mel(noise, SR), float)
    assert prosody.dominant_pitch_mel(np.zeros(SR, np.float32), SR) is None


# -- transcript constraints ---------------------------------------------------------------------------


def random_constraint(rng: np.random.Generator, transcript: str) -> list:
    """One constraint of a random kind, its arguments drawn from the transcript half the time."""
    words = transcript.replace(",", " ").replace(".", " ").split() or ["the"]
    pick = lambda: str(rng.choice(words)) if rng.random() < 0.5 else str(rng.choice(WORDS + list(CAPITALISED)))  # noqa: E731
    phrase = lambda: " ".join(words[: int(rng.integers(1, 4))]) if rng.random() < 0.5 else " ".join(words[-int(rng.integers(1, 4)) :])  # noqa: E731
    relation = lambda: f"{rng.choice(['==', '<', '<=', '>', '>='])} {int(rng.integers(0, 25))}"  # noqa: E731
    kind = str(rng.choice(["exact_match", "keyword_include", "keyword_exclude", "keyword_count", "length_word", "start", "end"]))
    if kind == "exact_match":
        return [kind, transcript if rng.random() < 0.5 else phrase()]
    if kind in ("keyword_include", "keyword_exclude"):
        return [kind, *[pick() for _ in range(int(rng.integers(1, 4)))]]
    if kind == "keyword_count":
        return [kind, pick(), relation()]
    if kind == "length_word":
        return [kind, relation() if rng.random() < 0.8 else f">= {int(rng.integers(0, 10))} and count <= {int(rng.integers(5, 30))}"]
    return [kind, phrase()]


@needs_whisper_normalizer
@pytest.mark.parametrize("seed", range(60))
def test_constraint_verdicts_match_the_published_checks(seed):
    rng = np.random.default_rng(500 + seed)
    transcript = english_sentence(rng, int(rng.integers(0, 20)))
    spec = random_constraint(rng, transcript) if rng.random() < 0.6 else [random_constraint(rng, transcript) for _ in range(3)]
    checkers = parse_mmmg_constraint(spec, semantics="published", normalizer=normalize_english)
    assert evaluate(transcript, checkers, "strict", require_nonempty=False).score == ref.constraints_hold(transcript, spec), spec


@needs_whisper_normalizer
def test_an_empty_transcript_passes_exclusions_and_upper_bounds_only():
    """What a response without its clip is checked as, published."""
    for spec, expected in (
        (["keyword_exclude", "nasa", "mars"], 1.0), (["length_word", "< 20"], 1.0), (["length_word", "== 10"], 0.0),
        (["keyword_include", "future"], 0.0), (["start", "education opens doors"], 0.0), (["keyword_count", "data", "== 0"], 1.0),
    ):  # fmt: skip
        checkers = parse_mmmg_constraint(spec, semantics="published", normalizer=normalize_english)
        assert ref.constraints_hold("", spec) == expected
        assert evaluate("", checkers, "strict", require_nonempty=False).score == expected
