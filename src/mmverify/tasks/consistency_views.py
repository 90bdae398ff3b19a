"""i_consistency_3d_object / _3d_scene: generated views compared with reference views by SSIM.

Published semantics: the number of generated images must equal the number of reference views
(otherwise 0); each generated view is resized to its reference's size (Lanczos) and the score is
the mean SSIM over views.  SSIM can be negative (a view anti-correlated with its reference) and the
published code averaged that raw value into its means; scores here are floored at 0 in both
profiles, because a score lies in [0, 1].  The raw mean is kept as ``evidence.mean_ssim`` (and each
view's SSIM in ``components``), so the published per-row value can be recovered.
"""

from __future__ import annotations

from ..core.errors import ErrorCode, GenerationFault, ScoringError
from ..core.types import Check, Instance
from ..verifiers.image.preserve import resize_to
from ..verifiers.image.ssim import DEFAULT_WIN, structural_similarity
from .base import Task, require_field
from .media import instance_images
from .response import Response


class ViewConsistency(Task):
    """Family of i_consistency_3d_object / _3d_scene (no arguments)."""

    version = 2  # the family's revision (2: a reference view too small for SSIM is the data's error, not a 0)

    def score(self, instance: Instance, response: Response) -> Check:
        references = instance_images(instance, require_field(instance, "ref_image_list"), response.decoder)
        for number, reference in enumerate(references):  # generations are resized to these: the data's fault
            if min(reference.shape[:2]) < DEFAULT_WIN:
                size = "x".join(str(n) for n in reference.shape[1::-1])
                message = f"{instance.id}: reference view {number} is {size}, smaller than the {DEFAULT_WIN}x{DEFAULT_WIN} SSIM window"
                raise ScoringError(ErrorCode.INVALID_INSTANCE, message)
        count = len(response.of_type("image"))
        if count != len(references):
            raise GenerationFault(
                "wrong_image_count", f"expected {len(references)} images, got {count}", image_count=count
            )
        per_view = []
        for generated, reference in zip(response.images(), references):
            height, width = reference.shape[:2]
            per_view.append(structural_similarity(resize_to(generated, width, height, "lanczos"), reference))
        mean = sum(per_view) / len(per_view)
        return Check(
            score=min(1.0, max(0.0, mean)),
            components={f"ssim_view_{i}": value for i, value in enumerate(per_view)},
            evidence={"views": len(per_view), "mean_ssim": mean},
        )
