"""i_structure / a_structure: the response's modality order must be one of the allowed orders."""

from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.structure import check_order, modality_sequence
from .base import Task, require_field
from .response import Response


class OrderTask(Task):
    """Family of i_structure / a_structure (no arguments)."""

    version = 2  # the family's revision (2: an `order` that is not a non-empty list of t/i/a strings is refused)
    binary = True

    def __init__(self, strip_leading_text: bool = False, readable_media: bool = False) -> None:
        self.strip_leading_text = strip_leading_text
        self.readable_media = readable_media

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        # the published rule reads only the parts' types: a file that is not an image or a clip at
        # all (a text file, zero bytes) still counts as one; strict decodes each media part first
        return {"readable_media": profile == "strict"}

    def params(self) -> Mapping[str, Any]:
        # readable_media only where set, so that the mmmg profile's keys stay those it always had
        return {"strip_leading_text": self.strip_leading_text} | ({"readable_media": True} if self.readable_media else {})

    def score(self, instance: Instance, response: Response) -> Check:
        allowed = require_field(instance, "order")
        if isinstance(allowed, str):
            allowed = [allowed]
        if not isinstance(allowed, list) or not allowed or not all(isinstance(a, str) and a and set(a) <= set("tia") for a in allowed):
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: `order` must be a non-empty list of strings of t/i/a")
        if self.readable_media:
            response.images()  # an undecodable part scores 0 (unreadable_image / unreadable_audio)
            response.audios()
        sequence = modality_sequence(
            ((p.type, p.text) for p in response.parts), strip_leading_text=self.strip_leading_text
        )
        return check_order(sequence, allowed)
