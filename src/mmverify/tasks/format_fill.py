"""i_format_background / i_format_border: solid colour regions and borders (program-verified)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.image.fill import (
    DEFAULT_PARAMS,
    FillParams,
    check_solid_border,
    check_solid_region,
    parse_region,
    resolve_color,
)
from .base import Task, require_field
from .response import Response


def _color(instance: Instance) -> Any:
    color = require_field(instance, "color", "colour")
    try:
        resolve_color(color)
    except (TypeError, ValueError) as exc:
        raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {exc}") from None
    return color


class _FillTask(Task):
    version = 2  # the family's revision (2: a colour is a name or three integers, nothing coerced)

    def __init__(self, params: FillParams = DEFAULT_PARAMS) -> None:
        self.fill_params = params

    def params(self) -> Mapping[str, Any]:
        return asdict(self.fill_params)


class FormatBackground(_FillTask):
    id = "i_format_background"

    def score(self, instance: Instance, response: Response) -> Check:
        region = require_field(instance, "region")
        try:
            parse_region(str(region))
        except ValueError as exc:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {exc}") from None
        color = _color(instance)
        return check_solid_region(response.single_image(), str(region), color, self.fill_params)


class FormatBorder(_FillTask):
    id = "i_format_border"

    def score(self, instance: Instance, response: Response) -> Check:
        color = _color(instance)
        return check_solid_border(response.single_image(), color, self.fill_params)
