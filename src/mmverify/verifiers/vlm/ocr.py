"""Scoring a judge's OCR reading against the text an image was asked to show.

Normalisation (published semantics for the OCR tasks): lower case, accents and punctuation removed,
whitespace collapsed -- the check is whether the words were rendered, not their typography.  German
references in MMMG spell umlauts as digraphs ("Fuehrt", "Traegt"); with ``fold_umlauts`` both sides
write ä/ö/ü/ß as ae/oe/ue/ss first, so an image that renders "Führt" is not penalised for using the
letter the word really has.

Chinese readings come from two judges asked to read conservatively; only characters both read are
kept (:func:`agreed_characters`), so a character one judge imagined does not count.
"""

from __future__ import annotations

import string
import unicodedata
from collections import Counter
from typing import Callable, Sequence

from ..speech.text_metrics import cer, corpus_wer, normalize_chinese, wer

NORMALIZATIONS = ("mmmg", "unicode")
_ASCII_PUNCTUATION = str.maketrans("", "", string.punctuation)
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue", "ẞ": "SS"})


def normalize_ocr(text: str, fold_umlauts: bool = False) -> str:
    """Lower case; accents, punctuation and symbols removed; whitespace collapsed.

    Apostrophes are dropped without a space ("Don't" -> "dont") so contractions stay one word;
    other punctuation separates words ("daily,grow" -> "daily grow").
    """
    if fold_umlauts:
        text = unicodedata.normalize("NFC", text).translate(_UMLAUTS)
    decomposed = unicodedata.normalize("NFKD", text)
    out = []
    for ch in decomposed:
        category = unicodedata.category(ch)
        if category == "Mn":  # combining accent
            continue
        if ch in "'’ʼ`´":
            continue
        out.append(" " if category[0] in "PSZC" else ch)
    return " ".join("".join(out).lower().split())


def normalize_mmmg_ocr(text: str) -> str:
    """The published OCR normalisation: lower case, NFD without combining marks, the ASCII
    punctuation characters deleted without a space ("e-mail" -> "email"); whitespace collapsed.
    Other characters, typographic quotes included, are kept."""
    decomposed = unicodedata.normalize("NFD", text.lower().strip())
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
    return " ".join(kept.translate(_ASCII_PUNCTUATION).split())


def normalizer(normalization: str, fold_umlauts: bool = False) -> Callable[[str], str]:
    """``"mmmg"``: :func:`normalize_mmmg_ocr`; ``"unicode"``: :func:`normalize_ocr` (umlauts
    folded on request)."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {normalization!r}")
    if normalization == "mmmg":
        return normalize_mmmg_ocr
    return _normalizer(fold_umlauts)


def _normalizer(fold_umlauts: bool) -> Callable[[str], str]:
    return (lambda text: normalize_ocr(text, fold_umlauts=True)) if fold_umlauts else normalize_ocr


def word_accuracy(
    references: Sequence[str], readings: Sequence[Sequence[str]], normalize: Callable[[str], str]
) -> tuple[float, float]:
    """(``1 - min(WER, 1)``, WER), the WER pooled over the texts (edits / reference words); each
    reading is a judge's list of text pieces, joined with spaces."""
    rate = corpus_wer(list(references), [reading_text(r) for r in readings], normalize=normalize)
    return max(0.0, 1.0 - min(rate, 1.0)), rate


def reading_text(pieces: Sequence[str]) -> str:
    """A judge's list of text pieces as one hypothesis string."""
    return " ".join(piece.strip() for piece in pieces if piece.strip())


def ocr_accuracy(reference: str, pieces: Sequence[str], fold_umlauts: bool = False) -> tuple[float, float]:
    """(``1 - min(WER, 1)``, WER) of the reading against the reference, after :func:`normalize_ocr`."""
    rate = wer(reference, reading_text(pieces), normalize=_normalizer(fold_umlauts))
    return max(0.0, 1.0 - min(rate, 1.0)), rate


def corpus_ocr_accuracy(references: Sequence[str], readings: Sequence[Sequence[str]]) -> tuple[float, float]:
    """(``1 - min(WER, 1)``, WER) with WER pooled over several texts (edits / reference words)."""
    rate = corpus_wer(list(references), [reading_text(r) for r in readings], normalize=normalize_ocr)
    return max(0.0, 1.0 - min(rate, 1.0)), rate


def agreed_characters(first: Sequence[str], second: Sequence[str]) -> str:
    """The characters of the first reading that the second reading also has (multiset intersection,
    in the first reading's order), after :func:`normalize_chinese`."""
    a = normalize_chinese("".join(first))
    available = Counter(normalize_chinese("".join(second)))
    kept = []
    for ch in a:
        if available[ch] > 0:
            available[ch] -= 1
            kept.append(ch)
    return "".join(kept)


def chinese_accuracy(reference: str, agreed: str) -> tuple[float, float]:
    """(``1 - min(CER, 1)``, CER) of the agreed characters against the reference."""
    rate = cer(reference, agreed, normalize=normalize_chinese)
    return max(0.0, 1.0 - min(rate, 1.0)), rate


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains CJK ideographs (tells Chinese OCR instances from German ones)."""
    return any(
        "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" or "\uf900" <= ch <= "\ufaff" or "\U00020000" <= ch <= "\U0002ffff"
        for ch in text
    )
