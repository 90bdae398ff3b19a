"""Plain data types passed between the layers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

PartType = Literal["text", "image", "audio"]
PART_TYPES: tuple[str, ...] = ("text", "image", "audio")
MODALITY_GROUPS: tuple[str, ...] = ("image", "image-text", "audio", "audio-text")


@dataclass(frozen=True)
class Part:
    """One element of a response: text, or a media file given by path or inline bytes."""

    type: PartType
    text: str | None = None
    path: str | None = None
    data: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Generation:
    """One manifest line: a model's response to one instance."""

    task: str
    instance_id: str
    parts: tuple[Part, ...]
    sample: int = 0
    model: str | None = None
    instance: Mapping[str, Any] | None = None  # inline annotation, replaces the instruction-set lookup
    line: int = 0  # 1-based manifest line number, 0 when not read from a file


@dataclass(frozen=True)
class Instance:
    """An instruction with its annotation, as stored in ``<task>.jsonl``."""

    id: str
    data: Mapping[str, Any]
    source: str = ""  # instruction file stem, names the instance's media (``image/<source>_<k>.png``)
    media_dir: Path | None = None  # folder holding ``image/`` and ``audio/`` of the instruction set
    # the run's path policy (data root, symlinks) when the media sit beside the generations rather
    # than in an instruction set: ``image/<source>_<k>.png`` -> its path, or ScoringError
    resolve: Callable[[str], Path] | None = field(default=None, repr=False)

    def media_path(self, kind: str, index: int) -> Path | None:
        """Where input/reference media number ``index`` lives (official layout), if known; raises
        ScoringError (path_outside_root) when the run's path policy refuses that path."""
        suffix = {"image": "png", "audio": "wav"}[kind]
        name = f"{kind}/{self.source}_{int(index)}.{suffix}"
        if self.resolve is not None:
            return self.resolve(name)
        return None if self.media_dir is None else self.media_dir / name


@dataclass(frozen=True)
class Check:
    """What a verifier or task decides about one generation."""

    score: float
    passed: bool | None = None
    components: Mapping[str, float] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.score, (int, float)) and math.isfinite(self.score) and 0.0 <= self.score <= 1.0):
            raise ValueError(f"score must be a finite number in [0, 1], got {self.score!r}")

    @classmethod
    def fail(cls, reason: str, **evidence: Any) -> "Check":
        """A score of 0 because the generation broke the task's rules (``passed`` is decided by the
        task: False for pass/fail tasks, None for continuous ones)."""
        return cls(score=0.0, passed=None, evidence=evidence, reason=reason)
