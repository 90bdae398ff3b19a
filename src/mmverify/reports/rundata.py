"""What a report reads from a score run folder: the one run reader
(:func:`mmverify.pipelines.runs.load_run`) in the form reports need -- ``summary.json`` required,
one row per manifest line, and whatever of the manifest and instructions still resolves."""

from __future__ import annotations

from pathlib import Path

from ..pipelines.runs import LoadedRun, MediaRef, Row, load_run as _load_run

RunData = LoadedRun  # the name the report modules use
__all__ = ["MediaRef", "Row", "RunData", "load_run"]


def load_run(run: Path) -> RunData:
    """Read ``run`` for a report (``FileNotFoundError`` without ``summary.json``)."""
    return _load_run(run, require_summary=True, per_line=True)
