"""The position tasks: is each object there exactly once, and where is it?

Published combinations (``eval_image.py`` of the MMMG pipeline; DESIGN §5):

* i_spacial_relative -- an exactly-one gate, then the left/right or above/below MCQ (binary);
* i_spacial_absolute -- per constraint an exactly-one gate, then the quadrant MCQ; product.

Profiles: ``mmmg`` asks what the published evaluator asks (the gates are the existence question
about "exactly one X [and exactly one Y]") and reads the option letter as it did: the first
``nswer: `` followed by an option letter (:func:`~mmverify.verifiers.vlm.published.first_nswer_letter`;
"**Answer:** B" has none, and none is a wrong answer); ``strict`` asks each object's exactly-one
question on its own and reads the letter from the end of the reply.

Judges come from the model hub by role: ``"spatial_relative"`` / ``"spatial_absolute"`` for
everything these tasks ask (their gates included, so one judge decides the whole item; both fall
back to ``"spatial"``, then ``"default"``).  A gate that fails makes the product 0, so the questions
behind it are not asked (the evidence lists them as ``not_asked``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from ..core.types import Check, Instance
from ..verifiers.vlm.templates import quadrant_letter, relative_key
from .base import require_field
from .image_judged import JudgedImageTask, JudgeSession, bare, invalid, judge_reading, text_of


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
        return {**super().params(), "gates": self.gates, "judge_reading": judge_reading(self)}

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
        answers: list[str | None] = []
        for step, (first, second, _, template, expected) in zip(positions, spec):
            answers.append(
                session.letter(template, step=step, role=self.role, reader=self.reader("first_nswer_letter"), first=first, second=second)
            )
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
        answers: list[str | None] = []
        evidence = {"objects": [s[0] for s in spec], "expected": [s[2] for s in spec]}
        gates = [self.gate(f"exactly_one_{i}", (name,)) for i, (name, _, _) in enumerate(spec)]
        for i, (name, _, expected) in enumerate(spec):
            later = [step for j in range(i + 1, len(spec)) for step in (gates[j][0], f"position_{j}")]
            if not self.passes_gates([gates[i]], [f"position_{i}", *later], session):
                components[f"constraint_{i}"] = 0.0
                return session.check(0.0, components, answered=answers, **evidence)
            answers.append(
                session.letter("absolute", step=f"position_{i}", role=self.role, reader=self.reader("first_nswer_letter"), target=name)
            )
            components[f"constraint_{i}"] = float(answers[-1] == expected)
            if answers[-1] != expected:
                session.skip(*later)
                return session.check(0.0, components, answered=answers, **evidence)
        return session.check(1.0, components, answered=answers, **evidence)
