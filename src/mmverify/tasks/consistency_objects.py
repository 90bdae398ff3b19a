"""i_consistency_semantic / _compose / _decompose: one generated image per described state.

Published semantics (``eval_interleaved.py:IConsistencySemantic.evaluate`` at d341665a, which the
compose / decompose classes inherit; version 1): the number of generated images must equal
``len(object)`` (otherwise 0); image i is asked the existence question for ``object[i]``; score =
the product.  Same rules in both profiles; judge replies are read strictly from their end.
i_consistency_decompose's ``image_list`` is the input image the model starts from; it is not scored.

A "No" makes the product 0, so later images are not asked about (the evidence lists them as
``not_asked``); for a reward, every judge call saved counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import GenerationFault
from ..core.types import Check, Instance
from .base import require_field
from .image_judged import JudgedImageTask, JudgeSession, texts_of
from .response import Response


class ObjectSequence(JudgedImageTask):
    """Family of i_consistency_semantic / _compose / _decompose (no arguments)."""

    def read(self, instance: Instance) -> list[str]:
        return texts_of(instance, require_field(instance, "object", "objects"), "object")

    def score(self, instance: Instance, response: Response) -> Check:
        objects = self.read(instance)
        count = len(response.of_type("image"))
        if count != len(objects):
            reason = "no_image" if count == 0 else "wrong_image_count"
            raise GenerationFault(reason, f"expected {len(objects)} images, got {count}", image_count=count)
        images = response.images()
        return self.judge((objects, images), JudgeSession(images[0]))

    def judge(self, spec: tuple[list[str], list[np.ndarray]], session: JudgeSession) -> Check:
        objects, images = spec
        verdicts: list[bool] = []
        for i, (target, image) in enumerate(zip(objects, images)):
            session.image = image  # each description is asked about its own image
            verdicts.append(session.yes("existence", step=f"image_{i}", target=target))
            if not verdicts[-1]:
                session.skip(*(f"image_{j}" for j in range(i + 1, len(objects))))
                break
        product = float(all(verdicts) and len(verdicts) == len(objects))
        evidence: dict[str, Any] = {"objects": objects, "verdicts": verdicts}
        return session.check(product, {"all_present": product}, **evidence)
