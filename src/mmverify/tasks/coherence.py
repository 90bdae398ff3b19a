"""Self-coherence tasks: the model draws one image and then states facts about it in text; a judge
checks the image against the model's own statements (DESIGN §5, "coherence").  Published rules:
``eval_interleaved.py`` (``ITCoherence*`` classes) at d341665a, helpers in ``utils.py`` at ecf3dfea.

* it_coherence_count -- ``<count>N</count>`` with 2 < N < 7, and the judge's counting MCQ answer
  must be N's letter: under ``mmmg`` the first character of the reply, as published; under
  ``strict`` the final ``Answer:`` letter (binary);
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
one exactly-one question per object.  Judge replies: ``mmmg`` reads the counting, position and
OCR answers with the published readers (:mod:`~mmverify.verifiers.vlm.published`: the first
character, the first ``nswer: X``, the first one-line ``[...]``); ``strict`` reads every verdict
from the end of the reply.  Deliberate departures in both profiles: the count is the whole number
in the tag (the published pattern keeps only its last digit), empty text never scores, and yes/no
verdicts are read from the end of the reply.

Response shape: exactly one image and some text after it (else 0 with ``no_image`` /
``wrong_image_count`` / ``no_text`` / ``text_before_image``).  Text the model was told to write but
did not (no ``<count>``, no parsable JSON, a map or ranking that does not match the annotation) is
the generator's fault: score 0 with a reason, and no judge is asked.  A judge reply that cannot be
read is an ``error`` row (``judge_unparseable``), never a 0 -- except where ``mmmg`` reads as
published, which counts a reply without an option letter as a wrong answer and one without a list
as an empty reading.  Questions behind a failed product
factor are not asked (``evidence.not_asked``).

The reasoning tasks (math, code) in :mod:`.reasoning` build on the same frame (:mod:`.coherence_frame`).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any, ClassVar, Mapping

from ..core.types import Check, Instance
from ..verifiers.vlm.coherence_templates import coherence_question
from ..verifiers.vlm.ocr import normalizer, word_accuracy
from ..verifiers.vlm.templates import count_letter
from .base import require_field
from .coherence_frame import (
    EXPRESSION_SEARCHED,
    CoherenceSession,
    CoherenceTask,
    fault,
    first_json,
    format_regex,
    match_names,
    name_key,
    parse_count,
    parse_letters,
    product_of,
    published_list,
    published_object,
    same_set,
    strings_of,
    written_in_format,
)
from .image_judged import bare, invalid, text_of, texts_of


# -- count ------------------------------------------------------------------------------------------
class CoherenceCount(CoherenceTask):
    """The judge answers the counting question (options as published: A fewer than 3 or none, B 3 ...
    E 6, F more than 6).  ``mmmg`` reads the reply as the published code did: its *first character*,
    stripped and lower-cased, must be the claimed count's letter (``ord(c) - 95 == N``: "b" for 3 ...
    "e" for 6), whatever follows -- so a reply that reasons first fails unless it happens to start
    with that letter ("Based on ..." passes for 3).  ``strict`` reads the final ``Answer:`` letter."""

    id = "it_coherence_count"
    version = 2
    binary = True
    published_reader = "first_character"

    def read(self, instance: Instance) -> str:
        target = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(target) != 1:
            raise invalid(instance, f"{self.id} counts one kind of object, got {target!r}")
        return bare(target[0])

    def claim(self, spec: str, text: str) -> int:
        return parse_count(text, lenient=self.strict)

    def judge(self, spec: str, claim: int, session: CoherenceSession) -> Check:
        if self.strict:
            expected = count_letter(claim)
            answered = session.letter("count", step="count", target=spec)
        else:  # published: ord(first character) - 95 == N
            expected = chr(claim + 95)
            answered = session.letter("count", step="count", target=spec, reader="first_character")
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
            if len({name_key(n) for n in names}) != len(names):
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
            return name_key(name) in {name_key(m) for m in MULTICOLOURED}
        return name in MULTICOLOURED

    def description(self, name: str, colour: str) -> str:
        if self.multicoloured(name):
            return f"exactly one {name}, whose colour is mostly {colour}"
        return f"exactly one {name}, whose colour is mostly {colour}, with no other major colour"

    def judge(self, spec: Any, claim: list[tuple[str, str]], session: CoherenceSession) -> Check:
        steps = [(f"object_{i}", pair) for i, pair in enumerate(claim)]
        score, components = product_of(
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
        if len(objects) < 2 or len({name_key(o) for o in objects}) != len(objects):
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

        score, components = product_of(session, steps, ask)
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
    published_reader = "first_nswer_letter"

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
        answers: list[str | None] = []
        components: dict[str, float] = {"exactly_one": 1.0}
        reader = "end" if self.strict else "first_nswer_letter"
        for i, (template, values) in enumerate(questions):
            answers.append(session.letter(template, step=positions[i], role=self.role, reader=reader, **values))
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
        if len({name_key(n) for n in names}) != len(names):
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
    published_reader = "first_line_list"
    DEFAULT_FORMAT = r"<text>(.*?)</text>"

    def __init__(self, word_range: tuple[int, int] = (5, 10)) -> None:
        low, high = word_range
        if not 1 <= low <= high:
            raise ValueError(f"word_range must be 1 <= low <= high, got {word_range!r}")
        self.word_range = (int(low), int(high))

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "word_range": list(self.word_range), "expression_searched_chars": EXPRESSION_SEARCHED}

    def read(self, instance: Instance) -> tuple[re.Pattern[str], str | None]:
        pattern = format_regex(instance, instance.data.get("format") or self.DEFAULT_FORMAT)
        target = instance.data.get("object")
        return pattern, (text_of(instance, target, "object") if target is not None else None)

    def claim(self, spec: tuple[re.Pattern[str], str | None], text: str) -> str:
        pattern, _ = spec
        written = written_in_format(pattern, text) or ""
        if not written.strip():
            raise fault("missing_text", f"the text has nothing in the format {pattern.pattern!r}", text)
        words = len(written.split()) if self.strict else published_word_count(written)
        low, high = self.word_range
        if not low <= words <= high:
            raise fault("text_length", f"{words} words, the instruction asks for {low} to {high}", text, words=words)
        return written.strip()

    def judge(self, spec: tuple[re.Pattern[str], str | None], claim: str, session: CoherenceSession) -> Check:
        _, target = spec
        reader = "end" if self.strict else "first_line_list"  # published: utils.extract_list
        if target is None:
            reading = session.texts("ocr", step="ocr", role="ocr", reader=reader)
        else:
            reading = session.texts("ocr_object", step="ocr", role="ocr", reader=reader, target=target)
        # the published OCR normalisation (ASCII punctuation deleted) unless strict
        accuracy, rate = word_accuracy([claim], [reading], normalizer("unicode" if self.strict else "mmmg"))
        return session.check(accuracy, {"wer": rate}, claimed_text=claim, reading=reading, object=target)
