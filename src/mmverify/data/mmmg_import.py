"""Convert the official MMMG output layout into a generation manifest.

Layout: ``<dir>/<task>.jsonl`` with one row per generation (``response`` text, ``image_list`` /
``audio_list`` of integers), media in ``<dir>/image/<task>_<n>.png`` and ``<dir>/audio/<task>_<n>.wav``.
In ``response``, ``<image_start><image_k><image_end>`` marks the k-th (0-based) entry of the row's
``image_list`` (likewise for audio).  Samples of one instruction are consecutive rows, so row ``r``
is instruction ``r // samples``, sample ``r % samples``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..tasks.catalog import tasks_for_source
from .instructions import InstructionSet, read_jsonl_objects

PLACEHOLDER = re.compile(r"<(image|audio)_start><(image|audio)_(\d+)><(image|audio)_end>")
_SUFFIX = {"image": "png", "audio": "wav"}


class MMMGLayoutError(ValueError):
    """The output folder does not match the instruction set."""


@dataclass
class ImportReport:
    lines: int = 0
    files: int = 0
    skipped_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def response_parts(response: str, row: dict[str, Any], source: str, media_dir: Path) -> list[dict[str, Any]]:
    """Split a response on media placeholders into manifest parts (text kept verbatim)."""
    parts: list[dict[str, Any]] = []
    position = 0
    for match in PLACEHOLDER.finditer(response):
        kinds = {match.group(1), match.group(2), match.group(4)}
        if len(kinds) != 1:
            raise MMMGLayoutError(f"mixed placeholder {match.group(0)!r}")
        kind = match.group(1)
        if match.start() > position:
            parts.append({"type": "text", "text": response[position : match.start()]})
        k = int(match.group(3))
        numbers = row.get(f"{kind}_list")
        if isinstance(numbers, list):
            if k >= len(numbers):
                raise MMMGLayoutError(f"placeholder {match.group(0)} but {kind}_list has {len(numbers)} entries")
            number = numbers[k]
        else:
            number = k
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise MMMGLayoutError(f"{kind}_list entries must be non-negative integers, got {number!r}")
        path = media_dir / kind / f"{source}_{number}.{_SUFFIX[kind]}"
        parts.append({"type": kind, "path": str(path)})
        position = match.end()
    if position < len(response):
        parts.append({"type": "text", "text": response[position:]})
    return parts


class MMMGImporter:
    def __init__(
        self,
        output_dir: str | Path,
        instructions: InstructionSet,
        *,
        samples: int | None = None,
        model: str | None = None,
        relative_to: Path | None = None,
    ) -> None:
        self.output_dir = Path(output_dir)
        if not self.output_dir.is_dir():
            raise FileNotFoundError(f"output folder not found: {self.output_dir}")
        if samples is not None and samples < 1:
            raise ValueError("samples must be >= 1")
        self.instructions = instructions
        self.samples = samples
        self.model = model if model is not None else self.output_dir.resolve().name
        self.relative_to = relative_to
        self.report = ImportReport()

    def _path(self, path: str) -> str:
        if self.relative_to is None:
            return str(Path(path).resolve())
        return os.path.relpath(Path(path).resolve(), self.relative_to.resolve())

    def _samples_for(self, source: str, n_rows: int, n_instructions: int) -> int:
        if self.samples is not None:
            expected = n_instructions * self.samples
            if n_rows != expected:
                raise MMMGLayoutError(f"{source}.jsonl has {n_rows} rows, expected {n_instructions} x {self.samples}")
            return self.samples
        if n_instructions == 0 or n_rows % n_instructions:
            raise MMMGLayoutError(
                f"{source}.jsonl has {n_rows} rows for {n_instructions} instructions; pass --samples"
            )
        return n_rows // n_instructions

    def lines(self) -> Iterator[dict[str, Any]]:
        for path in sorted(self.output_dir.glob("*.jsonl")):
            source = path.stem
            try:
                instruction_rows = self.instructions.rows(source)
            except FileNotFoundError:
                self.report.skipped_files.append(path.name)
                continue
            rows = read_jsonl_objects(path)
            per_instruction = self._samples_for(source, len(rows), len(instruction_rows))
            self.report.files += 1
            for r, row in enumerate(rows):
                index, sample = divmod(r, per_instruction)
                tasks = tasks_for_source(source, instruction_rows[index])
                if not tasks:
                    self.report.warnings.append(f"{source}/{index}: belongs to no task")
                    continue
                response = row.get("response")
                if not isinstance(response, str):
                    self.report.warnings.append(f"{path.name} row {r}: no 'response' text; imported as empty")
                    response = ""
                parts = response_parts(response, row, source, self.output_dir)
                for part in parts:
                    if "path" in part:
                        part["path"] = self._path(part["path"])
                for info in tasks:
                    self.report.lines += 1
                    yield {
                        "task": info.id,
                        "instance_id": f"{source}/{index}",
                        "sample": sample,
                        "model": self.model,
                        "parts": [dict(part) for part in parts],
                    }
