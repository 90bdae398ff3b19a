"""Reading a finished score run back: its current rows and the manifest it scored.

A run is given either as its output folder or as a results file.  For a folder the current rows
come from ``results.latest.jsonl`` (exactly one row per manifest line); a folder written before that
file existed falls back to ``results.jsonl``, keeping the last row written per generation.  A file is
read as given, with the same last-row-wins rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .outdir import LATEST_FILE
from .results import ResultsFile, latest_rows

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class LoadedRun:
    """The current rows of one run."""

    path: Path  # what the caller named (folder or file)
    source: Path  # the results file actually read
    rows: list[Mapping[str, Any]]
    duplicates: int  # rows dropped because a later row had the same (task, instance, sample, model)
    manifest: Path | None  # the scored manifest, when the run records one that still exists


def results_path(path: Path) -> Path:
    """The results file to read for ``path`` (a run folder or a results file)."""
    if path.is_dir():
        for name in (LATEST_FILE, RESULTS_FILE):
            if (path / name).is_file():
                return path / name
        raise ValueError(f"{path} holds neither {LATEST_FILE} nor {RESULTS_FILE}; is it a `mmverify score --out` folder?")
    if path.is_file():
        return path
    raise ValueError(f"{path} does not exist")


def recorded_manifest(run_folder: Path) -> Path | None:
    """The manifest named in ``summary.json``'s config, if that file can still be found."""
    summary = run_folder / SUMMARY_FILE
    try:
        config = json.loads(summary.read_text(encoding="utf-8")).get("config") or {}
    except (OSError, ValueError, AttributeError):
        return None
    name = config.get("manifest") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name:
        return None
    candidate = Path(name)  # as given to `score`: absolute, or relative to the working directory
    return candidate if candidate.is_file() else None


def load_run(path: str | Path) -> LoadedRun:
    """Read the current rows of a run folder or results file (``ValueError`` when unusable)."""
    path = Path(path)
    source = results_path(path)
    rows = ResultsFile(source).load(repair=False)
    if not rows:
        raise ValueError(f"{source} holds no results rows")
    current = latest_rows(rows)
    folder = path if path.is_dir() else source.parent
    return LoadedRun(path, source, current, len(rows) - len(current), recorded_manifest(folder))
