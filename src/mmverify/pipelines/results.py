"""results.jsonl: typed rows, durable appends, crash repair, resume by key.

Every row is one JSON line written with ``flush`` + ``fsync``; a run killed mid-write leaves at most
one partial last line, which the next run cuts off before appending.  Rows are never rewritten in
place: ``compact`` (used when error rows are retried) writes a new file and renames it over the old.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.types import Check
from ..data.jsonsafe import replace_surrogates

RESULTS_SCHEMA_VERSION = 1
ROW_FIELDS = (
    "task", "instance_id", "sample", "model", "status", "score", "passed",
    "components", "evidence", "reason", "error", "verifier", "key", "line",
)  # fmt: skip


_AS_THEY_ARE = (str, int, bool, type(None))  # exactly these types: what most evidence values are
_NON_FINITE = (float("inf"), float("-inf"))


def _clean(value: Any) -> Any:
    """JSON-safe copy: numpy scalars/arrays to Python, non-finite floats to None, tuples to lists."""
    kind = type(value)
    if kind in _AS_THEY_ARE:  # before the ABC checks below, which cost far more on every row
        return value
    if kind is float:
        return None if value != value or value in _NON_FINITE else value
    if kind is dict or isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return _clean(value.tolist())
    if isinstance(value, float) and (value != value or value in _NON_FINITE):
        return None
    return value


@dataclass(frozen=True)
class RowIdentity:
    """Which manifest entry a row answers: everything a row carries besides its outcome."""

    task: str
    instance_id: str
    sample: int
    model: str | None
    key: str
    line: int
    verifier: str | None

    def fields(self) -> dict[str, Any]:
        """The fields by name (every value is a str, an int or None: nothing to copy deeply, as
        ``dataclasses.asdict`` would, at a cost per row)."""
        return dict(vars(self))


def error_row(identity: RowIdentity, code: str, message: str) -> dict[str, Any]:
    """The row of an entry that could not be scored (every error row is built here)."""
    return make_row(**identity.fields(), error_code=code, error_message=message)


def make_row(
    *,
    task: str,
    instance_id: str,
    sample: int,
    model: str | None,
    key: str,
    line: int,
    verifier: str | None,
    check: Check | None = None,
    passed: bool | None = None,
    error_code: str | None = None,
    error_message: str | None = None,
) -> dict[str, Any]:
    """A results row with every field present, in a fixed order (so lines compare byte for byte)."""
    scored = check is not None
    row = {
        "task": task,
        "instance_id": instance_id,
        "sample": sample,
        "model": model,
        "status": "scored" if scored else "error",
        "score": float(check.score) if scored else None,
        "passed": passed if scored else None,
        "components": _clean(dict(check.components)) if scored else {},
        "evidence": _clean(dict(check.evidence)) if scored else {},
        "reason": check.reason if scored else None,
        "error": None if scored else {"code": error_code, "message": error_message or ""},
        "verifier": verifier,
        "key": key,
        "line": line,
    }
    return row


def _row_problem(row: Mapping[str, Any]) -> str | None:
    """What makes ``row`` unlike any row :func:`make_row` writes, in the fields that summaries,
    comparisons and calibration read; None when nothing does."""
    sample, score = row.get("sample"), row.get("score")
    if not isinstance(row.get("task"), str) or not isinstance(row.get("instance_id"), str):
        return "task and instance_id must be strings"
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        return f"sample must be an integer >= 0, got {sample!r}"
    if row.get("status") not in ("scored", "error"):
        return f"status must be scored or error, got {row.get('status')!r}"
    if row["status"] == "scored" and (isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0):
        return f"a scored row's score must be a number in [0, 1], got {score!r}"
    return None


def dumps_row(row: Mapping[str, Any]) -> str:
    """One row as a JSON line.  A lone surrogate in any string (a task name or id echoed from a
    line that decoded to one) becomes U+FFFD, so the line can always be written as UTF-8."""
    return replace_surrogates(json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(", ", ": ")))


class ResultsFile:
    """Append-only results file with crash repair."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._handle: Any = None

    def load(self, repair: bool = True) -> list[dict[str, Any]]:
        """Existing rows; a partial last line (from a kill mid-write) is cut off when ``repair``."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1
        if complete < len(data) and repair:
            with open(self.path, "r+b") as handle:
                handle.truncate(complete)
                handle.flush()
                os.fsync(handle.fileno())
        rows = []
        for number, raw in enumerate(data[:complete].splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ValueError(f"{self.path}:{number}: corrupt results line; move the file away to rescore") from None
            if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                raise ValueError(f"{self.path}:{number}: not a results row (no key); move the file away to rescore")
            problem = _row_problem(row)
            if problem is not None:
                raise ValueError(f"{self.path}:{number}: not a results row ({problem}); move the file away to rescore")
            rows.append(row)
        return rows

    def __enter__(self) -> "ResultsFile":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(self.path, "a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def append(self, rows: Iterable[Mapping[str, Any]], sync: bool = True) -> int:
        """Write whole lines.  After ``flush`` they survive a killed process; ``sync`` also fsyncs
        (survives a machine crash), which callers batch to keep per-row cost low."""
        text = "".join(dumps_row(row) + "\n" for row in rows)
        if text:
            self._handle.write(text)
            self._handle.flush()
        if sync:
            self.sync()
        return text.count("\n")

    def sync(self) -> None:
        if self._handle is not None:
            os.fsync(self._handle.fileno())

    def rewrite(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Atomically replace the file's content."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".jsonl", dir=self.path.parent)
        os.chmod(tmp, 0o666 & ~_UMASK)  # as an ordinary new file, not mkstemp's owner-only mode
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                for row in rows:
                    handle.write(dumps_row(row) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def _read_umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


_UMASK = _read_umask()  # read once, at import: os.umask can only be read by setting it


def latest_rows(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per generation (task, instance, sample, model): the last one written wins."""
    latest: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for row in rows:
        latest[(row.get("task"), row.get("instance_id"), row.get("sample"), row.get("model"))] = row
    return list(latest.values())
