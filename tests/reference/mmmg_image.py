"""The published MMMG image evaluator's decisions, re-derived independently for differential tests.

Source read: ``eval_image.py`` at f7de1cf7 (``IObject*``, ``IObjectCount``, ``ISpacial*``, ``IOCR*``,
``IEdit*``, ``IEditAdd``; identical to 0473209a except the counting reader, see below), the counting
prompts ``I_OBJECT_COUNT_PROMPT_LESS`` / ``_MORE`` of ``prompt.py`` at d341665a, and ``utils.py`` at
ecf3dfe (``extract_list``, ``calculate_ssim``).  Written from that behaviour, not from mmverify's code.

The judge is abstracted where mmverify asks its own questions: a test passes the *meaning* of an
answer (present or not, the count the judge saw, the option meaning it chose) and these functions
return what the published code decides from it.  Where the published code parses reply text
(yes/no from the last 20 characters, the first ``Answer: X``, the first ``[...]`` list), the
parser is re-derived here too, so tests can show where it agrees with mmverify's end-anchored
readers and where it does not.  Edit distances are computed here with a plain dynamic programme
(no jiwer), with the published tokenisation.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from typing import Sequence

import numpy as np
from skimage.metrics import structural_similarity

FAILED = "<none>"  # what the published OCR normalisation turns an empty text into


# -- reply readers -----------------------------------------------------------------------------------
def says_yes(reply: str) -> bool:
    """Existence / scene / gate verdict: "yes" anywhere in the last 20 characters, lower-cased."""
    return "yes" in reply.strip().lower()[-20:]


def says_no(reply: str) -> bool:
    """The exclusion reader: "no" anywhere in the last 20 characters, lower-cased."""
    return "no" in reply.strip().lower()[-20:]


def first_option(reply: str, letters: str) -> str | None:
    """Position MCQs: the letter after the first "nswer: " (exactly one space) among ``letters``."""
    found = re.search(f"nswer: ([{letters}])", reply)
    return found.group(1) if found else None


def count_value(reply: str, a_is: int = 1) -> int:
    """Counting MCQ: the first "Answer:" followed by optional whitespace and a capital A-F, as its
    position counted from ``a_is`` (0473209a counted A as 1, f7de1cf7 as 0); 0 when there is none."""
    found = re.search(r"Answer:\s*([A-F])", reply)
    return "ABCDEF".index(found.group(1)) + a_is if found else 0


def count_reply_passes(count: int, reply: str, version: str = "f7de1cf7") -> bool:
    """``IObjectCount`` from the raw reply: the value must be ``count - 2`` (counts up to 6, asked
    with ``COUNT_LESS``) or ``count - 6`` (above 6, ``COUNT_MORE``).  At f7de1cf7 (A = 0) that is
    the option naming the count; at 0473209a (A = 1) it was the option below it."""
    wanted = count - 2 if count <= 6 else count - 6
    return count_value(reply, a_is={"f7de1cf7": 0, "0473209a": 1}[version]) == wanted


def first_list(reply: str) -> list:
    """``extract_list``: the first ``[`` to the nearest ``]`` on one line, as JSON; ``[]`` otherwise."""
    found = re.search(r"\[.*?]", reply)
    if not found:
        return []
    try:
        return json.loads(found.group(0))
    except json.JSONDecodeError:
        return []


# -- object tasks -----------------------------------------------------------------------------------
def scene_objects_score(scene: bool, objects: Sequence[bool], exclude: bool) -> float:
    """include: [scene] x mean(present); exclude: [scene] x mean(not present).  ``objects`` are the
    presence verdicts (the published exclusion asks the presence question and inverts it)."""
    values = [float(not p) if exclude else float(p) for p in objects]
    return float(scene) * sum(values) / len(values)


def existence_score(objects: Sequence[bool]) -> float:
    """attribute, cot, commonsense, relation_two, relation_all: mean of the existence verdicts."""
    return sum(map(float, objects)) / len(objects)


# the option sets of the counting question in letter order (A-F), by the meaning of each option;
# the published code asks the first (I_OBJECT_COUNT_PROMPT_LESS) for annotated counts up to 6 and
# the second (_MORE) for counts above 6 (one question)
COUNT_UP_TO_6 = ("fewer than 3", 3, 4, 5, 6, "more than 6")
COUNT_ABOVE_6 = ("fewer than 7", 7, 8, 9, 10, "more than 10")


def option_for(seen: int, options: Sequence[object]) -> object:
    """The option of ``options`` that a judge who counts ``seen`` objects picks."""
    if seen in options:
        return seen
    low = next(o for o in options if isinstance(o, str) and o.startswith("fewer"))
    high = next(o for o in options if isinstance(o, str) and o.startswith("more"))
    return low if seen < int(str(low).split()[-1]) else high


def count_options(count: int) -> tuple[object, ...]:
    return COUNT_UP_TO_6 if count <= 6 else COUNT_ABOVE_6


def count_passes(count: int, seen: int) -> bool:
    """The published decision: the judge must pick the option that names the annotated count."""
    return option_for(seen, count_options(count)) == count


def published_count_letter(count: int) -> str:
    """The letter the published code (f7de1cf7) expects: value ``count - 2`` up to 6, ``count - 6``
    above, with A = 0 -- in both option sets the letter of the option naming the count."""
    value = count - 2 if count <= 6 else count - 6
    return "ABCDEF"[value]


def relative_score(gate: bool, answered: str, relation: str) -> float:
    """One combined gate ("exactly one A and exactly one B"), then A = left/above, B = right/below."""
    expected = {"left": "A", "right": "B", "above": "A", "below": "B"}[relation]
    return float(gate and answered == expected)


def absolute_score(gates: Sequence[bool], answered: Sequence[str | None], positions: Sequence[str]) -> float:
    """Product over constraints of [exactly one] x [quadrant letter right]."""
    letters = {"bottom left": "A", "bottom right": "B", "up left": "C", "up right": "D"}
    return float(all(g and a == letters[p] for g, a, p in zip(gates, answered, positions)))


# -- OCR --------------------------------------------------------------------------------------------
def normalize_text(text: str) -> str:
    """``IOCR.normalize_text``: lower, strip, NFD without combining marks, ASCII punctuation removed;
    an empty result becomes ``<none>``."""
    text = unicodedata.normalize("NFD", text.lower().strip())
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    text = text.translate(str.maketrans("", "", string.punctuation))
    return text or FAILED


def reading(pieces: Sequence[str]) -> str:
    """What the published code keeps of a list reading: the pieces joined with spaces, lower-cased."""
    return " ".join(pieces).lower().strip()


def _edits(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two token sequences."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def _words(text: str) -> list[str]:
    """The WER tokeniser: runs of two or more whitespace characters become one space, the ends are
    stripped, and the text is split at spaces (a lone newline stays inside its word)."""
    text = re.sub(r"\s\s+", " ", text).strip()
    return [w for w in text.split(" ") if w]


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Pooled WER: total word edits over total reference words."""
    edits = sum(_edits(_words(r), _words(h)) for r, h in zip(references, hypotheses))
    return edits / sum(len(_words(r)) for r in references)


def ocr_score(references: Sequence[str], readings: Sequence[Sequence[str]]) -> float:
    """i_ocr (one text), i_ocr_two (two), i_ocr_german, the text edits: 1 - min(pooled WER, 1)."""
    refs = [normalize_text(r) for r in references]
    hyps = [normalize_text(reading(p)) for p in readings]
    return 1.0 - min(word_error_rate(refs, hyps), 1.0)


def chinese_characters(reply: str) -> str:
    """The characters of U+4E00-U+9FFF in a reply, in order."""
    return "".join(re.findall("[\u4e00-\u9fff]", reply))


def chinese_score(reference: str, first: str, second: str, order: Sequence[str] | None = None) -> float:
    """1 - min(CER, 1) of the set of characters both readers saw.  The published code joins a
    ``set``, whose order is arbitrary; ``order`` fixes it (default: first appearance in ``first``)."""
    shared = set(chinese_characters(first)) & set(chinese_characters(second))
    sequence = order if order is not None else list(dict.fromkeys(chinese_characters(first)))
    hypothesis = "".join(ch for ch in sequence if ch in shared) or FAILED
    truth = reference.strip() or FAILED
    return 1.0 - min(_edits(list(truth), list(hypothesis)) / len(truth), 1.0)


# -- editing ----------------------------------------------------------------------------------------
def edit_box(bbox: Sequence[int], width: int, height: int, divisor: int) -> tuple[int, int, int, int]:
    """The annotated box widened by ``size // divisor`` on each side and clipped to the image."""
    mx, my = width // divisor, height // divisor
    return (max(bbox[0] - mx, 0), max(bbox[1] - my, 0), min(bbox[2] + mx, width), min(bbox[3] + my, height))


def outside_ssim(generated: np.ndarray, source: np.ndarray, box: tuple[int, int, int, int]) -> float:
    """SSIM of the two same-size RGB images with ``box`` set to black in both (skimage defaults)."""
    x0, y0, x1, y1 = box
    a, b = np.array(generated, copy=True), np.array(source, copy=True)
    a[y0:y1, x0:x1] = 0
    b[y0:y1, x0:x1] = 0
    return float(structural_similarity(a, b, channel_axis=-1))


def edit_crop(generated: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """What the judge (or DreamSim) is shown: the widened box of the resized generation."""
    x0, y0, x1, y1 = box
    return generated[y0:y1, x0:x1]
