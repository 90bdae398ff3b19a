"""The image tasks scored by asking a vision-language judge about the one generated image.

Published combinations (``eval_image.py`` of the MMMG pipeline; DESIGN §5):

* i_object_include -- scene check x mean(object present); i_object_exclude -- scene check x
  mean(object absent), where absence is the *presence* question with its verdict inverted;
* i_object_count -- one counting MCQ chosen by the annotated count: counts up to 6 get options
  A "fewer than 3 / none", B-E 3-6, F "more than 6"; counts 7-10 get A "fewer than 7 / none", B-E
  7-10, F "more than 10"; the answer must be the option naming the count (binary);
* i_object_attribute / _cot / _commonsense, i_relation_two / _all -- existence per object, mean.

Profiles: ``mmmg`` asks what the published evaluator asks and reads the counting reply as it did
(the first ``Answer:`` letter); ``strict`` asks every counting item the same first question,
following up with the 7-10 question only when the judge answered "more than 6" (the options offered
never depend on the expected answer), and reads the letter from the end of the reply.

The position tasks live in :mod:`.image_spatial`, the OCR tasks in :mod:`.image_ocr`; both build on
the judge session here.  The tasks here ask the model hub's ``"default"`` judge.  A check that
fails makes the product 0, so the questions behind it are not asked (the evidence lists them as
``not_asked``): for a reward, every judge call saved counts.
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
from ..verifiers.vlm.templates import TEMPLATE_KEY, count_letter, count_more_letter, published_count_letter, question
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

    def ask(
        self, template_id: str, *, step: str, role: str = "default", reader: str = "end", **values: str
    ) -> Verdict | None:
        asked = question(template_id, reader=reader, **values)
        return self.record.ask(self.judge(role), asked, [self.image], step=step, role=role)

    def yes(self, template_id: str, *, step: str, role: str = "default", **values: str) -> bool:
        verdict = self.ask(template_id, step=step, role=role, **values)
        assert isinstance(verdict, bool)
        return verdict

    def letter(self, template_id: str, *, step: str, role: str = "default", reader: str = "end", **values: str) -> str | None:
        """The option letter of the reply; with a published ``reader``, None when it finds none (the
        published code then counted the answer as wrong)."""
        verdict = self.ask(template_id, step=step, role=role, reader=reader, **values)
        assert verdict is None or isinstance(verdict, str)
        return verdict

    def texts(self, template_id: str, *, step: str, role: str = "default", reader: str = "end", **values: str) -> list[str]:
        verdict = self.ask(template_id, step=step, role=role, reader=reader, **values)
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


READINGS = ("published", "end")


def judge_reading(task: Task) -> str:
    """How a task whose published code read judge replies its own way reads them under its profile:
    ``"published"`` (mmmg: the published readers of :mod:`~mmverify.verifiers.vlm.published`) or
    ``"end"`` (strict: the verdict at the end of the reply, else ``judge_unparseable``).  Such tasks
    put it in ``params()``, so switching readers rescores."""
    return "end" if task.strict else "published"


class JudgedImageTask(Task):
    """Read the annotation, take the one image, ask the judge, combine.  Subclasses implement
    :meth:`read` (annotation -> what to ask; ScoringError for bad annotations) and :meth:`judge`."""

    roles: ClassVar[tuple[str, ...]] = ("default",)

    def params(self) -> Mapping[str, Any]:
        # which model answers each role is part of the result key: another judge means a rescore
        return {"templates": TEMPLATE_KEY, "roles": list(self.roles), "judges": judge_identities(self.roles)}

    def reader(self, published: str) -> str:
        """``published`` (a reader name) under the mmmg profile, the strict end reader otherwise."""
        return published if judge_reading(self) == "published" else "end"

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
class SceneObjects(JudgedImageTask):
    """Family of i_object_include / _exclude (catalog rows set ``component`` and ``inverted``)."""

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


# -- counting --------------------------------------------------------------------------------------
MIN_COUNT, MAX_COUNT = 3, 10  # the counts the two option sets can confirm exactly
COUNT_STAGES = ("by_count", "two_stage")


class ObjectCount(JudgedImageTask):
    """The ``count`` field is the truth (two published instructions state another number in their
    text: line 11 says 4 pumpkins with count 5, line 25 says 8 windmills with count 7).

    ``stages="by_count"`` (mmmg) asks what the published evaluator asks (``eval_image.py``
    ``IObjectCount`` at f7de1cf7; the prompts are ``I_OBJECT_COUNT_PROMPT_LESS`` / ``_MORE`` of
    ``prompt.py`` at d341665a): one question chosen by the count, with the published option layout --
    up to 6: A fewer than 3 or none, B 3, C 4, D 5, E 6, F more than 6 (template ``count``); above 6:
    A fewer than 7 or none, B 7, C 8, D 9, E 10, F more than 10 (template ``count_above_six``).  The
    reply is read as published (the first ``Answer:`` followed by a capital A-F, see
    :func:`~mmverify.verifiers.vlm.published.first_answer_letter`; none is a wrong answer), and the
    letter must have the published value ``count - 2`` (up to 6) or ``count - 6`` (above), A being 0:
    the option naming the count.  (An earlier published version, 0473209a, counted A as 1 and so
    required the option *below* the count; f7de1cf7 fixed that.)

    ``"two_stage"`` (strict): the 3-6 question for every item; for counts above 6 the answer must be
    "more than 6" and the 7-10 question (``count_more``) must then name the count.  Replies are read
    from their end.  Counts outside 3-10 cannot be confirmed by either option set and are refused as
    invalid instances (the published rows count 3 to 10).
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
        return {**super().params(), "stages": self.stages, "judge_reading": judge_reading(self)}

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
            asked = [("count" if count <= 6 else "count_above_six", published_count_letter(count))]
        else:
            asked = [("count", count_letter(count))] + ([("count_more", count_more_letter(count))] if count > 6 else [])
        reader = self.reader("first_answer_letter")
        expected: list[str] = []
        answered: list[str | None] = []
        for template, letter in asked:
            expected.append(letter)
            answered.append(session.letter(template, step=template, target=target, reader=reader))
            if answered[-1] != letter:
                session.skip(*(t for t, _ in asked[len(answered) :]))
                break
        match = float(answered == expected)
        return session.check(
            match, {"count_match": match}, object=target, count=count, expected_letters=expected, answered_letters=answered
        )


# -- existence per object --------------------------------------------------------------------------
class Existence(JudgedImageTask):
    """Family of i_object_attribute / _cot / _commonsense and i_relation_two / _all (no arguments)."""

    def read(self, instance: Instance) -> list[str]:
        return texts_of(instance, require_field(instance, "object", "objects"), "object")

    def judge(self, spec: list[str], session: JudgeSession) -> Check:
        verdicts = [float(session.yes("existence", step=f"object_{i}", target=o)) for i, o in enumerate(spec)]
        mean = _mean(verdicts)
        return session.check(mean, {"objects_present": mean}, objects=spec)
