"""The two ways an item can go wrong, kept strictly apart.

* :class:`GenerationFault` -- the generation broke the task's rules (no image, unreadable media written
  by the model, wrong part order).  The item is *scored 0* with a machine-readable ``reason``.
* :class:`ScoringError` -- the scorer's or the user's problem (unknown task, missing file, model
  unavailable, timeout).  The item becomes an ``error`` row; it is never counted as 0.
"""

from __future__ import annotations

import traceback


class ErrorCode:
    """Codes of ``error`` rows (``error.code`` in results.jsonl)."""

    MALFORMED_LINE = "malformed_line"
    UNKNOWN_TASK = "unknown_task"
    NOT_IMPLEMENTED = "not_implemented"
    UNKNOWN_INSTANCE = "unknown_instance"
    INVALID_INSTANCE = "invalid_instance"
    MISSING_MEDIA = "missing_media"
    PATH_OUTSIDE_ROOT = "path_outside_root"
    MODEL_UNAVAILABLE = "model_unavailable"
    JUDGE_FAILED = "judge_failed"  # the judge endpoint gave no usable reply after retries
    JUDGE_UNPARSEABLE = "judge_unparseable"  # a reply that does not end in the answer format asked for
    TIMEOUT = "timeout"
    WARMUP_TIMEOUT = "warmup_timeout"  # worker start-up, task import/build or first use ran past the warm-up budget
    WORKER_CRASHED = "worker_crashed"
    INTERNAL = "internal_error"


class ScoringError(Exception):
    """An item that cannot be scored for reasons that are not the generator's fault."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class GenerationFault(Exception):
    """A generation that breaks the task's rules; scored 0 with ``reason``."""

    def __init__(self, reason: str, message: str = "", **evidence: object) -> None:
        super().__init__(f"{reason}: {message}" if message else reason)
        self.reason = reason
        self.message = message
        self.evidence = evidence


def raised_at(exc: BaseException) -> str:
    """``file.py:line`` where ``exc`` was raised: its innermost frame, or what the process that
    raised it said (``exc.raised_at``, set on errors that crossed from a model process)."""
    told = getattr(exc, "raised_at", None)
    if isinstance(told, str):
        return told
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown"
    return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}"
