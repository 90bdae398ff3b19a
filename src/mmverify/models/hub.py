"""Which backend serves each capability in this process.

Configured with specs ``capability=backend`` or ``capability=backend@source`` (a hub id or a local
path), from ``--model`` options or the ``MMVERIFY_MODELS`` environment variable (comma-separated;
worker processes inherit it).  Backends are created on first use and shared by all tasks.
"""

from __future__ import annotations

import inspect
import os
import threading
from typing import Any, Mapping

from ..core.registry import UnknownIdError
from ..core.settings import Settings
from .base import Backend, ModelUnavailable
from .cache import OutputCache
from .catalog import BACKEND_INFO, BACKEND_REGISTRY, CAPABILITIES

ENV_VAR = "MMVERIFY_MODELS"


def _family(capability: str) -> str:
    """Capabilities that differ only by language (``transcriber``, ``transcriber_zh``) share backends."""
    return capability.split("_zh")[0]


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``"speaker=resemblyzer"`` -> ``("speaker", "resemblyzer", None)``; validates both names."""
    capability, sep, rest = spec.partition("=")
    capability, rest = capability.strip(), rest.strip()
    if not sep or not capability or not rest:
        raise ValueError(f"model spec must look like 'capability=backend[@source]', got {spec!r}")
    name, _, source = rest.partition("@")
    if capability not in CAPABILITIES:
        raise UnknownIdError("capability", capability, sorted(CAPABILITIES))
    if name not in BACKEND_INFO:
        raise UnknownIdError("model backend", name, sorted(BACKEND_INFO))
    if _family(BACKEND_INFO[name].capability) != _family(capability):
        raise ValueError(f"backend {name!r} provides {BACKEND_INFO[name].capability!r}, not {capability!r}")
    return capability, name, source or None


def parse_specs(text: str) -> dict[str, tuple[str, str | None]]:
    specs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        capability, name, source = parse_spec(item)
        specs[capability] = (name, source)
    return specs


class ModelHub:
    def __init__(
        self,
        overrides: Mapping[str, tuple[str, str | None]] | None = None,
        device: str | None = None,
        cache: OutputCache | None = None,
    ) -> None:
        self.overrides = dict(overrides or {})
        self.device = device
        self.cache = cache
        self._instances: dict[str, Backend] = {}
        self._judges: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "ModelHub":
        """Backends from MMVERIFY_MODELS; outputs cached in ``<cache dir>/outputs.sqlite``
        unless MMVERIFY_NO_OUTPUT_CACHE is set."""
        cache = None if os.environ.get("MMVERIFY_NO_OUTPUT_CACHE") else OutputCache(Settings().cache_dir / "outputs.sqlite")
        return cls(parse_specs(os.environ.get(ENV_VAR, "")), device=os.environ.get("MMVERIFY_DEVICE") or None, cache=cache)

    def _create(self, name: str, source: str | None) -> Backend:
        cls = BACKEND_REGISTRY.get(name)
        kwargs: dict[str, Any] = {"source": source, "device": self.device}
        if self.cache is not None and "cache" in inspect.signature(cls).parameters:
            kwargs["cache"] = self.cache
        return cls(**kwargs)

    def choice(self, capability: str) -> tuple[str, str | None]:
        if capability in self.overrides:
            return self.overrides[capability]
        if capability not in CAPABILITIES:
            raise UnknownIdError("capability", capability, sorted(CAPABILITIES))
        return CAPABILITIES[capability], None

    def backend(self, capability: str) -> Any:
        """The loaded backend for ``capability``; ``ModelUnavailable`` says how to get it."""
        with self._lock:
            if capability not in self._instances:
                self._instances[capability] = self._create(*self.choice(capability))
            backend = self._instances[capability]
        try:
            backend.ensure_loaded()
        except ModelUnavailable as exc:
            raise _with_alternatives(exc, capability, backend.name) from None
        except ImportError as exc:
            unavailable = ModelUnavailable(backend.name, f"cannot import its package ({exc})")
            raise _with_alternatives(unavailable, capability, backend.name) from None
        return backend

    def judge(self, role: str = "default") -> Any:
        """The :class:`~mmverify.models.protocols.VisionLanguageJudge` for ``role`` ("default",
        "spatial", "spatial_relative", "spatial_absolute", "ocr", "ocr_second", "llm"; an unconfigured
        role falls back to its parent -- spatial_relative/spatial_absolute to spatial -- then "default").

        Read from the MMVERIFY_VLM_* environment on every call (``score --vlm-*`` sets it), so a
        changed configuration takes effect; equal configurations share one judge instance.
        """
        from .judge import NOT_CONFIGURED, build_judge, config_from_env

        config = config_from_env(role)
        if config is None:
            raise ModelUnavailable("vlm", NOT_CONFIGURED)
        with self._lock:
            if config not in self._judges:
                self._judges[config] = build_judge(config)
            return self._judges[config]


def usable_alternatives(capability: str, exclude: str | None = None) -> list[str]:
    """Other backends of ``capability`` that are usable here as they stand (nothing is loaded)."""
    usable = []
    for info in BACKEND_INFO.values():
        if info.capability == capability and info.name != exclude:
            try:
                if BACKEND_REGISTRY.get(info.name)(source=None).availability().ok:
                    usable.append(info.name)
            except Exception:  # a backend whose check itself fails is simply not offered
                continue
    return usable


def _with_alternatives(exc: ModelUnavailable, capability: str, name: str) -> ModelUnavailable:
    """The same error, naming the other backends of the capability that are usable here."""
    others = usable_alternatives(capability, exclude=name)
    if not others:
        return exc
    hint = ", ".join(f"--model {capability}={other}" for other in others)
    widened = ModelUnavailable(name, f"{exc.message.split(': ', 1)[-1]}; usable here instead: {hint}")
    return widened


_HUB: ModelHub | None = None


def get_hub() -> ModelHub:
    """The process-wide hub (configured from the environment on first use)."""
    global _HUB
    if _HUB is None:
        _HUB = ModelHub.from_env()
    return _HUB
