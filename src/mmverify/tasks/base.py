"""The task contract: parse the annotation, check the response's shape, call verifiers, combine."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from .response import Response


class Task(ABC):
    """One MMMG task.  Subclasses set ``id`` and ``version`` (bump it whenever scores can change)."""

    id: ClassVar[str]
    version: ClassVar[int] = 1
    binary: ClassVar[bool] = False  # scores are 0/1: ``passed`` is ``score == 1``

    @property
    def verifier_id(self) -> str:
        return f"{self.id}@{self.version}"

    def params(self) -> Mapping[str, Any]:
        """Settings that change scores; part of the result key."""
        return {}

    @abstractmethod
    def score(self, instance: Instance, response: Response) -> Check:
        """Score one response.  Raise GenerationFault for rule-breaking generations and
        ScoringError for problems that are not the generator's fault."""


def require_field(instance: Instance, *names: str) -> Any:
    """The first present field among ``names`` (the published data spells some fields two ways)."""
    for name in names:
        if name in instance.data and instance.data[name] is not None:
            return instance.data[name]
    raise ScoringError(
        ErrorCode.INVALID_INSTANCE,
        f"instance {instance.id} lacks field {' / '.join(repr(n) for n in names)}",
    )
