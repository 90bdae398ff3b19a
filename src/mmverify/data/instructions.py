"""Instruction sets in the official layout: ``<dir>/<task>.jsonl`` plus ``image/`` and ``audio/``.

An instance is addressed as ``<file stem>/<0-based line index>``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Instance
from .jsonsafe import first_problem, loads


class InstructionSetError(ValueError):
    """A task file that cannot be read (bad JSON, not an object per line)."""


_SOURCE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # a file stem: no separators, no "..", no hidden files
_INDEX = re.compile(r"0|[1-9][0-9]*")  # canonical ASCII line index: one id per instruction


def _shortened(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters for messages, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def read_jsonl_objects(path: Path) -> list[dict[str, Any]]:
    """Read a JSON Lines file of objects, one per line.  Rows are named by their line (an
    instance id is ``<file>/<0-based line>``; outputs are matched to instructions by position), so
    a blank line before the last object is refused rather than skipped: skipping it would give
    every later row its neighbour's name.  Blank lines at the end are ignored."""
    rows: list[dict[str, Any]] = []
    first_blank: int | None = None
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise InstructionSetError(f"{path}:{number}: not valid UTF-8") from None
            if not line.strip():
                first_blank = number if first_blank is None else first_blank
                continue
            if first_blank is not None:
                raise InstructionSetError(
                    f"{path}:{first_blank}: a blank line before the last row (rows are numbered by their line: remove it)"
                )
            try:
                row = loads(line)  # over-long integers become markers; InstructionSet refuses their rows
            except (json.JSONDecodeError, RecursionError) as exc:
                detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise InstructionSetError(f"{path}:{number}: invalid JSON ({detail})") from None
            if not isinstance(row, dict):
                raise InstructionSetError(f"{path}:{number}: expected a JSON object")
            rows.append(row)
    return rows


class InstructionSet:
    """Lazily loaded task files of one instruction folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"instruction folder not found: {self.root}")
        self._rows: dict[str, list[dict[str, Any]]] = {}

    def sources(self) -> list[str]:
        """Stems of the task files present."""
        return sorted(p.stem for p in self.root.glob("*.jsonl"))

    def rows(self, source: str) -> list[dict[str, Any]]:
        if source not in self._rows:
            path = self.root / f"{source}.jsonl"
            if not path.is_file():
                raise FileNotFoundError(f"no instruction file {path.name} in {self.root}")
            self._rows[source] = read_jsonl_objects(path)
        return self._rows[source]

    def instance(self, instance_id: str) -> Instance:
        """Resolve ``<source>/<index>``; unknown ids raise ``ScoringError(unknown_instance)``."""
        source, _, index_text = instance_id.rpartition("/")
        if not _SOURCE.fullmatch(source) or not _INDEX.fullmatch(index_text):
            raise ScoringError(ErrorCode.UNKNOWN_INSTANCE, f"instance id {_shortened(repr(instance_id))} is not '<task>/<index>'")
        try:
            rows = self.rows(source)
        except FileNotFoundError as exc:
            raise ScoringError(ErrorCode.UNKNOWN_INSTANCE, str(exc)) from None
        except InstructionSetError as exc:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, str(exc)) from None
        # compare lengths first: an index of thousands of digits is out of range, and too long for int()
        if len(index_text) > len(str(len(rows))) or int(index_text) >= len(rows):
            raise ScoringError(
                ErrorCode.UNKNOWN_INSTANCE, f"{_shortened(instance_id)}: {source}.jsonl has only {len(rows)} instructions"
            )
        row = rows[int(index_text)]
        problem = first_problem(row)
        if problem is not None:
            message = f"{instance_id}: unusable value in the instruction row at {problem}"
            raise ScoringError(ErrorCode.INVALID_INSTANCE, message)
        return Instance(id=instance_id, data=row, source=source, media_dir=self.root)
