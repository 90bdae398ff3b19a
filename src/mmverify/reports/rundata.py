"""Everything a report reads from a score run folder, loaded once and tolerant of missing pieces.

The summary and the current result rows are required; the manifest (for the response's parts and
inline instances) and the instruction set (for instructions and input media) are used when the
paths recorded in ``summary.json``'s config still resolve, and silently left out otherwise.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..data.instructions import InstructionSet
from ..data.manifest import PathPolicyError, iter_manifest_lines, manifest_base_dir, resolve_media_path
from ..pipelines.results import latest_rows

Row = Mapping[str, Any]


@dataclass(frozen=True)
class MediaRef:
    """One media part of a response (or an instruction's input): a file, or inline bytes."""

    kind: str  # "image" | "audio"
    label: str
    path: Path | None = None
    data: bytes | None = None
    problem: str | None = None  # why the media cannot be shown (path outside the data root, bad base64)


@dataclass
class RunData:
    run: Path
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    manifest_lines: dict[int, dict[str, Any]] = field(default_factory=dict)
    base_dir: Path | None = None
    data_root: Path | None = None
    instructions: InstructionSet | None = None

    @property
    def models(self) -> list[str]:
        """Model names of the rows, sorted; rows without a model appear as ``"None"`` (as in ``by_model``)."""
        return sorted({str(row.get("model")) for row in self.rows})

    def line_of(self, row: Row) -> dict[str, Any] | None:
        """The row's manifest line, when it is the generation the row scored (a folder scored with
        ``--append`` holds rows of earlier manifests whose line numbers point elsewhere)."""
        line = row.get("line")
        entry = self.manifest_lines.get(line) if isinstance(line, int) else None
        if entry is None:
            return None
        same = (entry["task"], entry["instance_id"], entry["sample"]) == (row.get("task"), row.get("instance_id"), row.get("sample"))
        return entry if same else None

    def instance_of(self, row: Row) -> dict[str, Any] | None:
        """The row's annotation: inline in the manifest line, else from the instruction set."""
        line = self.line_of(row)
        if line is not None and isinstance(line.get("instance"), dict):
            return line["instance"]
        if self.instructions is None:
            return None
        try:
            return dict(self.instructions.instance(str(row.get("instance_id"))).data)
        except Exception:  # an unknown or unreadable instance simply has nothing to show
            return None

    def response_parts(self, row: Row) -> list[dict[str, Any]]:
        line = self.line_of(row)
        parts = line.get("parts") if line is not None else None
        return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []

    def response_media(self, row: Row) -> list[MediaRef]:
        """The image and audio parts of the row's response, in order."""
        refs, counts = [], {"image": 0, "audio": 0}
        for part in self.response_parts(row):
            kind = part.get("type")
            if kind not in counts:
                continue
            counts[kind] += 1
            refs.append(self._part_ref(kind, f"{kind} {counts[kind]}", part))
        return refs

    def input_media(self, row: Row, limit: int = 4) -> list[MediaRef]:
        """Input images of the instruction (``image_list``, ``ref_image_list``) found in the instruction set."""
        instance = self.instance_of(row)
        if instance is None or self.instructions is None:
            return []
        source = str(row.get("instance_id", "")).rpartition("/")[0]
        refs: list[MediaRef] = []
        for key in ("image_list", "ref_image_list"):
            values = instance.get(key)
            for index in values if isinstance(values, list) else []:
                if isinstance(index, int) and not isinstance(index, bool) and len(refs) < limit:
                    path = self.instructions.root / "image" / f"{source}_{index}.png"
                    if path.is_file():
                        refs.append(MediaRef("image", f"input {key}[{index}]", path=path))
        return refs

    def _part_ref(self, kind: str, label: str, part: Mapping[str, Any]) -> MediaRef:
        if isinstance(part.get("data"), str):
            try:
                return MediaRef(kind, label, data=base64.b64decode(part["data"], validate=True))
            except (binascii.Error, ValueError):
                return MediaRef(kind, label, problem="inline data is not valid base64")
        path = part.get("path")
        if not isinstance(path, str) or not path or self.base_dir is None:
            return MediaRef(kind, label, problem="manifest not available")
        try:
            return MediaRef(kind, f"{label}: {path}", path=resolve_media_path(path, self.base_dir, self.data_root))
        except (PathPolicyError, OSError, ValueError) as exc:
            return MediaRef(kind, f"{label}: {path}", problem=str(exc))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON objects of a JSON Lines file; blank or unreadable lines are skipped."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                rows.append(value)
    return rows


def _existing(recorded: Any, run: Path) -> Path | None:
    """A path recorded in the config: as is when absolute; a relative one (relative to the folder
    ``score`` ran in) against the working directory, then against each folder above the run."""
    if not isinstance(recorded, str) or not recorded:
        return None
    path = Path(recorded)
    bases = [] if path.is_absolute() else [Path.cwd(), *run.resolve().parents]
    for candidate in [path] if path.is_absolute() else [base / path for base in bases]:
        if candidate.exists():
            return candidate
    return None


def _line_identity(value: Mapping[str, Any], number: int) -> dict[str, Any]:
    """task, instance id and sample of a manifest line, with the defaults the manifest parser applies."""
    raw_task = value.get("task")
    task = raw_task.strip() if isinstance(raw_task, str) else raw_task
    instance_id = value.get("instance_id")
    if instance_id is None and isinstance(value.get("instance"), dict):
        instance_id = f"{task}/line-{number}"
    return {"task": task, "instance_id": instance_id, "sample": value.get("sample", 0)}


def _manifest_lines(path: Path, wanted: Iterable[int]) -> dict[int, dict[str, Any]]:
    wanted_set, lines = set(wanted), {}
    for number, text in iter_manifest_lines(path):
        if number not in wanted_set or text is None:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            lines[number] = {"parts": value.get("parts"), "instance": value.get("instance"), **_line_identity(value, number)}
    return lines


def _current_rows(run: Path) -> list[dict[str, Any]]:
    """``results.latest.jsonl``; for older folders, the last row per generation of ``results.jsonl``."""
    latest, every = run / "results.latest.jsonl", run / "results.jsonl"
    if latest.is_file():
        return read_jsonl(latest)
    if every.is_file():
        return [dict(row) for row in latest_rows(read_jsonl(every))]
    return []


def load_run(run: Path) -> RunData:
    """Read ``run``'s summary and current rows, and whatever of its manifest and instructions exists."""
    summary_path = run / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{summary_path} not found; run `mmverify score` first")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    rows = _current_rows(run)
    config = summary.get("config") or {}
    data = RunData(run=run, summary=summary, rows=rows)
    manifest = _existing(config.get("manifest"), run)
    if manifest is not None and manifest.is_file():
        data.base_dir = manifest_base_dir(manifest)
        data.manifest_lines = _manifest_lines(manifest, (r["line"] for r in rows if isinstance(r.get("line"), int)))
    if isinstance(config.get("data_root"), str) and config["data_root"]:
        # a recorded data root keeps confining media paths even when it no longer exists
        data.data_root = _existing(config["data_root"], run) or Path(config["data_root"])
    instructions = _existing(config.get("instructions"), run)
    if instructions is not None and instructions.is_dir():
        data.instructions = InstructionSet(instructions)
    return data
