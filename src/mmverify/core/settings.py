"""Run-wide settings: the scoring context installed in this process, else the environment.

The ``MMVERIFY_*`` settings that decide what a run computes (models, device, precision, reference
sets, judges, cache folder) reach every layer through :func:`scoring_settings` and :func:`setting`:
the settings of the :class:`~mmverify.pipelines.context.ScoringContext` installed in this process
(``score``, ``serve`` and ``Reward`` install one; worker processes install their parent's), or --
while none is installed -- this process's environment, read at call time.  Variables that
third-party libraries read themselves (``HF_HUB_OFFLINE``, ``XDG_CACHE_HOME``) stay in the
environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Protocol

SETTINGS_PREFIX = "MMVERIFY_"
# a secret read by ``serve``'s own option alone: kept out of contexts, which travel to workers
_NOT_SETTINGS = frozenset({"MMVERIFY_SERVER_TOKEN"})
_TRUE = {"1", "true", "yes", "on"}


class HasSettings(Protocol):
    @property
    def settings(self) -> Mapping[str, str]: ...


_installed: HasSettings | None = None


def environment_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``MMVERIFY_*`` settings ``environ`` (default: this process's environment now) names."""
    source = os.environ if environ is None else environ
    found = {}
    for name in list(source):  # names, then values: another thread may unset a variable meanwhile
        if name.startswith(SETTINGS_PREFIX) and name not in _NOT_SETTINGS:
            value = source.get(name)
            if value is not None:
                found[name] = value
    return found


def installed_context() -> HasSettings | None:
    """The context installed in this process, or None (settings then come from the environment)."""
    return _installed


def set_installed_context(context: HasSettings | None) -> None:
    """Low level: :func:`mmverify.pipelines.context.install` also resets what the old settings built."""
    global _installed
    _installed = context


def scoring_settings() -> Mapping[str, str]:
    """Every ``MMVERIFY_*`` setting in force in this process."""
    context = _installed
    return environment_settings() if context is None else context.settings


def setting(name: str, default: str = "") -> str:
    """One setting in force in this process (``default`` when unset)."""
    context = _installed
    if context is None:
        return os.environ.get(name, default) if name not in _NOT_SETTINGS else default
    return context.settings.get(name, default)


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def default_cache_dir(settings: Mapping[str, str] | None = None) -> Path:
    """``MMVERIFY_CACHE_DIR`` of ``settings`` (default: those in force), else ``$XDG_CACHE_HOME/mmverify``."""
    configured = setting("MMVERIFY_CACHE_DIR") if settings is None else settings.get("MMVERIFY_CACHE_DIR", "")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mmverify"


@dataclass(frozen=True)
class Settings:
    """``cache_dir``: embeddings, judge replies, model checkpoints.  ``offline``: never touch the network
    (also honoured when ``HF_HUB_OFFLINE`` is set)."""

    cache_dir: Path = field(default_factory=default_cache_dir)
    offline: bool = field(default_factory=lambda: is_true(setting("MMVERIFY_OFFLINE")) or is_true(os.environ.get("HF_HUB_OFFLINE")))


_WARNED_OPEN_DIRS: set[str] = set()


def private_dir(path: Path) -> Path:
    """``path`` as a folder: created (with any missing parents) owner-only (0700) when it does not
    exist -- caches hold transcripts, judge replies and embeddings of user data.

    A folder that already exists keeps its permissions: a team cache that is deliberately shared
    (group-writable, setgid) stays shared.  One that anybody may write to (world-writable) is used
    but named in a warning once per process: other users could plant or replace cache entries there.
    """
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # made by another process meanwhile: it decides the permissions
            if not path.is_dir():
                raise
        else:
            try:
                path.chmod(0o700)  # whatever the umask
            except OSError:
                pass
        return path
    try:
        mode = path.stat().st_mode
    except OSError:
        return path
    if mode & 0o002 and str(path) not in _WARNED_OPEN_DIRS:
        _WARNED_OPEN_DIRS.add(str(path))
        import logging

        logging.getLogger(__name__).warning(
            "cache folder %s is writable by every user (mode %o): others can plant or replace cached entries; "
            "use a folder only you (or your group) can write", path, mode & 0o7777,
        )
    return path
