"""Which backend serves each capability in this process.

Configured with specs ``capability=backend`` or ``capability=backend@source`` (a hub id or a local
path), from ``--model`` options or the ``MMVERIFY_MODELS`` environment variable (comma-separated;
worker processes inherit it).  Backends are created on first use and shared by all tasks.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Mapping

from ..core.registry import UnknownIdError
from .base import Backend, ModelUnavailable
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
    def __init__(self, overrides: Mapping[str, tuple[str, str | None]] | None = None, device: str | None = None) -> None:
        self.overrides = dict(overrides or {})
        self.device = device
        self._instances: dict[str, Backend] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "ModelHub":
        return cls(parse_specs(os.environ.get(ENV_VAR, "")), device=os.environ.get("MMVERIFY_DEVICE") or None)

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
                name, source = self.choice(capability)
                cls = BACKEND_REGISTRY.get(name)
                self._instances[capability] = cls(source=source, device=self.device)
            backend = self._instances[capability]
        try:
            backend.ensure_loaded()
        except ModelUnavailable:
            raise
        except ImportError as exc:
            raise ModelUnavailable(backend.name, f"cannot import its package ({exc})") from None
        return backend


_HUB: ModelHub | None = None


def get_hub() -> ModelHub:
    """The process-wide hub (configured from the environment on first use)."""
    global _HUB
    if _HUB is None:
        _HUB = ModelHub.from_env()
    return _HUB
