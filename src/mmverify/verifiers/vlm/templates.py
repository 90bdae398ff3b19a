"""The questions put to a vision-language judge, one template per question type.

Principles (from the MMMG study of judge reliability):

* reasoning first, verdict last -- every question ends by asking for a final ``Answer:`` line, and
  the strict parsers read only that; a judge that must commit to "Yes" before looking talks itself
  into it (the ``mmmg`` profile reads some answers with the published readers instead, named by
  :attr:`Question.reader`: see :mod:`.published`);
* multiple choice instead of free numbers or positions, with an explicit way out: "fewer than 3 or
  none" / "more than 6" for counts, "neither" for relative positions, "centre" for quadrants;
* exclusions are checked by asking whether the thing is *present* and inverting the verdict, as
  the published evaluator does: a judge that leans towards "Yes" then errs towards failing the
  exclusion, never towards passing it (the ``absence`` template is kept for callers that want the
  negative phrasing);
* OCR returns a JSON list, so the reading is data and not prose; only the main text is read (small
  or unclear text is ignored, as the published OCR prompts ask); Chinese is read conservatively
  (only characters the judge is sure of) because judges "read" the characters they expect.

Templates are data.  Changing any wording changes scores, so it comes with a new
``TEMPLATE_VERSION`` and a new ``version`` on the changed templates (the evidence names each
question as ``<id>@<version>``).  Tasks put :data:`TEMPLATE_KEY` -- the version and a digest of
every template's wording -- in ``params()``, which is part of every result key, so an edit rescores
even where nobody bumped a version.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

TEMPLATE_VERSION = 3

AnswerKind = Literal["yes_no", "choice", "text_list", "verdict"]

_YES_NO_END = "Think step by step, then end your reply with a final line `Answer: Yes` or `Answer: No`."
_CHOICE_END = (
    "Think step by step, then end your reply with a final line `Answer: <letter>` giving the letter of "
    "exactly one option."
)
_LIST_END = (
    "End your reply with one final line that holds a JSON list of the pieces of text in reading order, "
    'for example `["first line", "second line"]`, or `[]` if {none}.'
)


@dataclass(frozen=True)
class Template:
    id: str
    kind: AnswerKind
    text: str  # str.format placeholders; literal braces in the text are doubled
    letters: tuple[str, ...] = ()  # option letters, for ``choice`` templates
    version: int = 1  # this template's wording version (bumped with the wording)

    def fill(self, *, reader: str = "end", **values: str) -> "Question":
        prompt = self.text.format(**values)
        return Question(
            template=self.id, kind=self.kind, prompt=prompt, letters=self.letters, version=self.version, reader=reader
        )


@dataclass(frozen=True)
class Question:
    """A filled template: what is sent to the judge and how its reply is read."""

    template: str
    kind: AnswerKind
    prompt: str
    letters: tuple[str, ...] = ()
    version: int = 1
    # how the reply is read: "end" (the strict readers of :mod:`.parse`) or the name of one of the
    # published readers of :mod:`.published` (the ``mmmg`` profile, where the published code read
    # this question's replies differently)
    reader: str = "end"

    @property
    def template_ref(self) -> str:
        return f"{self.template}@{self.version}"


def _t(id: str, kind: AnswerKind, *paragraphs: str, letters: str = "", version: int = 1) -> Template:
    return Template(id, kind, "\n\n".join(paragraphs), tuple(letters), version)


# -- counting ---------------------------------------------------------------------------------------
COUNT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("A", "fewer than 3, or none"),
    ("B", "3"),
    ("C", "4"),
    ("D", "5"),
    ("E", "6"),
    ("F", "more than 6"),
)
# the follow-up question of the strict profile's two stages, for counts above 6
COUNT_MORE_OPTIONS: tuple[tuple[str, str], ...] = (
    ("A", "7"),
    ("B", "8"),
    ("C", "9"),
    ("D", "10"),
    ("E", "fewer than 7"),
    ("F", "more than 10"),
)
# the published question for counts above 6 (prompt.py I_OBJECT_COUNT_PROMPT_MORE): the layout of
# COUNT_OPTIONS shifted by four, so that its letters mean what the published reader expects
COUNT_ABOVE_SIX_OPTIONS: tuple[tuple[str, str], ...] = (
    ("A", "fewer than 7, or none"),
    ("B", "7"),
    ("C", "8"),
    ("D", "9"),
    ("E", "10"),
    ("F", "more than 10"),
)

# -- absolute position ---------------------------------------------------------------------------
QUADRANT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("A", "the bottom-left quarter"),
    ("B", "the bottom-right quarter"),
    ("C", "the top-left quarter"),
    ("D", "the top-right quarter"),
    ("E", "the centre: it lies across the middle lines rather than inside one quarter"),
)


def _options(options: tuple[tuple[str, str], ...]) -> str:
    return "Options:\n" + "\n".join(f"{letter}. {text}" for letter, text in options)


TEMPLATES: Mapping[str, Template] = {
    t.id: t
    for t in (
        _t(
            "existence", "yes_no",
            "Look carefully at the image and decide whether it shows the following:\n{target}",
            "Every part of this description must hold: the objects, how many of each there are, their "
            "colours and other attributes, and how they relate to each other. For each part, describe "
            "what the image actually shows before deciding. If any part is missing, wrong, or only "
            "ambiguously present, the answer is No.",
            _YES_NO_END,
        ),
        _t(
            "absence", "yes_no",
            "Look carefully at the image and decide whether it is completely free of the following:\n{target}",
            "Search the whole image: the background, the edges, small or partly hidden things, and "
            "pictures, prints or reflections inside the image. Describe anything that could match before "
            "deciding. Answer Yes only if nothing matching it appears anywhere; answer No if it appears "
            "at all, even partly.",
            _YES_NO_END,
        ),
        _t(
            "scene", "yes_no",
            "Look at the image as a whole and decide whether its overall setting is:\n{target}",
            "Judge only the scene: the place, the environment, the time of day and the general "
            "situation. Ignore whether particular other objects are present or absent. Describe the "
            "setting you see before deciding.",
            _YES_NO_END,
        ),
        _t(
            "exactly_one", "yes_no",
            "Look carefully at the image and find every {target} in it, including small, partly hidden or "
            "cut-off ones. Describe each one you find and where it is.",
            "Answer Yes only if there is exactly one {target}; answer No if there is none or more than one.",
            _YES_NO_END,
        ),
        _t(
            "count", "choice",
            "Count the {target} in the image. Count every distinct, recognisable one, including partly "
            "hidden ones, and do not count any of them twice. List them one by one, saying where each "
            "is, before giving the total.",
            _options(COUNT_OPTIONS),
            _CHOICE_END,
            letters="ABCDEF",
        ),
        _t(
            "count_more", "choice",
            "Count the {target} in the image; there may be many of them. Count every distinct, "
            "recognisable one, including partly hidden ones, and do not count any of them twice. List "
            "them one by one, saying where each is, before giving the total.",
            _options(COUNT_MORE_OPTIONS),
            _CHOICE_END,
            letters="ABCDEF",
        ),
        _t(
            "count_above_six", "choice",
            "Count the {target} in the image; there may be many of them. Count every distinct, "
            "recognisable one, including partly hidden ones, and do not count any of them twice. List "
            "them one by one, saying where each is, before giving the total.",
            _options(COUNT_ABOVE_SIX_OPTIONS),
            _CHOICE_END,
            letters="ABCDEF",
        ),
        _t(
            "relative_horizontal", "choice",
            "Find the {first} and the {second} in the image and compare their horizontal positions, "
            "using the centre of each as seen in the picture (the viewer's left and right).",
            "Options:\nA. The {first} is to the left of the {second}.\n"
            "B. The {first} is to the right of the {second}.\n"
            "C. Neither: they are at about the same horizontal position, or one of them cannot be found.",
            _CHOICE_END,
            letters="ABC",
        ),
        _t(
            "relative_vertical", "choice",
            "Find the {first} and the {second} in the image and compare their vertical positions, "
            "using the centre of each as seen in the picture (higher or lower in the frame).",
            "Options:\nA. The {first} is above the {second}.\n"
            "B. The {first} is below the {second}.\n"
            "C. Neither: they are at about the same height, or one of them cannot be found.",
            _CHOICE_END,
            letters="ABC",
        ),
        _t(
            "absolute", "choice",
            "Find the {target} in the image. Imagine a vertical and a horizontal line through the middle "
            "of the image, dividing it into four equal quarters, and decide where the {target} is, "
            "judging by its centre as seen in the picture.",
            _options(QUADRANT_OPTIONS),
            _CHOICE_END,
            letters="ABCDE",
        ),
        _t(
            "ocr", "text_list",
            "Read the main text in the image: the prominent words a viewer is meant to read, such as a "
            "title, a sign, a label or a caption. Ignore small or unclear text: fine print, tiny marks "
            "near the edges or corners, and blurred or partly hidden lettering.",
            "Copy each separate piece of main text exactly as it is written: same spelling, words and "
            "numbers, from top to bottom and left to right. Do not correct, translate or complete it.",
            _LIST_END.format(none="the image has no clearly readable main text"),
            version=2,
        ),
        _t(
            "ocr_object", "text_list",
            "Find {target} in the image and read the main text written on it. Ignore text anywhere "
            "else, and ignore small or unclear text: fine print, tiny marks near its edges, and blurred "
            "or partly hidden lettering.",
            "Copy that text exactly as it is written: same spelling, words and numbers, from top to "
            "bottom and left to right. Do not correct, translate or complete it.",
            _LIST_END.format(none="that object is missing or carries no clearly readable main text"),
            version=2,
        ),
        _t(
            "ocr_chinese", "text_list",
            "Read the main Chinese characters in the image, ignoring small or unclear text. Be "
            "conservative: write down only characters you can identify with certainty. Leave out any "
            "character that is blurred, distorted, incomplete or not a real character, and never fill "
            "in a character because a word or phrase would usually contain it.",
            _LIST_END.format(none="there is no character you are sure of"),
            version=2,
        ),
    )
}


def question(template_id: str, *, reader: str = "end", **values: str) -> Question:
    """Fill the template ``template_id`` (KeyError for an unknown id or a missing value); ``reader``
    names how its reply is read (see :class:`Question`)."""
    return TEMPLATES[template_id].fill(reader=reader, **values)


def wording_key(version: int, templates: Iterable[Template]) -> str:
    """``version`` and a digest of the templates' wording: what tasks put in their result key, so
    an edited prompt rescores even where its version was not bumped."""
    digest = hashlib.sha256()
    for template in sorted(templates, key=lambda t: t.id):
        digest.update(repr((template.id, template.kind, template.text, template.letters, template.version)).encode())
    return f"{version}:{digest.hexdigest()[:12]}"


TEMPLATE_KEY = wording_key(TEMPLATE_VERSION, TEMPLATES.values())


# -- figures judged against criteria (it_coherence_code) -------------------------------------------
# Kept out of TEMPLATES and versioned on its own, so that it rescores only the task that asks it.
# The reply ends with ``VERDICT: PASS`` / ``VERDICT: FAIL`` (read by ``parse.parse_verdict``).
CODE_TEMPLATE_VERSION = 1

CODE_CRITERIA = Template(
    "code_criteria",
    "verdict",
    "\n\n".join(
        (
            "The image below was rendered from code written to draw the figure described here. Decide "
            "whether the image meets the numbered criteria.",
            "Description of the intended figure:\n{description}",
            "Criteria:\n{criteria}",
            "Go through the criteria one at a time. For each, first describe what the image shows in the "
            "parts the criterion is about -- labels, nodes or cells, edges or arrows, with their colours, "
            "shapes, positions and text -- and then compare detail by detail. A criterion is met only if "
            "every detail it names is right: one wrong detail and the whole criterion is not met. Close "
            "the discussion of each criterion with MET or NOT MET. A blank image meets no criterion.",
            "The figure passes when strictly more than half of the criteria are met (2 of 3, 3 of 4, 3 of "
            "5, and so on).",
            "End your reply with one final line: `VERDICT: PASS` or `VERDICT: FAIL`.",
        )
    ),
    version=CODE_TEMPLATE_VERSION,
)
CODE_TEMPLATE_KEY = wording_key(CODE_TEMPLATE_VERSION, [CODE_CRITERIA])


def code_criteria_question(description: str, criteria: Sequence[str]) -> Question:
    """The criteria question for one figure; the criteria are numbered from 1 in the given order."""
    numbered = "\n".join(f"{i}. {criterion}" for i, criterion in enumerate(criteria, start=1))
    return CODE_CRITERIA.fill(description=description, criteria=numbered)


# -- answer keys ------------------------------------------------------------------------------------
def count_letter(count: int) -> str:
    """The counting option that an annotated count falls in (A below 3, F above 6)."""
    if count < 3:
        return "A"
    if count > 6:
        return "F"
    return "BCDE"[count - 3]


def published_count_letter(count: int) -> str:
    """The letter the published counting rule requires for an annotated count of 3 to 10: the
    option naming the count in the question the count selects (``count`` up to 6,
    ``count_above_six`` above), B = 3 ... E = 6 and B = 7 ... E = 10."""
    if not 3 <= count <= 10:
        raise ValueError(f"the published counting questions name counts 3 to 10, got {count}")
    return "BCDE"[(count - 3) % 4]


def count_more_letter(count: int) -> str:
    """The ``count_more`` option that a count above 6 falls in (A-D for 7-10, F above 10)."""
    if count <= 6:
        raise ValueError(f"count_more asks about counts above 6, got {count}")
    return "F" if count > 10 else "ABCD"[count - 7]


def _has(text: str, *words: str) -> bool:
    return any(re.search(rf"\b{word}", text) for word in words)


def quadrant_letter(position: str) -> str:
    """``"bottom right"``, ``"top-left"``, ``"upper left corner"``, ``"centre"`` -> option letter.

    Raises ValueError for anything that names no single quadrant ("left", "top center",
    "top bottom left"): an annotation that cannot be scored is the user's to fix."""
    text = re.sub(r"[^a-z]+", " ", position.lower().replace("centre", "center"))
    text = re.sub(r"\b(top|bottom|upper|lower|up|down)(left|right)\b", r"\1 \2", text)  # "topleft"
    top, bottom = _has(text, "top", "upper", "up\\b", "above"), _has(text, "bottom", "lower", "down", "below")
    left, right = _has(text, "left"), _has(text, "right")
    centre = _has(text, "center", "central", "middle")
    if not (top and bottom) and not (left and right):
        if (top or bottom) and (left or right) and not centre:
            return {(False, False): "A", (False, True): "B", (True, False): "C", (True, True): "D"}[(top, right)]
        if centre and not (top or bottom or left or right):
            return "E"
    raise ValueError(f"cannot read a quadrant from position {position!r}")


def relative_key(relation: str) -> tuple[str, str]:
    """``"to the left of"`` -> (``"relative_horizontal"``, ``"A"``); above/below -> vertical.

    Raises ValueError for a relation that names no side, or names two."""
    text = re.sub(r"[^a-z]+", " ", relation.lower())
    keys = set()
    if _has(text, "left"):
        keys.add(("relative_horizontal", "A"))
    if _has(text, "right"):
        keys.add(("relative_horizontal", "B"))
    if _has(text, "above", "over", "on top", "higher", "upper"):
        keys.add(("relative_vertical", "A"))
    if _has(text, "below", "under", "beneath", "lower", "underneath"):
        keys.add(("relative_vertical", "B"))
    if len(keys) != 1:
        raise ValueError(f"cannot read left/right/above/below from relation {relation!r}")
    return keys.pop()
