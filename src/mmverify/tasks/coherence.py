"""Self-coherence tasks: the model draws one image and then states facts about it in text; a judge
checks the image against the model's own statements (DESIGN §5, "coherence").

* it_coherence_count -- ``<count>N</count>`` with 2 < N < 7, and the judge's counting MCQ letter
  must be N's letter (binary);
* it_coherence_color -- a JSON map object -> colour whose keys are exactly ``object`` and whose
  values are exactly ``color``; per object an existence question "exactly one <obj>, mostly <colour>,
  no other major colour" (without the last clause for naturally multi-coloured objects); product;
* it_coherence_size -- a JSON ranking list (smallest first) that is a permutation of ``object``;
  for every pair i < j of the ranking the judge must confirm exactly one of each and the later one
  obviously larger (longer, taller, ...) than the earlier one, as the published pipeline asks;
  product;
* it_coherence_spacial_relative / _absolute -- a JSON list of the letters the model chose for the
  position questions in its instruction; each object must appear exactly once, then the judge
  answers the same multiple-choice question and must give the model's letter; the product over
  the questions, as published (so the score is binary: a mean of agreements would reward a
  picture that contradicts half of what its author said about it);
* it_coherence_ocr -- the model's text, cut out with the instance's ``format`` regex (default
  ``<text>(.*?)</text>``), 2 to 10 words as the instructions ask; score = 1 - min(WER, 1) of the
  judge's OCR of ``object`` against it.

Response shape: exactly one image and some text (else 0 with ``no_image`` / ``wrong_image_count``
/ ``no_text``).  Text the model was told to write but did not (no ``<count>``, no parsable JSON,
a map or ranking that does not match the annotation) is the generator's fault: score 0 with a
reason, and no judge is asked.  A judge reply that cannot be read is an ``error`` row
(``judge_unparseable``), never a 0.  Questions behind a failed product factor are not asked
(``evidence.not_asked``).

The reasoning tasks (math, code) build on :class:`CoherenceTask` in :mod:`.reasoning`.
"""

from __future__ import annotations

import itertools
import json
import re
from abc import abstractmethod
from typing import Any, Callable, ClassVar, Mapping, Sequence

from ..core.errors import GenerationFault
from ..core.types import Check, Instance
from ..models.judge_config import judge_identities
from ..verifiers.vlm.coherence_templates import COHERENCE_TEMPLATE_VERSION
from ..verifiers.vlm.ocr import ocr_accuracy
from ..verifiers.vlm.record import Verdict
from ..verifiers.vlm.templates import TEMPLATE_VERSION, Question, count_letter
from .base import Task, require_field
from .image_judged import JudgeSession, bare, invalid, text_of, texts_of
from .response import Response

_EXCERPT = 300
MAX_SEARCHED_TEXT = 100_000  # characters of the reply searched for the answer the instruction asked for
MAX_JSON_STARTS = 64


# -- reading the model's text ----------------------------------------------------------------------
def excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "…"


def fault(reason: str, message: str, text: str, **evidence: Any) -> GenerationFault:
    """The model's text does not say what its instruction asked for: its fault, scored 0."""
    return GenerationFault(reason, message, text=excerpt(text), **evidence)


def first_json(text: str, kind: type) -> Any | None:
    """The first JSON value of type ``kind`` (dict or list) that starts at a ``{`` or ``[`` of ``text``.

    The published pipeline took the first bracketed span and gave up if it did not parse; trying
    the first :data:`MAX_JSON_STARTS` opening brackets in turn also reads ``Here: {"a": "b"}`` after
    a stray brace in prose, while a reply made of brackets cannot cost quadratic time."""
    opener = "{" if kind is dict else "["
    decoder = json.JSONDecoder()
    text = text[:MAX_SEARCHED_TEXT]
    starts = re.finditer(re.escape(opener), text)
    for match in itertools.islice(starts, MAX_JSON_STARTS):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the parser's depth
            continue
        if isinstance(value, kind):
            return value
    return None


def _key(text: str) -> str:
    """How names are compared: case and surrounding space do not matter ("TV" and "tv")."""
    return " ".join(text.split()).casefold()


def strings_of(value: Any) -> list[str] | None:
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def parse_count(text: str) -> int:
    """N of the first ``<count>N</count>``; GenerationFault when there is none or N is not 3..6."""
    match = re.search(r"<count>\s*(\d+)\s*</count>", text, re.IGNORECASE)
    if match is None:
        raise fault("missing_count", "the text has no <count>N</count>", text)
    count = int(match.group(1))
    if not 2 < count < 7:
        raise fault("count_out_of_range", f"<count>{count}</count> is not more than 2 and less than 7", text, count=count)
    return count


def match_names(names: Sequence[str], wanted: Sequence[str]) -> list[str] | None:
    """``names`` in ``wanted``'s spelling if they are ``wanted`` in some order (case-insensitive), else None."""
    spelling = {_key(w): w for w in wanted}
    keys = [_key(n) for n in names]
    if len(keys) != len(wanted) or len(set(keys)) != len(keys) or set(keys) != set(spelling):
        return None
    return [spelling[k] for k in keys]


def parse_letters(text: str, count: int, letters: str) -> list[str]:
    """The JSON list of ``count`` option letters (e.g. ``["A", "D"]``), upper-cased."""
    value = strings_of(first_json(text, list))
    if value is None:
        raise fault("missing_letters", 'the text has no JSON list of letters such as ["A", "B"]', text)
    answers = [v.strip().upper() for v in value]
    if len(answers) != count or any(len(a) != 1 or a not in letters for a in answers):
        raise fault(
            "bad_letters", f"expected {count} letters from {', '.join(letters)}, got {value!r}", text, letters=value
        )
    return answers


_FORMAT_LITERAL = r"(?:\\.|[^\\.*+?\[\]()|])*"  # escaped characters and non-metacharacters ({ } ^ $ too)
_FORMAT_SHAPE = re.compile(rf"{_FORMAT_LITERAL}\(\.\*\??\){_FORMAT_LITERAL}")


def format_regex(instance: Instance, fmt: Any) -> re.Pattern[str]:
    """The instance's ``format``: literal text around one ``(.*?)`` or ``(.*)`` group, as in every
    published row.  Other regexes are refused -- inline instances reach the reward server, and a
    regex with nested quantifiers could take exponential time on a long reply."""
    pattern = text_of(instance, fmt, "format")
    if len(pattern) > 200 or not _FORMAT_SHAPE.fullmatch(pattern):
        raise invalid(instance, f"format must be literal text around one (.*?) or (.*) group, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise invalid(instance, f"format {pattern!r} is not a regular expression: {exc}") from None


# -- the task frame --------------------------------------------------------------------------------
class CoherenceSession(JudgeSession):
    """A judge session that can also ask questions built elsewhere, with or without the image."""

    def ask_question(self, question: Question, *, step: str, role: str = "default", with_image: bool = True) -> Verdict:
        images = [self.image] if with_image else []
        return self.record.ask(self.judge(role), question, images, step=step, role=role)


class CoherenceTask(Task):
    """Read the annotation, check the response's shape, read the model's claim from its text, then
    ask the judge.  Subclasses implement :meth:`read`, :meth:`claim` and :meth:`judge`."""

    roles: ClassVar[tuple[str, ...]] = ("default",)
    several_images: ClassVar[bool] = False  # reasoning tasks allow several images and judge the last

    def params(self) -> Mapping[str, Any]:
        # which model answers each role is part of the result key: another judge means a rescore
        return {
            "templates": TEMPLATE_VERSION,
            "coherence_templates": COHERENCE_TEMPLATE_VERSION,
            "roles": list(self.roles),
            "judges": judge_identities(self.roles),
        }

    @abstractmethod
    def read(self, instance: Instance) -> Any:
        """The annotation, validated (ScoringError ``invalid_instance`` when it cannot be scored)."""

    @abstractmethod
    def claim(self, spec: Any, text: str) -> Any:
        """What the model's text states (GenerationFault when it does not state it)."""

    @abstractmethod
    def judge(self, spec: Any, claim: Any, session: CoherenceSession) -> Check: ...

    def score(self, instance: Instance, response: Response) -> Check:
        spec = self.read(instance)  # a bad annotation is the user's problem, whatever the response
        count = len(response.of_type("image"))
        if count == 0:
            raise GenerationFault("no_image", "the response contains no image")
        if count > 1 and not self.several_images:
            raise GenerationFault("wrong_image_count", f"expected 1 image, got {count}", image_count=count)
        text = response.text
        if not text.strip():
            raise GenerationFault("no_text", "the response contains no text")
        claim = self.claim(spec, text)
        image = response.images()[-1]
        return self.judge(spec, claim, CoherenceSession(image))


def _product_of(
    session: JudgeSession, steps: Sequence[tuple[str, Any]], ask: Callable[[str, Any], bool]
) -> tuple[float, dict[str, float]]:
    """Ask yes/no steps in order; the first No makes the product 0 and the rest are not asked."""
    components: dict[str, float] = {}
    for i, (step, item) in enumerate(steps):
        components[step] = float(ask(step, item))
        if not components[step]:
            session.skip(*(s for s, _ in steps[i + 1 :]))
            return 0.0, components
    return 1.0, components


# -- count ------------------------------------------------------------------------------------------
class CoherenceCount(CoherenceTask):
    id = "it_coherence_count"
    binary = True

    def read(self, instance: Instance) -> str:
        target = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(target) != 1:
            raise invalid(instance, f"{self.id} counts one kind of object, got {target!r}")
        return bare(target[0])

    def claim(self, spec: str, text: str) -> int:
        return parse_count(text)

    def judge(self, spec: str, claim: int, session: CoherenceSession) -> Check:
        expected = count_letter(claim)
        answered = session.letter("count", step="count", target=spec)
        match = float(answered == expected)
        return session.check(
            match, {"count_match": match}, object=spec, claimed_count=claim, expected_letter=expected, answered_letter=answered
        )


# -- colour -----------------------------------------------------------------------------------------
# Objects that are rarely one colour (a microwave's door, a globe's map): the judge is not asked to
# rule out other major colours for them (published list; compared case-insensitively).
MULTICOLOURED = frozenset({"microwave", "ball", "tv", "globe", "toothbrush", "knife", "tennis racket", "camera"})


class CoherenceColor(CoherenceTask):
    id = "it_coherence_color"
    binary = True

    def read(self, instance: Instance) -> tuple[list[str], list[str]]:
        objects = texts_of(instance, require_field(instance, "object", "objects"), "object")
        colors = texts_of(instance, require_field(instance, "color", "colors", "colour"), "color")
        for what, names in (("object", objects), ("color", colors)):
            if len({_key(n) for n in names}) != len(names):
                raise invalid(instance, f"{what} names must be distinct, got {names!r}")
        if len(objects) != len(colors):
            raise invalid(instance, f"{len(objects)} objects but {len(colors)} colours")
        return objects, colors

    def claim(self, spec: tuple[list[str], list[str]], text: str) -> list[tuple[str, str]]:
        objects, colors = spec
        mapping = first_json(text, dict)
        if mapping is None:
            raise fault("missing_color_map", "the text has no JSON object mapping objects to colours", text)
        if not all(isinstance(v, str) for v in mapping.values()):
            raise fault("color_map_mismatch", "the colours must be strings", text, color_map=mapping)
        keys = match_names(list(mapping), objects)
        values = match_names(list(mapping.values()), colors)
        if keys is None or values is None:
            raise fault(
                "color_map_mismatch",
                f"the map must give each of {objects} a different colour from {colors}",
                text,
                color_map=mapping,
            )
        assigned = dict(zip(keys, values))
        return [(name, assigned[name]) for name in objects]

    @staticmethod
    def description(name: str, colour: str) -> str:
        if _key(name) in MULTICOLOURED:
            return f"exactly one {name}, whose colour is mostly {colour}"
        return f"exactly one {name}, whose colour is mostly {colour}, with no other major colour"

    def judge(self, spec: Any, claim: list[tuple[str, str]], session: CoherenceSession) -> Check:
        steps = [(f"object_{i}", pair) for i, pair in enumerate(claim)]
        score, components = _product_of(
            session, steps, lambda step, pair: session.yes("existence", step=step, target=self.description(*pair))
        )
        return session.check(score, components, color_map=dict(claim))


# -- size -------------------------------------------------------------------------------------------
# How "bigger" reads for each ``relation`` of the data.
COMPARATIVES: Mapping[str, str] = {
    "size": "larger",
    "area": "larger in area",
    "volume": "larger in volume",
    "length": "longer",
    "height": "taller",
}


class CoherenceSize(CoherenceTask):
    id = "it_coherence_size"
    binary = True

    def read(self, instance: Instance) -> tuple[list[str], str]:
        objects = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(objects) < 2 or len({_key(o) for o in objects}) != len(objects):
            raise invalid(instance, f"object must name at least two distinct objects, got {objects!r}")
        relation = text_of(instance, require_field(instance, "relation"), "relation").lower()
        if relation not in COMPARATIVES:
            raise invalid(instance, f"relation must be one of {', '.join(COMPARATIVES)}, got {relation!r}")
        return objects, relation

    def claim(self, spec: tuple[list[str], str], text: str) -> list[str]:
        objects, _ = spec
        value = strings_of(first_json(text, list))
        if value is None:
            raise fault("missing_ranking", 'the text has no JSON ranking list such as ["a", "b", "c"]', text)
        ranking = match_names(value, objects)
        if ranking is None:
            raise fault("ranking_mismatch", f"the ranking must list each of {objects} once", text, ranking=value)
        return ranking

    def judge(self, spec: tuple[list[str], str], claim: list[str], session: CoherenceSession) -> Check:
        comparative = COMPARATIVES[spec[1]]
        pairs = [(claim[i], claim[j]) for i in range(len(claim)) for j in range(i + 1, len(claim))]
        steps = [(f"pair_{k}", pair) for k, pair in enumerate(pairs)]

        def ask(step: str, pair: tuple[str, str]) -> bool:
            smaller, larger = pair
            target = f"exactly one {smaller}, exactly one {larger}, and the {larger} is obviously {comparative} than the {smaller}"
            return session.yes("existence", step=step, target=target)

        score, components = _product_of(session, steps, ask)
        return session.check(score, components, ranking=claim, relation=spec[1], pairs=[list(p) for p in pairs])


# -- position ---------------------------------------------------------------------------------------
class _CoherencePosition(CoherenceTask):
    """Exactly-one gates for every object, then one position MCQ per question (role ``spatial``);
    each answer must be the model's letter.  Product, stopping at the first failure."""

    binary = True
    roles = ("default", "spatial")
    letters: ClassVar[str]

    @abstractmethod
    def questions(self, spec: Any) -> list[tuple[str, dict[str, str]]]:
        """(template, values) of each position question, in the instruction's order."""

    @abstractmethod
    def objects(self, spec: Any) -> list[str]: ...

    def claim(self, spec: Any, text: str) -> list[str]:
        return parse_letters(text, len(self.questions(spec)), self.letters)

    def judge(self, spec: Any, claim: list[str], session: CoherenceSession) -> Check:
        objects = self.objects(spec)
        questions = self.questions(spec)
        gates = [f"exactly_one_{i}" for i in range(len(objects))]
        positions = [f"position_{i}" for i in range(len(questions))]
        evidence: dict[str, Any] = {"objects": objects, "claimed": claim}
        for i, name in enumerate(objects):
            if not session.yes("exactly_one", step=gates[i], target=name):
                session.skip(*gates[i + 1 :], *positions)
                return session.check(0.0, {"exactly_one": 0.0}, **evidence)
        answers: list[str] = []
        components: dict[str, float] = {"exactly_one": 1.0}
        for i, (template, values) in enumerate(questions):
            answers.append(session.letter(template, step=positions[i], role="spatial", **values))
            components[positions[i]] = float(answers[-1] == claim[i])
            if answers[-1] != claim[i]:
                session.skip(*positions[i + 1 :])
                break
        score = float(len(answers) == len(questions) and answers == claim)
        return session.check(score, components, answered=answers, **evidence)


class CoherenceSpacialRelative(_CoherencePosition):
    """``object: [[a, b], [c, d]]``: the instruction asks whether a is left/right of b (A/B/C
    neither), then whether c is higher/lower than d (A/B/C neither)."""

    id = "it_coherence_spacial_relative"
    letters = "ABC"
    AXES = ("relative_horizontal", "relative_vertical")

    def read(self, instance: Instance) -> list[tuple[str, str]]:
        raw = require_field(instance, "object", "objects")
        if not isinstance(raw, list) or len(raw) != len(self.AXES):
            raise invalid(instance, f"object must hold {len(self.AXES)} pairs (horizontal, then vertical), got {raw!r}")
        pairs = []
        for pair in raw:
            names = texts_of(instance, pair, "object pair")
            if len(names) != 2:
                raise invalid(instance, f"each object pair must name two objects, got {pair!r}")
            pairs.append((bare(names[0]), bare(names[1])))
        return pairs

    def objects(self, spec: list[tuple[str, str]]) -> list[str]:
        return list(dict.fromkeys(name for pair in spec for name in pair))

    def questions(self, spec: list[tuple[str, str]]) -> list[tuple[str, dict[str, str]]]:
        return [(axis, {"first": a, "second": b}) for axis, (a, b) in zip(self.AXES, spec)]


class CoherenceSpacialAbsolute(_CoherencePosition):
    """``object: [a, b]``: the instruction asks the quadrant of each (A bottom left, B bottom right,
    C top left, D top right); the judge may also answer E (centre), which matches no letter."""

    id = "it_coherence_spacial_absolute"
    letters = "ABCD"

    def read(self, instance: Instance) -> list[str]:
        names = [bare(n) for n in texts_of(instance, require_field(instance, "object", "objects"), "object")]
        if len({_key(n) for n in names}) != len(names):
            raise invalid(instance, f"object names must be distinct, got {names!r}")
        return names

    def objects(self, spec: list[str]) -> list[str]:
        return spec

    def questions(self, spec: list[str]) -> list[tuple[str, dict[str, str]]]:
        return [("absolute", {"target": name}) for name in spec]


# -- text -------------------------------------------------------------------------------------------
class CoherenceOcr(CoherenceTask):
    """The published instructions ask for 2-10 words; a text outside ``word_range`` scores 0
    (``text_length``).  The judge reads the text on ``object`` (the whole image when the instance
    names none)."""

    id = "it_coherence_ocr"
    roles = ("ocr",)
    DEFAULT_FORMAT = r"<text>(.*?)</text>"

    def __init__(self, word_range: tuple[int, int] = (2, 10)) -> None:
        low, high = word_range
        if not 1 <= low <= high:
            raise ValueError(f"word_range must be 1 <= low <= high, got {word_range!r}")
        self.word_range = (int(low), int(high))

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "word_range": list(self.word_range)}

    def read(self, instance: Instance) -> tuple[re.Pattern[str], str | None]:
        pattern = format_regex(instance, instance.data.get("format") or self.DEFAULT_FORMAT)
        target = instance.data.get("object")
        return pattern, (text_of(instance, target, "object") if target is not None else None)

    def claim(self, spec: tuple[re.Pattern[str], str | None], text: str) -> str:
        pattern, _ = spec
        match = pattern.search(text[:MAX_SEARCHED_TEXT])
        written = match.group(1).strip() if match else ""
        if not written:
            raise fault("missing_text", f"the text has nothing in the format {pattern.pattern!r}", text)
        words = len(written.split())
        low, high = self.word_range
        if not low <= words <= high:
            raise fault("text_length", f"{words} words, the instruction asks for {low} to {high}", text, words=words)
        return written

    def judge(self, spec: tuple[re.Pattern[str], str | None], claim: str, session: CoherenceSession) -> Check:
        _, target = spec
        if target is None:
            reading = session.texts("ocr", step="ocr", role="ocr")
        else:
            reading = session.texts("ocr_object", step="ocr", role="ocr", target=target)
        accuracy, rate = ocr_accuracy(claim, reading)
        return session.check(accuracy, {"wer": rate}, claimed_text=claim, reading=reading, object=target)
