"""Problems met with cache files, kept once per file and kind so that a run summary can show them.

:class:`~mmverify.models.cache.SQLiteStore` records what it found wrong with a file and what it did
about it; worker processes forward theirs to the parent (:func:`set_cache_problem_logging`,
:func:`record_cache_problem`), which logs each one once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass
from typing import Any, Mapping

log = logging.getLogger("mmverify.models.cache")  # where cache warnings have always been logged


@dataclass(frozen=True)
class CacheProblem:
    """Something wrong with a cache file, and what was done about it.

    ``kind``: ``corrupt`` (moved aside, a fresh cache started), ``read_only`` (read, not written),
    ``unusable`` (bypassed) or ``write_failed`` (values used, no longer stored).
    """

    path: str
    kind: str
    detail: str
    action: str
    moved_to: str | None = None

    def message(self) -> str:
        return f"cache {self.path}: {self.detail}; {self.action}"


_PROBLEMS: dict[tuple[str, str], CacheProblem] = {}
_PROBLEMS_LOCK = threading.Lock()
_LOGGING = {"enabled": True}


def cache_problems() -> list[dict[str, Any]]:
    """The cache problems met in this process (or forwarded to it by its workers), oldest first,
    one per file and kind, as JSON-ready dicts (``path``, ``kind``, ``detail``, ``action``,
    ``moved_to``)."""
    with _PROBLEMS_LOCK:
        return [asdict(problem) for problem in _PROBLEMS.values()]


def record_cache_problem(problem: CacheProblem | Mapping[str, Any]) -> bool:
    """Keep ``problem`` (once per file and kind) and log it as a warning; True when it is new."""
    if not isinstance(problem, CacheProblem):
        problem = CacheProblem(**dict(problem))
    with _PROBLEMS_LOCK:
        if (problem.path, problem.kind) in _PROBLEMS:
            return False
        _PROBLEMS[(problem.path, problem.kind)] = problem
    if _LOGGING["enabled"]:
        log.warning(problem.message())
    return True


def set_cache_problem_logging(enabled: bool) -> None:
    """Whether new problems are logged by this process (worker processes forward them instead)."""
    _LOGGING["enabled"] = enabled


def clear_cache_problems() -> None:
    """Forget the problems recorded so far (a long-lived process starting a new run)."""
    with _PROBLEMS_LOCK:
        _PROBLEMS.clear()
