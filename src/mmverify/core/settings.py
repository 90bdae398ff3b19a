"""Run-wide settings read from the environment (and overridable from the CLI)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def default_cache_dir() -> Path:
    if "MMVERIFY_CACHE_DIR" in os.environ:
        return Path(os.environ["MMVERIFY_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mmverify"


@dataclass(frozen=True)
class Settings:
    """``cache_dir``: embeddings, judge replies, model checkpoints.  ``offline``: never touch the network
    (also honoured when ``HF_HUB_OFFLINE`` is set)."""

    cache_dir: Path = field(default_factory=default_cache_dir)
    offline: bool = field(default_factory=lambda: _env_flag("MMVERIFY_OFFLINE") or _env_flag("HF_HUB_OFFLINE"))


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) with owner-only permissions on the leaf: caches hold
    transcripts, judge replies and embeddings of user data."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        path.chmod(0o700)
    except OSError:  # a shared folder the user does not own: leave its permissions alone
        pass
    return path
