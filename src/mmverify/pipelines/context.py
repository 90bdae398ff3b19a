"""The scoring context: every setting besides the items that decides what a run computes.

``mmverify score``, ``mmverify serve`` and :class:`~mmverify.pipelines.reward.Reward` each build one
:class:`ScoringContext` from their options and :meth:`~ScoringContext.apply` it; nothing else writes
model, reference, device, precision or judge settings.  Applying stores them in this process's
environment, which is how worker processes (``--workers N``, Ray actors) receive them, and rebuilds
the process-wide model hub when anything changed.  The same settings are part of every model task's
result key (:func:`mmverify.pipelines.plan.model_configuration` and the judge identities), so a
run with another checkpoint, device, precision or judge rescores instead of reusing rows.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, MutableMapping, Sequence

from ..core.registry import UnknownIdError

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class JudgeOptions:
    """The judge settings of ``--vlm-*``: a default endpoint and model, and per-role overrides
    (``ROLE=MODEL[@URL]``)."""

    base_url: str | None = None
    model: str | None = None
    roles: tuple[str, ...] = ()
    concurrency: int | None = None
    api_key_env: str | None = None


def _joined(values: str | Sequence[str] | None) -> str:
    if not values:
        return ""
    return values if isinstance(values, str) else ",".join(values)


@dataclass(frozen=True)
class ScoringContext:
    """``models``: ``capability=backend[@source][?options]`` specs; ``references``: ``name=folder``
    reference sets; ``device``/``precision``: for torch backends; ``offline``: never touch the
    network; ``cache_dir``: embeddings, transcripts and judge replies; ``judge``: see
    :class:`JudgeOptions`; ``env``: further variables to set (e.g. ``MMVERIFY_WAVLM_SV_SOURCE``).
    Invalid values raise ``ValueError`` naming the option, before anything is changed."""

    models: str | Sequence[str] | None = None
    references: str | Sequence[str] | None = None
    device: str | None = None
    precision: str | None = None
    offline: bool = False
    cache_dir: str | Path | None = None
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    env: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        from ..models.hub import parse_specs
        from ..models.judge_config import apply_cli_options
        from ..references.sets import parse_references

        if self.precision and self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        for name, parse, text in (("models", parse_specs, self.models), ("references", parse_references, self.references)):
            try:
                parse(_joined(text))
            except (KeyError, UnknownIdError, ValueError) as exc:
                raise ValueError(f"{name}: {exc}") from None
        judge = self.judge
        try:
            apply_cli_options(  # validates the judge options, writing into a scratch mapping
                base_url=judge.base_url, model=judge.model, roles=judge.roles, concurrency=judge.concurrency,
                api_key_env=judge.api_key_env, environ={},
            )  # fmt: skip
        except (KeyError, UnknownIdError) as exc:
            raise ValueError(str(exc)) from None

    def environment(self) -> dict[str, str]:
        """The variables that carry this context (into worker processes too)."""
        from ..models.hub import ENV_VAR as MODELS_VAR, PRECISION_ENV_VAR
        from ..models.judge_config import apply_cli_options
        from ..references.sets import ENV_VAR as REFERENCES_VAR

        variables = {str(name): str(value) for name, value in (self.env or {}).items()}
        if self.offline:
            variables.update(HF_HUB_OFFLINE="1", MMVERIFY_OFFLINE="1")
        if self.cache_dir is not None:
            variables["MMVERIFY_CACHE_DIR"] = str(self.cache_dir)
        if self.device:
            variables["MMVERIFY_DEVICE"] = self.device
        if self.precision:
            variables[PRECISION_ENV_VAR] = self.precision
        if self.models:
            variables[MODELS_VAR] = _joined(self.models)
        if self.references:
            variables[REFERENCES_VAR] = _joined(self.references)
        judge = self.judge
        apply_cli_options(
            base_url=judge.base_url, model=judge.model, roles=judge.roles, concurrency=judge.concurrency,
            api_key_env=judge.api_key_env, environ=variables,
        )  # fmt: skip
        return variables

    def apply(self, environ: MutableMapping[str, str] | None = None) -> bool:
        """Set :meth:`environment` (only what it names; other settings stay as they are) and, when
        anything changed, make the next model use rebuild the process-wide hub.  True if changed."""
        target = os.environ if environ is None else environ
        changed = False
        for name, value in self.environment().items():
            if target.get(name) != value:
                target[name] = value
                changed = True
        if changed and environ is None:
            hub_module = sys.modules.get("mmverify.models.hub")
            if hub_module is not None:
                hub_module._HUB = None  # type: ignore[attr-defined]
            sets_module = sys.modules.get("mmverify.references.sets")
            if sets_module is not None:
                sets_module.clear_memo()  # type: ignore[attr-defined]
        return changed
