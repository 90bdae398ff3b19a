"""The task contract: parse the annotation, check the response's shape, call verifiers, combine."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from .response import Response


PROFILES: tuple[str, ...] = ("mmmg", "strict")
DEFAULT_PROFILE = "mmmg"
PROFILE_HELP = {
    "mmmg": "the published MMMG evaluator's decisions (newest version per task), only its crashes fixed",
    "strict": "the corrections this project recommends where the published rules can be gamed or are wrong",
}


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    return profile


class Task(ABC):
    """One MMMG task.  Subclasses set ``id`` and ``version`` (bump it whenever scores can change).

    Build tasks with :meth:`build`, which applies a scoring profile: ``mmmg`` reproduces the published
    evaluator, ``strict`` applies this project's corrections.  A task whose rules differ between the
    profiles overrides :meth:`profile_params` (constructor arguments per profile) or reads
    ``self.profile``; the profile is part of the verifier id and so of every result key.
    """

    id: ClassVar[str]
    version: ClassVar[int] = 1
    binary: ClassVar[bool] = False  # scores are 0/1: ``passed`` is ``score == 1``
    profile: str = DEFAULT_PROFILE

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        """Constructor arguments that realise ``profile`` (none by default)."""
        return {}

    @classmethod
    def build(cls, profile: str = DEFAULT_PROFILE) -> "Task":
        task = cls(**cls.profile_params(check_profile(profile)))
        task.profile = profile
        return task

    @property
    def strict(self) -> bool:
        return self.profile == "strict"

    @property
    def verifier_id(self) -> str:
        return f"{self.id}@{self.version}:{self.profile}"

    def params(self) -> Mapping[str, Any]:
        """Settings that change scores; part of the result key."""
        return {}

    def warm_up(self) -> None:
        """Load models and heavy imports ahead of the first item (run under the warm-up budget, not
        the item's time limit).  Optional: first use does the same lazily."""

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
