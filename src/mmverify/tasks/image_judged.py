"""The image tasks scored by asking a vision-language judge about the one generated image.

Published combinations (``eval_image.py`` of the MMMG pipeline; DESIGN §5):

* i_object_include -- scene check x mean(object present); i_object_exclude -- scene check x
  mean(object absent), where absence is the *presence* question with its verdict inverted;
* i_object_count -- one counting MCQ chosen by the annotated count: counts up to 6 get options
  "fewer than 3 / none", 3, 4, 5, 6, "more than 6"; counts 7-10 get options 7, 8, 9, 10, "fewer
  than 7", "more than 10"; the answer must be the option naming the count (binary);
* i_object_attribute / _cot / _commonsense, i_relation_two / _all -- existence per object, mean;
* i_spacial_relative -- an exactly-one gate, then the left/right or above/below MCQ (binary);
* i_spacial_absolute -- per constraint an exactly-one gate, then the quadrant MCQ; product.

Profiles: ``mmmg`` asks what the published evaluator asks (the gates are the existence question
about "exactly one X [and exactly one Y]"); ``strict`` asks each object's exactly-one question on
its own, and asks every counting item the same first question, following up with the 7-10
question only when the judge answered "more than 6" (the options offered never depend on the
expected answer).

The OCR tasks live in :mod:`.image_ocr`.  Judges come from the model hub by role:
``"spatial_relative"`` / ``"spatial_absolute"`` for everything the position tasks ask (their gates
included, so one judge decides the whole item; both fall back to ``"spatial"``, then ``"default"``),
``"default"`` for everything else here.  A gate that fails makes the product 0, so the questions
behind it are not asked (the evidence lists them as ``not_asked``): for a reward, every judge call
saved counts.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..models.judge_config import judge_identities
from ..verifiers.vlm.record import JudgeRecord, Verdict
from ..verifiers.vlm.templates import (
    TEMPLATE_KEY,
    count_letter,
    count_more_letter,
    quadrant_letter,
    question,
    relative_key,
)
from . import models
from .base import Task, require_field
from .response import Response


# -- asking ------------------------------------------------------------------------------------
class JudgeSession:
    """The questions asked about one image, with the judges they went to and the replies."""

    def __init__(self, image: np.ndarray) -> None:
        self.image = image
        self.record = JudgeRecord()
        self.not_asked: list[str] = []

    @staticmethod
    def judge(role: str) -> Any:
        # looked up per item, not per task object: executors keep task objects for the whole run,
        # while the hub's configuration (and tests' fakes) may change between runs
        return models.judge(role)

    def ask(self, template_id: str, *, step: str, role: str = "default", **values: str) -> Verdict:
        return self.record.ask(self.judge(role), question(template_id, **values), [self.image], step=step, role=role)

    def yes(self, template_id: str, *, step: str, role: str = "default", **values: str) -> bool:
        verdict = self.ask(template_id, step=step, role=role, **values)
        assert isinstance(verdict, bool)
        return verdict

    def letter(self, template_id: str, *, step: str, role: str = "default", **values: str) -> str:
        verdict = self.ask(template_id, step=step, role=role, **values)
        assert isinstance(verdict, str)
        return verdict

    def texts(self, template_id: str, *, step: str, role: str = "default", **values: str) -> list[str]:
        verdict = self.ask(template_id, step=step, role=role, **values)
        assert isinstance(verdict, list)
        return verdict

    def skip(self, *steps: str) -> None:
        self.not_asked.extend(steps)

    def check(self, score: float, components: Mapping[str, float], **evidence: Any) -> Check:
        evidence = dict(evidence)
        if self.not_asked:
            evidence["not_asked"] = list(self.not_asked)
        evidence["judge"] = self.record.evidence()
        return Check(score=float(score), components=dict(components), evidence=evidence)


class JudgedImageTask(Task):
    """Read the annotation, take the one image, ask the judge, combine.  Subclasses implement
    :meth:`read` (annotation -> what to ask; ScoringError for bad annotations) and :meth:`judge`."""

    roles: ClassVar[tuple[str, ...]] = ("default",)

    def params(self) -> Mapping[str, Any]:
        # which model answers each role is part of the result key: another judge means a rescore
        return {"templates": TEMPLATE_KEY, "roles": list(self.roles), "judges": judge_identities(self.roles)}

    @abstractmethod
    def read(self, instance: Instance) -> Any: ...

    @abstractmethod
    def judge(self, spec: Any, session: JudgeSession) -> Check: ...

    def score(self, instance: Instance, response: Response) -> Check:
        spec = self.read(instance)  # a bad annotation is the user's problem, whatever the response
        return self.judge(spec, JudgeSession(response.single_image()))


# -- annotation helpers ----------------------------------------------------------------------------
def invalid(instance: Instance, message: str) -> ScoringError:
    return ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {message}")


def text_of(instance: Instance, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(instance, f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


def texts_of(instance: Instance, value: Any, what: str) -> list[str]:
    """A string or a non-empty list of strings (the data has both shapes)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise invalid(instance, f"{what} must be a string or a list of strings, got {value!r}")
    return [text_of(instance, item, what) for item in items]


def bare(noun: str) -> str:
    """Without a leading article, so templates can say "the {target}" ("the the cat" otherwise)."""
    return re.sub(r"^(?:the|a|an)\s+", "", noun.strip(), flags=re.IGNORECASE)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# -- scene x objects -------------------------------------------------------------------------------
class _SceneObjects(JudgedImageTask):
    component: ClassVar[str]
    inverted: ClassVar[bool] = False  # exclusion: the presence verdict counts when it is "No"

    def read(self, instance: Instance) -> tuple[str, list[str]]:
        """``object: [scene, obj, ...]`` as published; also ``{"scene": .., "object(s)": ..}`` or a
        separate ``scene``/``background`` field next to the objects."""
        data = instance.data
        scene = data.get("scene") or data.get("background")
        raw = require_field(instance, "object", "objects")
        if isinstance(raw, Mapping):
            scene = raw.get("scene") or raw.get("background") or scene
            raw = raw.get("object") or raw.get("objects")
        items = texts_of(instance, raw, "object")
        if scene is None:
            if len(items) < 2:
                raise invalid(instance, "object must list the scene first, then at least one object")
            scene, items = items[0], items[1:]
        return text_of(instance, scene, "scene"), items

    def judge(self, spec: tuple[str, list[str]], session: JudgeSession) -> Check:
        scene, objects = spec
        steps = [f"object_{i}" for i in range(len(objects))]
        if not session.yes("scene", step="scene", target=scene):
            session.skip(*steps)
            return session.check(0.0, {"scene": 0.0}, scene=scene, objects=objects)
        present = [session.yes("existence", step=s, target=o) for s, o in zip(steps, objects)]
        mean = _mean([float(p != self.inverted) for p in present])
        return session.check(mean, {"scene": 1.0, self.component: mean}, scene=scene, objects=objects, present=present)


class ObjectInclude(_SceneObjects):
    id = "i_object_include"
    component = "objects_present"


class ObjectExclude(_SceneObjects):
    """Each object is asked about with the presence question; "No" is what passes."""

    id = "i_object_exclude"
    version = 2
    component = "objects_absent"
    inverted = True


# -- counting --------------------------------------------------------------------------------------
MIN_COUNT, MAX_COUNT = 3, 10  # the counts the two option sets can confirm exactly
COUNT_STAGES = ("by_count", "two_stage")


class ObjectCount(JudgedImageTask):
    """The ``count`` field is the truth (two published instructions state another number in their
    text: line 11 says 4 pumpkins with count 5, line 25 says 8 windmills with count 7).

    ``stages="by_count"`` (mmmg): one question, the 3-6 options for counts up to 6 and the 7-10
    options above.  ``"two_stage"`` (strict): the 3-6 question for every item; for counts above 6
    the answer must be "more than 6" and the 7-10 question must then name the count.

    The published code expects the letter with value ``count - 2`` (up to 6) or ``count - 6`` (above
    6), A being 1, in its two prompts; their texts are not in the published sources read, so what is
    reproduced is the rule those values encode -- the option naming the count -- with the 7-10
    letters exactly as published (A = 7 ... D = 10).  Counts outside 3-10 cannot be confirmed by
    either option set and are refused as invalid instances (the published rows count 3 to 10).
    """

    id = "i_object_count"
    version = 2
    binary = True

    def __init__(self, stages: str = "by_count") -> None:
        if stages not in COUNT_STAGES:
            raise ValueError(f"stages must be one of {', '.join(COUNT_STAGES)}, got {stages!r}")
        self.stages = stages

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {"stages": "two_stage" if profile == "strict" else "by_count"}

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "stages": self.stages}

    def read(self, instance: Instance) -> tuple[str, int]:
        target = texts_of(instance, require_field(instance, "object", "objects"), "object")
        if len(target) != 1:
            raise invalid(instance, f"i_object_count counts one kind of object, got {target!r}")
        raw = require_field(instance, "count", "number")
        count: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            count = raw
        elif isinstance(raw, float) and raw.is_integer():
            count = int(raw)
        elif isinstance(raw, str) and raw.strip().isdigit():
            count = int(raw.strip())
        if count is None or not MIN_COUNT <= count <= MAX_COUNT:
            raise invalid(instance, f"count must be an integer from {MIN_COUNT} to {MAX_COUNT}, got {raw!r}")
        return bare(target[0]), count

    def judge(self, spec: tuple[str, int], session: JudgeSession) -> Check:
        target, count = spec
        if self.stages == "by_count":
            asked = [("count", count_letter(count))] if count <= 6 else [("count_more", count_more_letter(count))]
        else:
            asked = [("count", count_letter(count))] + ([("count_more", count_more_letter(count))] if count > 6 else [])
        expected: list[str] = []
        answered: list[str] = []
        for template, letter in asked:
            expected.append(letter)
            answered.append(session.letter(template, step=template, target=target))
            if answered[-1] != letter:
                session.skip(*(t for t, _ in asked[len(answered) :]))
                break
        match = float(answered == expected)
        return session.check(
            match, {"count_match": match}, object=target, count=count, expected_letters=expected, answered_letters=answered
        )


# -- existence per object --------------------------------------------------------------------------
class _Existence(JudgedImageTask):
    def read(self, instance: Instance) -> list[str]:
        return texts_of(instance, require_field(instance, "object", "objects"), "object")

    def judge(self, spec: list[str], session: JudgeSession) -> Check:
        verdicts = [float(session.yes("existence", step=f"object_{i}", target=o)) for i, o in enumerate(spec)]
        mean = _mean(verdicts)
        return session.check(mean, {"objects_present": mean}, objects=spec)


class ObjectAttribute(_Existence):
    id = "i_object_attribute"


class ObjectCot(_Existence):
    id = "i_object_cot"


class ObjectCommonsense(_Existence):
    id = "i_object_commonsense"


class RelationTwo(_Existence):
    id = "i_relation_two"


class RelationAll(_Existence):
    id = "i_relation_all"


# -- spatial ---------------------------------------------------------------------------------------
def _constraints(instance: Instance, width: int) -> list[list[Any]]:
    """``constraints`` (or ``constraint``) as a list of ``width``-item lists; a single bare
    constraint is wrapped, dict-shaped entries are read in their key order."""
    raw = require_field(instance, "constraints", "constraint")
    if isinstance(raw, list) and len(raw) == width and all(isinstance(x, str) for x in raw):
        raw = [raw]
    if isinstance(raw, Mapping) and width == 2:  # {"the cat": "bottom right", ...}
        raw = [[k, v] for k, v in raw.items()]
    if not isinstance(raw, list) or not raw:
        raise invalid(instance, f"constraints must be a non-empty list, got {raw!r}")
    rows = []
    for entry in raw:
        if isinstance(entry, Mapping):
            entry = list(entry.values())
        if not isinstance(entry, list) or len(entry) != width:
            raise invalid(instance, f"each constraint must have {width} items, got {entry!r}")
        rows.append([text_of(instance, item, "constraint item") for item in entry])
    return rows


GATE_KINDS = ("existence", "exactly_one")


def exactly_one_of(names: Sequence[str]) -> str:
    """The existence target the published gates use: "exactly one cat and exactly one dog"."""
    return " and ".join(f"exactly one {name}" for name in names)


class _Spatial(JudgedImageTask):
    """Gates then position questions, all to one role.  ``gates="existence"`` (mmmg): per
    constraint one existence question about exactly one of each object it names;
    ``"exactly_one"`` (strict): the exactly-one question about each object on its own."""

    binary = True
    role: ClassVar[str]

    def __init__(self, gates: str = "existence") -> None:
        if gates not in GATE_KINDS:
            raise ValueError(f"gates must be one of {', '.join(GATE_KINDS)}, got {gates!r}")
        self.gates = gates

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {"gates": "exactly_one" if profile == "strict" else "existence"}

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "gates": self.gates}

    def gate(self, step: str, names: Sequence[str]) -> tuple[str, str, str]:
        """(step, template, target) of the gate about ``names`` (one name for "exactly_one")."""
        if self.gates == "existence":
            return step, "existence", exactly_one_of(names)
        [name] = names
        return step, "exactly_one", name

    def passes_gates(self, gates: list[tuple[str, str, str]], later: Sequence[str], session: JudgeSession) -> bool:
        """Ask the gates in order; at the first "No" skip the rest (and ``later``) and say so."""
        for i, (step, template, target) in enumerate(gates):
            if not session.yes(template, step=step, role=self.role, target=target):
                session.skip(*(g[0] for g in gates[i + 1 :]), *later)
                return False
        return True


class SpacialRelative(_Spatial):
    """The objects must each appear exactly once before their relative position is asked; every
    constraint must hold (the published rows have one)."""

    id = "i_spacial_relative"
    version = 2
    role = "spatial_relative"
    roles = (role,)

    def read(self, instance: Instance) -> list[tuple[str, str, str, str, str]]:
        specs = []
        for first, second, relation in _constraints(instance, 3):
            try:
                template, expected = relative_key(relation)
            except ValueError as exc:
                raise invalid(instance, str(exc)) from None
            specs.append((bare(first), bare(second), relation, template, expected))
        return specs

    def judge(self, spec: list[tuple[str, str, str, str, str]], session: JudgeSession) -> Check:
        if self.gates == "existence":  # one question per constraint about both of its objects
            gates = [self.gate(f"gate_{i}", (s[0], s[1])) for i, s in enumerate(spec)]
        else:
            names = dict.fromkeys(name for s in spec for name in (s[0], s[1]))
            gates = [self.gate(f"exactly_one_{i}", (name,)) for i, name in enumerate(names)]
        positions = [f"position_{i}" for i in range(len(spec))]
        evidence: dict[str, Any] = {"objects": [[s[0], s[1]] for s in spec], "expected": [s[4] for s in spec]}
        if not self.passes_gates(gates, positions, session):
            return session.check(0.0, {"exactly_one": 0.0}, **evidence)
        answers = []
        for step, (first, second, _, template, expected) in zip(positions, spec):
            answers.append(session.letter(template, step=step, role=self.role, first=first, second=second))
            if answers[-1] != expected:
                session.skip(*positions[len(answers) :])
                break
        correct = float(answers == [s[4] for s in spec])
        return session.check(correct, {"exactly_one": 1.0, "position": correct}, answered=answers, **evidence)


class SpacialAbsolute(_Spatial):
    """Per constraint: the object appears exactly once, then lies in the asked quadrant; product."""

    id = "i_spacial_absolute"
    version = 2
    role = "spatial_absolute"
    roles = (role,)

    def read(self, instance: Instance) -> list[tuple[str, str, str]]:
        specs = []
        for name, position in _constraints(instance, 2):
            try:
                specs.append((bare(name), position, quadrant_letter(position)))
            except ValueError as exc:
                raise invalid(instance, str(exc)) from None
        return specs

    def judge(self, spec: list[tuple[str, str, str]], session: JudgeSession) -> Check:
        components: dict[str, float] = {}
        answers: list[str] = []
        evidence = {"objects": [s[0] for s in spec], "expected": [s[2] for s in spec]}
        gates = [self.gate(f"exactly_one_{i}", (name,)) for i, (name, _, _) in enumerate(spec)]
        for i, (name, _, expected) in enumerate(spec):
            later = [step for j in range(i + 1, len(spec)) for step in (gates[j][0], f"position_{j}")]
            if not self.passes_gates([gates[i]], [f"position_{i}", *later], session):
                components[f"constraint_{i}"] = 0.0
                return session.check(0.0, components, answered=answers, **evidence)
            answers.append(session.letter("absolute", step=f"position_{i}", role=self.role, target=name))
            components[f"constraint_{i}"] = float(answers[-1] == expected)
            if answers[-1] != expected:
                session.skip(*later)
                return session.check(0.0, components, answered=answers, **evidence)
        return session.check(1.0, components, answered=answers, **evidence)
