"""The classes of the catalog's family rows, found by name (``IObjectCot``), so that built tasks
pickle: the classes are made on first use (:func:`mmverify.tasks.base.task_variant`) and this
module hands out the registry's one copy of each."""

from __future__ import annotations

from .base import variant_name
from .catalog import TASK_REGISTRY, TASKS


def __getattr__(name: str) -> type:
    for info in TASKS:
        if info.family and variant_name(info.id) == name:
            return TASK_REGISTRY.get(info.id)
    raise AttributeError(f"module {__name__!r} has no task class {name!r}")
