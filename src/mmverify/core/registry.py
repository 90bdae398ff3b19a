"""A flat registry of namespaced ids (``task:i_format_border``, ``image:solid_fill``).

Entries are registered as ``"module:attribute"`` strings and imported on first use, so listing the
registry (``mmverify tasks``) never imports heavy dependencies.  Unknown ids fail with suggestions.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from typing import Any, Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownIdError(KeyError):
    """Raised for an id that is not registered; the message suggests close matches."""

    def __init__(self, kind: str, key: str, known: list[str]) -> None:
        matches = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
        self.key = key
        self.suggestions = matches
        super().__init__(f"unknown {kind} {key!r}.{hint}")

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


def import_object(target: str) -> Any:
    """Import ``"package.module:attr"``."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"lazy target must look like 'module:attr', got {target!r}")
    return getattr(importlib.import_module(module_name), attr)


class Registry(Generic[T]):
    """Maps namespaced ids to objects that are imported lazily."""

    def __init__(self, kind: str, default_namespace: str | None = None) -> None:
        self.kind = kind
        self.default_namespace = default_namespace
        self._targets: dict[str, str | Callable[[], T]] = {}
        self._loaded: dict[str, T] = {}
        # one load per id, also across threads: a factory called twice would make two distinct classes
        self._lock = threading.RLock()

    def qualify(self, key: str) -> str:
        """Add the default namespace to a bare id (``i_ocr`` -> ``task:i_ocr``)."""
        if ":" not in key and self.default_namespace:
            return f"{self.default_namespace}:{key}"
        return key

    def register(self, key: str, target: str | Callable[[], T]) -> None:
        """Register ``target`` (a ``"module:attr"`` string or a zero-argument factory) under ``key``."""
        key = self.qualify(key)
        if ":" not in key:
            raise ValueError(f"{self.kind} ids are namespaced ('ns:name'), got {key!r}")
        if key in self._targets:
            raise ValueError(f"{self.kind} {key!r} is already registered")
        if isinstance(target, str) and (target.count(":") != 1 or target.endswith(":")):
            raise ValueError(f"lazy target must look like 'module:attr', got {target!r}")
        self._targets[key] = target

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.qualify(key) in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._targets))

    def __len__(self) -> int:
        return len(self._targets)

    def get(self, key: str) -> T:
        """Return the object for ``key``, importing it on first use."""
        qualified = self.qualify(key)
        if qualified in self._loaded:
            return self._loaded[qualified]
        target = self._targets.get(qualified)
        if target is None:
            known = list(self._targets) + [k.split(":", 1)[1] for k in self._targets]
            raise UnknownIdError(self.kind, key, known)
        with self._lock:
            if qualified not in self._loaded:
                self._loaded[qualified] = import_object(target) if isinstance(target, str) else target()
            return self._loaded[qualified]
