"""What a report reads from a score run folder: the one run reader
(:func:`mmverify.pipelines.runs.load_run`) in the form reports need -- ``summary.json`` required,
one row per manifest line, and whatever of the manifest and instructions still resolves."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from ..pipelines.runs import LoadedRun, MediaRef, Row, load_run as _load_run

RunData = LoadedRun  # the name the report modules use
__all__ = ["MediaRef", "Row", "RunData", "load_run"]


def load_run(run: Path) -> RunData:
    """Read ``run`` for a report (``FileNotFoundError`` without ``summary.json``).  Rows whose
    ``evidence``, ``components`` or ``error`` are not objects (a results file edited or written by
    something else) get empty ones, so the report lists them instead of failing."""
    data = _load_run(run, require_summary=True, per_line=True)
    return dataclasses.replace(data, rows=[_shaped(row) for row in data.rows])


def _shaped(row: Row) -> Row:
    fixes: dict[str, Any] = {key: {} for key in ("evidence", "components") if row.get(key) is not None and not isinstance(row[key], Mapping)}
    error = row.get("error")
    if error is not None and not isinstance(error, Mapping):
        fixes["error"] = {"code": "unreadable_error", "message": str(error)[:200]}
    return {**row, **fixes} if fixes else row
