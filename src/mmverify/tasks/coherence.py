"""Self-coherence tasks: the model draws one image and then states facts about it in text; a judge
checks the image against the model's own statements (DESIGN §5, "coherence").  Published rules:
``eval_interleaved.py`` (``ITCoherence*`` classes) at d341665a, helpers in ``utils.py`` at ecf3dfea.

* it_coherence_count -- ``<count>N</count>`` with 2 < N < 7, and the judge's counting MCQ letter
  must be N's letter (binary);
* it_coherence_color -- a JSON map object -> colour whose keys are the set ``object`` and whose
  values are the set ``color``; per object an existence question "exactly one <obj>, mostly <colour>,
  no other major colour" (without the last clause for naturally multi-coloured objects); product;
* it_coherence_size -- a JSON ranking list (smallest first) whose set is ``object``; for every pair
  i < j of the ranking the judge must confirm exactly one of each and the later one obviously
  larger (longer, taller, ...) than the earlier one, with the row's ``text`` note when it has one;
  product;
* it_coherence_spacial_relative / _absolute -- a JSON list of the letters the model chose for the
  position questions in its instruction; exactly-one gates, then the judge answers the same
  multiple-choice question and must give the model's letter; the product over the questions (so
  the score is binary).  Gates and position questions go to one judge role per task
  (``spatial_relative`` / ``spatial_absolute``);
* it_coherence_ocr -- the model's ``<text>...</text>`` (or the row's ``format`` in older data), 5 to
  10 words as the instructions ask; score = 1 - min(WER, 1) of the judge's OCR of ``object``.

The text is read from *after* the image, where the instructions ask for it ("After generating the
image, provide ...").  Profiles: ``mmmg`` reads the text as the published helpers do (the first
``{...}`` / one-line ``[...]`` span only, exact names, the tag exactly as written, words counted
between single spaces, the published comparative words and gate questions); ``strict`` accepts
formatting noise (case, spacing, a later well-formed JSON value) and counts real words, and asks
one exactly-one question per object.  Deliberate departures in both profiles: the count is the
whole number in the tag (the published pattern keeps only its last digit), empty text never
scores, and judge replies are read strictly from their end.

Response shape: exactly one image and some text after it (else 0 with ``no_image`` /
``wrong_image_count`` / ``no_text`` / ``text_before_image``).  Text the model was told to write but
did not (no ``<count>``, no parsable JSON, a map or ranking that does not match the annotation) is
the generator's fault: score 0 with a reason, and no judge is asked.  A judge reply that cannot be
read is an ``error`` row (``judge_unparseable``), never a 0.  Questions behind a failed product
factor are not asked (``evidence.not_asked``).

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
from ..verifiers.vlm.coherence_templates import COHERENCE_TEMPLATE_KEY, coherence_question
from ..verifiers.vlm.ocr import normalizer, word_accuracy
from ..verifiers.vlm.record import Verdict
from ..verifiers.vlm.templates import TEMPLATE_KEY, Question, count_letter
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

    The lenient reader: it tries the first :data:`MAX_JSON_STARTS` opening brackets in turn, so it
    also reads ``Here: {"a": "b"}`` after a stray brace in prose, while a reply made of brackets
    cannot cost quadratic time."""
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


def _loads(candidate: str) -> Any | None:
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        return None


def published_object(text: str) -> dict[str, Any] | None:
    """The published reader of JSON objects: the span from the first ``{`` to the first ``}`` after it
    (across lines), parsed as it is or else with every run of whitespace made one space; None when
    there is no such span or it does not parse.  Found in linear time (no backtracking regex)."""
    text = text[:MAX_SEARCHED_TEXT]
    start = text.find("{")
    end = text.find("}", start) if start >= 0 else -1
    if end < 0:
        return None
    span = text[start : end + 1]
    value = _loads(span)
    if value is None:
        value = _loads(re.sub(r"\s+", " ", span))
    return value if isinstance(value, dict) else None


def published_list(text: str) -> list[Any] | None:
    """The published reader of JSON lists: the first ``[`` ... ``]`` span that lies on one line (up to
    the first ``]`` after the ``[``), parsed as JSON; None when there is none or it does not parse."""
    text = text[:MAX_SEARCHED_TEXT]
    position = 0
    while True:
        start = text.find("[", position)
        end = text.find("]", start) if start >= 0 else -1
        if end < 0:
            return None
        newline = text.find("\n", start, end)
        if newline < 0:
            value = _loads(text[start : end + 1])
            return value if isinstance(value, list) else None
        position = newline + 1  # every "[" before that line break sees the same "]" across it


def _key(text: str) -> str:
    """How names are compared by the lenient reader: case and surrounding space do not matter."""
    return " ".join(text.split()).casefold()


def strings_of(value: Any) -> list[str] | None:
    return list(value) if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


_COUNT_EXACT = re.compile(r"<count>(\d+)</count>")
_COUNT_LENIENT = re.compile(r"<count>\s*(\d+)\s*</count>", re.IGNORECASE)


def parse_count(text: str, lenient: bool = True) -> int:
    """N of the first ``<count>N</count>`` (exactly so written unless ``lenient``); GenerationFault
    when there is none or N is not 3..6.  N is the whole number in the tag."""
    match = (_COUNT_LENIENT if lenient else _COUNT_EXACT).search(text[:MAX_SEARCHED_TEXT])
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


def same_set(values: Sequence[Any], wanted: Sequence[str]) -> bool:
    """The published comparison: the values, as a set of exact strings, are the wanted set."""
    try:
        return set(values) == set(wanted)
    except TypeError:  # unhashable values (a list where a name belongs)
        return False


def parse_letters(text: str, count: int, letters: str, lenient: bool = True) -> list[str]:
    """The JSON list of ``count`` option letters (e.g. ``["A", "D"]``), upper-cased.

    Lenient: the first JSON list anywhere, each item one of ``letters`` after trimming.  Published:
    the first one-line ``[...]`` span; its items, trimmed, must form a proper subset of ``letters``."""
    value = strings_of(first_json(text, list) if lenient else published_list(text))
    if not value:
        raise fault("missing_letters", 'the text has no JSON list of letters such as ["A", "B"]', text)
    answers = [v.strip().upper() for v in value]
    allowed = set(letters)
    fits = all(len(a) == 1 and a in allowed for a in answers) if lenient else set(answers) < allowed
    if len(answers) != count or not fits:
        raise fault(
            "bad_letters", f"expected {count} letters from {', '.join(letters)}, got {value!r}", text, letters=value
        )
    return answers


_FORMAT_LITERAL = r"(?:\\.|[^\\.*+?\[\]()|])*"  # escaped characters and non-metacharacters ({ } ^ $ too)
_FORMAT_SHAPE = re.compile(rf"{_FORMAT_LITERAL}\(\.\*\??\){_FORMAT_LITERAL}")


def format_regex(instance: Instance, fmt: Any) -> re.Pattern[str]:
    """The instance's ``format`` (older data): literal text around one ``(.*?)`` or ``(.*)`` group.
    Other regexes are refused -- inline instances reach the reward server, and a regex with nested
    quantifiers could take exponential time on a long reply."""
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


def text_after_image(response: Response) -> str:
    """The text parts after the response's (first) image part, joined with newlines."""
    parts = list(response.parts)
    first = next((i for i, part in enumerate(parts) if part.type == "image"), len(parts))
    return "\n".join(part.text for part in parts[first + 1 :] if part.type == "text")


class CoherenceTask(Task):
    """Read the annotation, check the response's shape, read the model's claim from its text, then
    ask the judge.  Subclasses implement :meth:`read`, :meth:`claim` and :meth:`judge`."""

    roles: ClassVar[tuple[str, ...]] = ("default",)
    several_images: ClassVar[bool] = False  # reasoning tasks allow several images and judge the last

    def params(self) -> Mapping[str, Any]:
        # which model answers each role is part of the result key: another judge means a rescore
        return {
            "templates": TEMPLATE_KEY,
            "coherence_templates": COHERENCE_TEMPLATE_KEY,
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

    def reply_text(self, response: Response) -> str:
        """The text the claim is read from: all of it for several-image tasks, else the text after the
        image (the instructions ask for the answer after the image)."""
        if not response.text.strip():
            raise GenerationFault("no_text", "the response contains no text")
        if self.several_images:
            return response.text
        text = text_after_image(response)
        if not text.strip():
            raise GenerationFault("text_before_image", "the instruction asks for the text after the image; it comes before")
        return text

    def score(self, instance: Instance, response: Response) -> Check:
        spec = self.read(instance)  # a bad annotation is the user's problem, whatever the response
        count = len(response.of_type("image"))
        if count == 0:
            raise GenerationFault("no_image", "the response contains no image")
        if count > 1 and not self.several_images:
            raise GenerationFault("wrong_image_count", f"expected 1 image, got {count}", image_count=count)
        claim = self.claim(spec, self.reply_text(response))
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
    version = 2
    binary = True

    def read(self, instance: Instance) -> str:
        target = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(target) != 1:
            raise invalid(instance, f"{self.id} counts one kind of object, got {target!r}")
        return bare(target[0])

    def claim(self, spec: str, text: str) -> int:
        return parse_count(text, lenient=self.strict)

    def judge(self, spec: str, claim: int, session: CoherenceSession) -> Check:
        expected = count_letter(claim)
        answered = session.letter("count", step="count", target=spec)
        match = float(answered == expected)
        return session.check(
            match, {"count_match": match}, object=spec, claimed_count=claim, expected_letter=expected, answered_letter=answered
        )


# -- colour -----------------------------------------------------------------------------------------
# Objects that are rarely one colour (a microwave's door, a globe's map): the judge is not asked to
# rule out other major colours for them.  The published list, spelled as published ("TV").
MULTICOLOURED: tuple[str, ...] = ("microwave", "ball", "TV", "globe", "toothbrush", "knife", "tennis racket", "camera")


class CoherenceColor(CoherenceTask):
    id = "it_coherence_color"
    version = 2
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
        mapping = first_json(text, dict) if self.strict else published_object(text)
        if not mapping:
            raise fault("missing_color_map", "the text has no JSON object mapping objects to colours", text)
        assigned = self._assignment(mapping, objects, colors)
        if assigned is None:
            raise fault(
                "color_map_mismatch",
                f"the map must give each of {objects} a different colour from {colors}",
                text,
                color_map=mapping,
            )
        return [(name, assigned[name]) for name in objects]

    def _assignment(self, mapping: dict[str, Any], objects: list[str], colors: list[str]) -> dict[str, str] | None:
        """object -> colour in the annotation's spelling, or None when the map does not fit."""
        values = list(mapping.values())
        if not all(isinstance(v, str) for v in values):
            return None
        if not self.strict:  # published: the key set and the value set, exactly as spelled
            return dict(mapping) if same_set(list(mapping), objects) and same_set(values, colors) else None
        keys, colours = match_names(list(mapping), objects), match_names(values, colors)
        return None if keys is None or colours is None else dict(zip(keys, colours))

    def multicoloured(self, name: str) -> bool:
        if self.strict:
            return _key(name) in {_key(m) for m in MULTICOLOURED}
        return name in MULTICOLOURED

    def description(self, name: str, colour: str) -> str:
        if self.multicoloured(name):
            return f"exactly one {name}, whose colour is mostly {colour}"
        return f"exactly one {name}, whose colour is mostly {colour}, with no other major colour"

    def judge(self, spec: Any, claim: list[tuple[str, str]], session: CoherenceSession) -> Check:
        steps = [(f"object_{i}", pair) for i, pair in enumerate(claim)]
        score, components = _product_of(
            session, steps, lambda step, pair: session.yes("existence", step=step, target=self.description(*pair))
        )
        return session.check(score, components, color_map=dict(claim))


# -- size -------------------------------------------------------------------------------------------
# How "bigger" reads for each ``relation`` of the data: as published, and this project's wording.
PUBLISHED_COMPARATIVES: Mapping[str, str] = {
    "size": "larger",
    "area": "larger",
    "volume": "bigger",
    "length": "longer",
    "height": "higher",
}
COMPARATIVES: Mapping[str, str] = {
    "size": "larger",
    "area": "larger in area",
    "volume": "larger in volume",
    "length": "longer",
    "height": "taller",
}


class CoherenceSize(CoherenceTask):
    id = "it_coherence_size"
    version = 2
    binary = True

    def read(self, instance: Instance) -> tuple[list[str], str, str | None]:
        objects = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(objects) < 2 or len({_key(o) for o in objects}) != len(objects):
            raise invalid(instance, f"object must name at least two distinct objects, got {objects!r}")
        relation = text_of(instance, require_field(instance, "relation"), "relation").lower()
        if relation not in COMPARATIVES:
            raise invalid(instance, f"relation must be one of {', '.join(COMPARATIVES)}, got {relation!r}")
        note = instance.data.get("text")
        return objects, relation, (text_of(instance, note, "text") if note is not None else None)

    def claim(self, spec: tuple[list[str], str, str | None], text: str) -> list[str]:
        objects = spec[0]
        value = strings_of(first_json(text, list) if self.strict else published_list(text))
        if not value:
            raise fault("missing_ranking", 'the text has no JSON ranking list such as ["a", "b", "c"]', text)
        if self.strict:
            ranking = match_names(value, objects)
        else:  # published: the set of names is the object set; the first len(object) entries are ranked
            ranking = value[: len(objects)] if same_set(value, objects) else None
        if ranking is None:
            raise fault("ranking_mismatch", f"the ranking must list each of {objects} once", text, ranking=value)
        return ranking

    def judge(self, spec: tuple[list[str], str, str | None], claim: list[str], session: CoherenceSession) -> Check:
        _, relation, note = spec
        comparative = (COMPARATIVES if self.strict else PUBLISHED_COMPARATIVES)[relation]
        pairs = [(claim[i], claim[j]) for i in range(len(claim)) for j in range(i + 1, len(claim))]
        steps = [(f"pair_{k}", pair) for k, pair in enumerate(pairs)]

        def ask(step: str, pair: tuple[str, str]) -> bool:
            smaller, larger = pair
            target = f"exactly one {smaller}, exactly one {larger}, and the {larger} is obviously {comparative} than the {smaller}"
            if note is None:
                return session.yes("existence", step=step, target=target)
            verdict = session.ask_question(coherence_question("existence_note", target=target, note=note), step=step)
            assert isinstance(verdict, bool)
            return verdict

        score, components = _product_of(session, steps, ask)
        return session.check(score, components, ranking=claim, relation=relation, pairs=[list(p) for p in pairs], note=note)


# -- position ---------------------------------------------------------------------------------------
class _CoherencePosition(CoherenceTask):
    """Exactly-one gates, then one position MCQ per question; each answer must be the model's letter.
    Every question goes to the task's one role.  Product, stopping at the first failure.

    Gates: ``mmmg`` asks the published existence question of each position question ("exactly one
    A and exactly one B" / "exactly one A"); ``strict`` asks one exactly-one question per object."""

    binary = True
    version = 2
    role: ClassVar[str]
    letters: ClassVar[str]

    @abstractmethod
    def questions(self, spec: Any) -> list[tuple[str, dict[str, str]]]:
        """(template, values) of each position question, in the instruction's order."""

    @abstractmethod
    def objects(self, spec: Any) -> list[str]: ...

    @abstractmethod
    def published_gates(self, spec: Any) -> list[str]:
        """The existence target of each published gate, one per position question."""

    def claim(self, spec: Any, text: str) -> list[str]:
        return parse_letters(text, len(self.questions(spec)), self.letters, lenient=self.strict)

    def gates(self, spec: Any) -> list[tuple[str, str]]:
        """(template, target) of each gate question, in asking order."""
        if self.strict:
            return [("exactly_one", name) for name in self.objects(spec)]
        return [("existence", target) for target in self.published_gates(spec)]

    def judge(self, spec: Any, claim: list[str], session: CoherenceSession) -> Check:
        gates = self.gates(spec)
        questions = self.questions(spec)
        gate_steps = [f"exactly_one_{i}" for i in range(len(gates))]
        positions = [f"position_{i}" for i in range(len(questions))]
        evidence: dict[str, Any] = {"objects": self.objects(spec), "claimed": claim}
        for i, (template, target) in enumerate(gates):
            if not session.yes(template, step=gate_steps[i], role=self.role, target=target):
                session.skip(*gate_steps[i + 1 :], *positions)
                return session.check(0.0, {"exactly_one": 0.0}, **evidence)
        answers: list[str] = []
        components: dict[str, float] = {"exactly_one": 1.0}
        for i, (template, values) in enumerate(questions):
            answers.append(session.letter(template, step=positions[i], role=self.role, **values))
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
    role = "spatial_relative"
    roles = ("spatial_relative",)
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

    def published_gates(self, spec: list[tuple[str, str]]) -> list[str]:
        return [f"exactly one {a} and exactly one {b}" for a, b in spec]

    def questions(self, spec: list[tuple[str, str]]) -> list[tuple[str, dict[str, str]]]:
        return [(axis, {"first": a, "second": b}) for axis, (a, b) in zip(self.AXES, spec)]


class CoherenceSpacialAbsolute(_CoherencePosition):
    """``object: [a, b]``: the instruction asks the quadrant of each (A bottom left, B bottom right,
    C top left, D top right); the judge may also answer E (centre), which matches no letter."""

    id = "it_coherence_spacial_absolute"
    role = "spatial_absolute"
    roles = ("spatial_absolute",)
    letters = "ABCD"

    def read(self, instance: Instance) -> list[str]:
        names = [bare(n) for n in texts_of(instance, require_field(instance, "object", "objects"), "object")]
        if len({_key(n) for n in names}) != len(names):
            raise invalid(instance, f"object names must be distinct, got {names!r}")
        return names

    def objects(self, spec: list[str]) -> list[str]:
        return spec

    def published_gates(self, spec: list[str]) -> list[str]:
        return [f"exactly one {name}" for name in spec]

    def questions(self, spec: list[str]) -> list[tuple[str, dict[str, str]]]:
        return [("absolute", {"target": name}) for name in spec]


# -- text -------------------------------------------------------------------------------------------
def published_word_count(text: str) -> int:
    """Words as the published check counts them: the pieces between single spaces (so two spaces in
    a row, or a leading space, add an empty "word")."""
    return len(text.split(" "))


class CoherenceOcr(CoherenceTask):
    """The model's text must have ``word_range`` words (the instructions and the published check say
    5-10), else 0 (``text_length``).  ``mmmg`` counts as the published check does
    (:func:`published_word_count`), ``strict`` counts whitespace-separated words.  The judge reads the
    text on ``object`` (the whole image when the instance names none)."""

    id = "it_coherence_ocr"
    version = 2
    roles = ("ocr",)
    DEFAULT_FORMAT = r"<text>(.*?)</text>"

    def __init__(self, word_range: tuple[int, int] = (5, 10)) -> None:
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
        written = match.group(1) if match else ""
        if not written.strip():
            raise fault("missing_text", f"the text has nothing in the format {pattern.pattern!r}", text)
        words = len(written.split()) if self.strict else published_word_count(written)
        low, high = self.word_range
        if not low <= words <= high:
            raise fault("text_length", f"{words} words, the instruction asks for {low} to {high}", text, words=words)
        return written.strip()

    def judge(self, spec: tuple[re.Pattern[str], str | None], claim: str, session: CoherenceSession) -> Check:
        _, target = spec
        if target is None:
            reading = session.texts("ocr", step="ocr", role="ocr")
        else:
            reading = session.texts("ocr_object", step="ocr", role="ocr", target=target)
        # the published OCR normalisation (ASCII punctuation deleted) unless strict
        accuracy, rate = word_accuracy([claim], [reading], normalizer("unicode" if self.strict else "mmmg"))
        return session.check(accuracy, {"wer": rate}, claimed_text=claim, reading=reading, object=target)
