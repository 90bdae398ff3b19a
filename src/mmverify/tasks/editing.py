"""Image editing tasks: is the image unchanged outside the edited box, and is the edit right inside it?

Published semantics (``eval_image.py``: ``IEdit`` and its subclasses, ``IEditAdd``; DESIGN §5):

* The generation must be exactly one image; it is resized to the comparison image's size (PIL
  bicubic).  The annotated ``bbox`` is widened by ``size // margin_divisor`` on every side and
  clipped to the image; that area is blacked out in both images and SSIM (scikit-image defaults)
  is taken over the whole image (:func:`~mmverify.verifiers.image.preserve.check_preserved_outside`),
  floored at 0 so that scores stay in [0, 1] (the published product could go negative).  The
  widened box cut from the resized generation is the *crop* that is then checked.
* i_edit_object_add / _modify (replacing) / _attribute (altering): existence question per object on
  the crop, mean; i_edit_object_remove: the same presence question with its verdict inverted (an
  object counts as removed when the judge answers No), mean; i_edit_text_add / _alter: OCR of the
  main text of the crop, ``1 - min(WER, 1)`` against ``text`` (an empty ``text`` means the text must
  be gone: an empty reading scores 1, any reading 0), normalised as the OCR tasks are for the
  profile (:mod:`.image_ocr`).  The comparison image is the source (``image_list[0]``); margin
  divisor 20, as in the newest published code for these tasks.
* i_edit_add / i_edit_color (interleaved adding / colour altering): the comparison image is the
  ground-truth edit (``ref_image_list[0]``), margin divisor 10, and the crop is compared with the
  same box of the ground truth by DreamSim (``image_similarity`` backend).

Score = preservation x check.  When preservation is 0 the product is 0 whatever the check says, so
the judge (or DreamSim) is not asked; the evidence lists what was skipped.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.image.fill import Box
from ..verifiers.image.preserve import check_preserved_outside, edited_crop, resize_to, widen_box
from ..verifiers.image.ssim import DEFAULT_WIN
from . import models
from .base import Task, require_field
from .image_judged import JudgedImageTask, JudgeSession, invalid, texts_of
from .image_ocr import NormalizationOption, normalizer, word_accuracy
from .media import instance_images
from .response import Response

RESAMPLE = "bicubic"  # PIL's default for RGB, which the published code relied on
SOURCE_MARGIN_DIVISOR = 20  # the judged edits: newest published code
REFERENCE_MARGIN_DIVISOR = 10  # the DreamSim edits against a ground-truth image


# -- annotation ------------------------------------------------------------------------------------
def read_bbox(instance: Instance) -> list[float]:
    """``bbox`` as four finite numbers.  Values outside the image (-1, or beyond the width, as in
    the published data) are kept: the widened box is clipped to the image anyway."""
    raw = require_field(instance, "bbox")
    if not isinstance(raw, (list, tuple)) or len(raw) != 4:
        raise invalid(instance, f"bbox must be [x0, y0, x1, y1], got {raw!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in raw):
        raise invalid(instance, f"bbox values must be numbers, got {raw!r}")
    return [float(v) for v in raw]


def first_index(instance: Instance, field: str) -> Any:
    """The first entry of a media list (``image_list`` / ``ref_image_list``)."""
    raw = require_field(instance, field)
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise invalid(instance, f"{field} is empty")
    return items[0]


def widened_box(instance: Instance, bbox: Sequence[float], width: int, height: int, divisor: int) -> Box:
    """The clipped, widened box; an annotation whose box misses the image is the user's to fix."""
    try:
        box = widen_box(bbox, width, height, divisor)
    except ValueError as exc:
        raise invalid(instance, str(exc)) from None
    x0, y0, x1, y1 = box
    if x1 <= x0 or y1 <= y0:
        raise invalid(instance, f"bbox {list(bbox)!r} lies outside the {width}x{height} image")
    return box


@dataclass(frozen=True)
class Preservation:
    score: float  # SSIM outside the widened box, floored at 0
    ssim: float
    box: Box
    crop: np.ndarray  # the widened box of the resized generation
    evidence: Mapping[str, Any]


def preservation(
    instance: Instance, generated: np.ndarray, comparison: np.ndarray, bbox: Sequence[float], divisor: int
) -> Preservation:
    height, width = comparison.shape[:2]
    if min(height, width) < DEFAULT_WIN:
        # the size comes from the instruction set's image, so this is not the generator's fault
        raise invalid(instance, f"the {width}x{height} comparison image is smaller than the SSIM window")
    box = widened_box(instance, bbox, width, height, divisor)
    resized = resize_to(generated, width, height, RESAMPLE)  # once: both steps below reuse it
    check = check_preserved_outside(resized, comparison, bbox, margin_divisor=divisor)
    ssim = float(check.components["ssim_outside"])
    evidence = {
        "bbox": list(bbox),
        "widened_box": list(box),
        "compared_size": [width, height],
        "generated_size": [int(generated.shape[1]), int(generated.shape[0])],
    }
    return Preservation(check.score, ssim, box, edited_crop(resized, comparison.shape, bbox, divisor), evidence)


# -- judged edits ----------------------------------------------------------------------------------
class _JudgedEdit(JudgedImageTask):
    """Source from ``image_list[0]``; subclasses say what the judge is asked about the crop."""

    version = 2  # the family's revision (2: media indices as written, nothing coerced)
    margin_divisor: ClassVar[int] = SOURCE_MARGIN_DIVISOR

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "margin_divisor": self.margin_divisor, "resample": RESAMPLE}

    @abstractmethod
    def targets(self, instance: Instance) -> Any:
        """What the judge checks on the crop (objects, or the reference text)."""

    @abstractmethod
    def judge_steps(self, spec: Any) -> list[str]:
        """The steps :meth:`judge` would ask, for the evidence when they are skipped."""

    def read(self, instance: Instance) -> tuple[list[float], Any, Any]:
        return read_bbox(instance), self.targets(instance), first_index(instance, "image_list")

    def score(self, instance: Instance, response: Response) -> Check:
        bbox, spec, source_index = self.read(instance)  # the user's problems first, whatever the response
        [source] = instance_images(instance, [source_index], response.decoder)
        kept = preservation(instance, response.single_image(), source, bbox, self.margin_divisor)
        session = JudgeSession(kept.crop)
        if kept.score <= 0.0:
            session.skip(*self.judge_steps(spec))
            return session.check(0.0, {"ssim_outside": kept.ssim}, **kept.evidence)
        judged = self.judge(spec, session)
        return Check(
            score=kept.score * judged.score,
            components={"ssim_outside": kept.ssim, **judged.components},
            evidence={**kept.evidence, **judged.evidence},
        )


class ObjectEdit(_JudgedEdit):
    """Family of i_edit_object_add / _remove / _modify / _attribute (rows set ``component``, ``inverted``)."""

    component: ClassVar[str] = "objects_present"
    inverted: ClassVar[bool] = False  # removal: the presence verdict counts when it is "No"

    def targets(self, instance: Instance) -> list[str]:
        return texts_of(instance, require_field(instance, "object", "objects"), "object")

    def judge_steps(self, spec: list[str]) -> list[str]:
        return [f"object_{i}" for i in range(len(spec))]

    def judge(self, spec: list[str], session: JudgeSession) -> Check:
        present = [session.yes("existence", step=s, target=o) for s, o in zip(self.judge_steps(spec), spec)]
        mean = sum(float(p != self.inverted) for p in present) / len(present)
        return session.check(mean, {self.component: mean}, objects=spec, present=present)


class TextEdit(NormalizationOption, _JudgedEdit):
    """Family of i_edit_text_add / _alter.  ``normalization`` "mmmg" (published) or "unicode"
    (strict), and the judge's list read as for the OCR tasks (:mod:`.image_ocr`: the published first
    one-line list under mmmg)."""

    version = 3  # the family's revision, part of its tasks' keys (3: media indices as written); rows carry their own
    roles = ("ocr",)

    def targets(self, instance: Instance) -> str:
        """``text`` as a string; unlike the OCR tasks an empty string is valid (text removal)."""
        raw = require_field(instance, "text")
        pieces = [raw] if isinstance(raw, str) else raw
        if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
            raise invalid(instance, f"text must be a string or a list of strings, got {raw!r}")
        return " ".join(p.strip() for p in pieces if p.strip())

    def judge_steps(self, spec: str) -> list[str]:
        return ["ocr"]

    def judge(self, spec: str, session: JudgeSession) -> Check:
        reading = session.texts("ocr", step="ocr", role="ocr", reader=self.list_reader())
        accuracy, rate = word_accuracy([spec], [reading], normalizer(self.normalization))
        return session.check(accuracy, {"ocr_accuracy": accuracy, "wer": rate}, reference=spec, reading=reading)


# -- edits against a ground-truth image (DreamSim) --------------------------------------------------
class ReferenceEdit(Task):
    """Family of i_edit_add / i_edit_color (no arguments)."""

    version = 2  # the family's revision (2: media indices as written, nothing coerced)
    margin_divisor: ClassVar[int] = REFERENCE_MARGIN_DIVISOR
    needed: ClassVar[tuple[str, ...]] = ("bbox", "image_list", "ref_image_list")

    def params(self) -> Mapping[str, Any]:
        return {"margin_divisor": self.margin_divisor, "resample": RESAMPLE}

    def read(self, instance: Instance) -> tuple[list[float], Any]:
        # an instance without the images or the box cannot be scored: say everything that is missing
        missing = [name for name in self.needed if instance.data.get(name) is None]
        if missing:
            raise invalid(
                instance,
                f"{self.id} needs {', '.join(self.needed)} (source and reference images, edited box); "
                f"missing: {', '.join(missing)}",
            )
        first_index(instance, "image_list")  # validated though unused: the ground truth is compared
        return read_bbox(instance), first_index(instance, "ref_image_list")

    def score(self, instance: Instance, response: Response) -> Check:
        bbox, reference_index = self.read(instance)
        [reference] = instance_images(instance, [reference_index], response.decoder)
        kept = preservation(instance, response.single_image(), reference, bbox, self.margin_divisor)
        if kept.score <= 0.0:
            return Check(
                score=0.0, components={"ssim_outside": kept.ssim}, evidence={**kept.evidence, "not_computed": ["similarity"]}
            )
        x0, y0, x1, y1 = kept.box
        similarity = crop_similarity(kept.crop, reference[y0:y1, x0:x1])
        return Check(
            score=kept.score * similarity,
            components={"ssim_outside": kept.ssim, "similarity": similarity},
            evidence=dict(kept.evidence),
        )


def crop_similarity(generated: np.ndarray, reference: np.ndarray) -> float:

    values = models.backend("image_similarity").similarity([(generated, reference)])
    value = float(values[0]) if len(values) == 1 else math.nan
    if not (0.0 <= value <= 1.0):
        raise ScoringError(ErrorCode.INTERNAL, f"image_similarity returned {list(values)!r} for one pair")
    return value
