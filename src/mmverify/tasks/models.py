"""How tasks reach models: only the capabilities and judge roles their catalog row declares.

The executors score each item inside :func:`declared` with the task's ``needs``; a task that asks
for anything else gets an ``internal_error`` naming the undeclared need, so the catalog -- what
readiness checks, what keys and batching rely on -- cannot drift from what tasks really use.
Outside :func:`declared` (a task object used directly, reference building) nothing is checked.
Model code is imported late: listing tasks must not import it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from .catalog import CATALOG, JUDGE_NEED

_DECLARED: ContextVar[tuple[str, frozenset[str]] | None] = ContextVar("mmverify_task_needs", default=None)


class UndeclaredNeed(RuntimeError):
    """A task asked for a model or judge its catalog row does not declare (a bug in the task)."""


@contextmanager
def declared(task_id: str) -> Iterator[None]:
    """Model access limited to what ``task_id``'s catalog row declares (tasks outside the catalog:
    unlimited)."""
    info = CATALOG.get(task_id)
    token = _DECLARED.set(None if info is None else (task_id, frozenset(info.needs)))
    try:
        yield
    finally:
        _DECLARED.reset(token)


def _check(need: str) -> None:
    scope = _DECLARED.get()
    if scope is not None and need not in scope[1]:
        task_id, needs = scope
        raise UndeclaredNeed(f"task {task_id} used {need!r}, which its catalog row does not declare ({', '.join(sorted(needs)) or 'nothing'})")


def backend(capability: str) -> Any:
    """The configured backend of ``capability`` (a model hub capability name)."""
    _check(capability)
    from ..models.hub import get_hub

    return get_hub().backend(capability)


def judge(role: str = "default") -> Any:
    """The judge of ``role``; the text judge (``llm``) is declared as ``judge:llm``, every other
    role of a vision-language judge as ``judge``."""
    _check(f"{JUDGE_NEED}:llm" if role == "llm" else JUDGE_NEED)
    from ..models.hub import get_hub

    return get_hub().judge(role)
