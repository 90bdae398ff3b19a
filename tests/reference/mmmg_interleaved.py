"""The published MMMG interleaved evaluator's decisions, re-derived independently for differential tests.

Source read: ``eval_interleaved.py`` (``ITCoherence*``, ``IConsistencySemantic``) at d341665a and the
``extract_json`` / ``extract_list`` helpers and OCR normalisation (``eval_image.py:IOCR``) it uses.
Written from the behaviour, not from mmverify's code: every function here works on the published
*response string* (text with ``<image_start><image_N><image_end>`` placeholders) or on the values
the published code computes, and returns what the published code decides.

The judge is abstracted: a test passes the *meaning* of each judge answer (a bool for a yes/no
question, an option letter, a list of text pieces), because the published code parses replies to
its own prompts, which mmverify does not send.  Crashes of the published code (a ``KeyError``, a
``TypeError`` on a value of the wrong type) are recorded as a failed item (score 0), the way a
corrected evaluator would count them.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Sequence

PLACEHOLDER = re.compile(r"<image_start><image_\d+><image_end>")
FAILED = "<none>"  # what the published OCR normalisation turns an empty text into


def placeholder(k: int) -> str:
    return f"<image_start><image_{k}><image_end>"


# -- response shape -------------------------------------------------------------------------------
def text_to_read(response: str, image_count: int, several_images: bool) -> str | None:
    """The text a coherence task parses, or None when the response's shape already fails it.

    One-image tasks need exactly one image and read only the text after it; several-image tasks
    need at least one image and read all the text."""
    pieces = PLACEHOLDER.split(response)
    if several_images:
        return "".join(pieces) if len(pieces) >= 2 and image_count >= 1 else None
    return pieces[1] if len(pieces) == 2 and image_count == 1 else None


# -- the helpers' span readers ----------------------------------------------------------------------
def first_object(text: str) -> dict[str, Any]:
    """``extract_json``: the first ``{`` up to the nearest ``}`` (newlines allowed), as JSON; if that
    fails, the same span with every whitespace run made a single space; ``{}`` otherwise."""
    found = re.compile(r"\{.*?\}", re.S).search(text)
    if not found:
        return {}
    for attempt in (found.group(), re.sub(r"\s+", " ", found.group()).strip()):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
        except RecursionError:  # a crash of the published code: the item fails
            return {}
    return {}


def first_list(text: str) -> list[Any]:
    """``extract_list``: the first ``[`` ... nearest ``]`` within one line, as JSON; ``[]`` otherwise."""
    found = re.compile(r"\[.*?\]").search(text)
    if not found:
        return []
    try:
        return json.loads(found.group())
    except (json.JSONDecodeError, RecursionError):
        return []


def _set_or_none(values: Sequence[Any]) -> set[Any] | None:
    try:
        return set(values)
    except TypeError:  # unhashable items: the published comparison crashes
        return None


# -- count ------------------------------------------------------------------------------------------
def count_claim(text: str) -> int | None:
    """The published ``<count>`` reading: the tag exactly as written, and -- a quirk of its pattern,
    one repeated single-digit group -- the *last* digit of the number; None unless 2 < N < 7."""
    found = re.search(r"<count>(\d+)</count>", text)
    if found is None:
        return None
    value = int(found.group(1)[-1])
    return value if 2 < value < 7 else None


def count_passes(claim: int, letter: str) -> bool:
    """Option letters stand for counts A=fewer than 3 (2), B=3, ..., F=more than 6 (7)."""
    return ord(letter.lower()) - ord("a") + 2 == claim


def count_reply_passes(claim: int, reply: str) -> bool | None:
    """``ITCoherenceCount.model_process_response`` on the raw reply: the code point of the first
    character of the stripped, lower-cased reply, minus 95, must be the claimed count (so "b..."
    confirms 3 whatever the reply goes on to say).  None where the published code crashed (an
    empty or all-whitespace reply has no first character)."""
    lowered = reply.strip().lower()
    if lowered == "":
        return None
    return ord(lowered[0]) - 95 == claim


# -- colour -----------------------------------------------------------------------------------------
PUBLISHED_MULTICOLOURED = ["microwave", "ball", "TV", "globe", "toothbrush", "knife", "tennis racket", "camera"]


@dataclass(frozen=True)
class ColourQuestion:
    obj: str
    colour: str
    rule_out_other_colours: bool


def colour_questions(text: str, objects: Sequence[str], colours: Sequence[str]) -> list[ColourQuestion] | None:
    mapping = first_object(text)
    if not mapping:
        return None
    keys, values = _set_or_none(list(mapping)), _set_or_none(list(mapping.values()))
    if keys != set(objects) or values != set(colours):
        return None
    return [ColourQuestion(o, c, o not in PUBLISHED_MULTICOLOURED) for o, c in mapping.items()]


# -- size -------------------------------------------------------------------------------------------
PUBLISHED_COMPARATIVE = {"size": "larger", "area": "larger", "volume": "bigger", "length": "longer", "height": "higher"}


def size_pairs(text: str, objects: Sequence[str]) -> list[tuple[str, str]] | None:
    """(smaller, larger) of every question, or None when the ranking is refused."""
    ranking = first_list(text)
    if not ranking or _set_or_none(ranking) != set(objects):
        return None
    n = len(objects)
    return [(ranking[i], ranking[j]) for i in range(n) for j in range(i + 1, n)]


# -- positions --------------------------------------------------------------------------------------
def chosen_letters(text: str, count: int, letters: str) -> list[str] | None:
    """The model's option letters (upper case), or None when the published check refuses them."""
    items = first_list(text)
    if not items or not all(isinstance(item, str) for item in items):
        return None  # a non-string item crashes the published ``strip``
    chosen = [item.strip().lower() for item in items]
    if len(chosen) != count or not set(chosen) < set(letters.lower()):
        return None
    return [c.upper() for c in chosen]


def positions_score(gates: Sequence[bool], answers: Sequence[str | None], claimed: Sequence[str]) -> float:
    """Question i counts when its gate passed and the judge's letter is the claimed one; product."""
    score = 1.0
    for gate, answer, claim in zip(gates, answers, claimed):
        score *= float(gate and answer == claim)
    return score


def relative_gate_targets(pairs: Sequence[Sequence[str]]) -> list[str]:
    return [f"exactly one {a} and exactly one {b}" for a, b in pairs]


def absolute_gate_targets(objects: Sequence[str]) -> list[str]:
    return [f"exactly one {o}" for o in objects]


# -- OCR --------------------------------------------------------------------------------------------
def ocr_claim(text: str) -> str | None:
    """The ``<text>`` content (one line) when it has 5-10 space-separated pieces."""
    found = re.search(r"<text>(.*?)</text>", text)
    if found is None or not 5 <= len(found.group(1).split(" ")) <= 10:
        return None
    return found.group(1)


def normalise_ocr(text: str) -> str:
    lowered = unicodedata.normalize("NFD", text.lower().strip())
    kept = "".join(ch for ch in lowered if unicodedata.category(ch) != "Mn")
    return kept.translate({ord(p): None for p in string.punctuation}) or FAILED


def word_edits(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Levenshtein distance over words."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, start=1):
        current = [i] + [0] * len(hypothesis)
        for j, hyp_word in enumerate(hypothesis, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word))
        previous = current
    return previous[-1]


def ocr_score(claim: str, pieces: Sequence[str]) -> float:
    """1 - min(WER, 1) of the judge's pieces (joined with spaces) against the model's own text."""
    reference = normalise_ocr(claim).split()
    hypothesis = normalise_ocr(" ".join(pieces).lower().strip()).split()
    return 1.0 - min(word_edits(reference, hypothesis) / len(reference), 1.0)


# -- math -------------------------------------------------------------------------------------------
def math_description(text: str) -> str | None:
    found = re.search(r"<<(.*?)>>", text)
    return None if found is None else found.group(1)


def math_score(description: str | None, text_verdict: Callable[[str], bool], image_verdict: bool) -> float:
    text_ok = 0.0 if description is None else float(text_verdict(description))
    return text_ok * float(image_verdict)


# -- code -------------------------------------------------------------------------------------------
def code_score(row: dict[str, Any], image_count: int, judged: Callable[[str, list[str] | None], bool], similarity: float) -> float:
    """[judge accepts the last image] x DreamSim similarity.  ``judged(caption, criteria)`` stands
    for the VERDICT question (criteria given) or the existence question (criteria None)."""
    if image_count < 1:
        return 0.0
    caption = row.get("caption", row.get("object"))  # the published class reads ``caption`` only
    if caption is None:
        return 0.0
    return float(judged(caption, row.get("criteria"))) * similarity


# -- object consistency ---------------------------------------------------------------------------
def consistency_score(objects: Sequence[str], image_count: int, present: Callable[[int, str], bool]) -> float:
    """Image i must show ``objects[i]``; a different number of images fails; product."""
    if image_count != len(objects):
        return 0.0
    score = 1.0
    for i, target in enumerate(objects):
        score *= float(present(i, target))
    return score
