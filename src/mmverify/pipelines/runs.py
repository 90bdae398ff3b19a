"""Reading a finished score run back -- the one reader behind ``compare``, ``calibrate`` and the reports.

A run is given either as its output folder or as a results file.  For a folder the current rows
come from ``results.latest.jsonl`` (exactly one row per manifest line); a folder written before that
file existed falls back to ``results.jsonl``, keeping the last row written per generation.  A file is
read as given, with the same last-row-wins rule.

Beside the rows: ``summary.json`` (required by the reports), and whatever still resolves of the
manifest, instruction set and data root recorded in its config -- the manifest's lines give each
row its response parts and inline instance, the instruction set its instruction and input media.
What no longer resolves is left out, never an error.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..data.instructions import InstructionSet
from ..tasks.catalog import CATALOG, bare_task_id
from ..data.manifest import PathPolicyError, iter_manifest_lines, manifest_base_dir, resolve_media_path
from .outdir import LATEST_FILE, known_manifests, manifest_fingerprint
from .results import ResultsFile, latest_rows

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
Row = Mapping[str, Any]


@dataclass(frozen=True)
class MediaRef:
    """One media part of a response (or an instruction's input): a file, or inline bytes."""

    kind: str  # "image" | "audio"
    label: str
    path: Path | None = None
    data: bytes | None = None
    problem: str | None = None  # why the media cannot be shown (path outside the data root, bad base64)


@dataclass(frozen=True)
class LoadedRun:
    """The current rows of one run, its summary, and what its config names that still exists."""

    path: Path  # what the caller named (folder or file)
    source: Path  # the results file actually read
    rows: list[Mapping[str, Any]]
    duplicates: int  # rows dropped because a later row had the same (task, instance, sample, model)
    manifest: Path | None  # the scored manifest, when the run records one that still exists
    summary: dict[str, Any] = field(default_factory=dict)  # {} when the run has no summary.json
    instructions_dir: Path | None = None
    data_root: Path | None = None  # media are shown from under it (a recorded one, even when gone; else the manifest's folder)

    @property
    def run(self) -> Path:
        """The run folder (for a results file, the folder holding it)."""
        return self.path if self.path.is_dir() else self.source.parent

    @property
    def models(self) -> list[str]:
        """Model names of the rows, sorted; rows without a model appear as ``"None"`` (as in ``by_model``)."""
        return sorted({str(row.get("model")) for row in self.rows})

    @cached_property
    def base_dir(self) -> Path | None:
        """The folder the manifest's relative media paths start from."""
        return manifest_base_dir(self.manifest) if self.manifest is not None else None

    @cached_property
    def instructions(self) -> InstructionSet | None:
        return InstructionSet(self.instructions_dir) if self.instructions_dir is not None else None

    @cached_property
    def manifest_lines(self) -> dict[int, dict[str, Any]]:
        """The manifest lines the rows were scored from (parts, inline instance, identity), by number."""
        if self.manifest is None:
            return {}
        return _manifest_lines(self.manifest, (r["line"] for r in self.rows if isinstance(r.get("line"), int)))

    def line_of(self, row: Row) -> dict[str, Any] | None:
        """The row's manifest line, when it is the generation the row scored (a folder scored with
        ``--append`` holds rows of earlier manifests whose line numbers point elsewhere)."""
        line = row.get("line")
        entry = self.manifest_lines.get(line) if isinstance(line, int) else None
        if entry is None:
            return None
        same = (entry["instance_id"], entry["sample"]) == (row.get("instance_id"), row.get("sample"))
        return entry if same and _names_task(entry["task"], row.get("task")) else None

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
        # media are shown from the data root the run recorded, else from the manifest's folder: a
        # report someone shares must not carry a file their manifest named elsewhere (~/private.png)
        root = self.data_root if self.data_root is not None else self.base_dir
        try:
            resolved = resolve_media_path(path, self.base_dir, root)
        except PathPolicyError:
            where = "data root" if self.data_root is not None else "manifest's folder"
            return MediaRef(kind, f"{label}: {path}", problem=f"outside the {where}; `mmverify report --media-root DIR` shows media under DIR")
        except (OSError, ValueError) as exc:
            return MediaRef(kind, f"{label}: {path}", problem=str(exc))
        if resolved.exists() and not resolved.is_file():  # /dev/zero or a FIFO would be read for ever
            return MediaRef(kind, f"{label}: {path}", problem="not a regular file")
        return MediaRef(kind, f"{label}: {path}", path=resolved)


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


def _candidates(recorded: Any, run: Path) -> list[Path]:
    """Where a path recorded in a run's config may be: as is when absolute; a relative one
    (relative to the folder ``score`` ran in) against the working directory, then against each
    folder above the run."""
    if not isinstance(recorded, str) or not recorded:
        return []
    path = Path(recorded)
    return [path] if path.is_absolute() else [base / path for base in (Path.cwd(), *run.resolve().parents)]


def existing_path(recorded: Any, run: Path) -> Path | None:
    """The first of a recorded path's candidates that exists."""
    return next((candidate for candidate in _candidates(recorded, run) if candidate.exists()), None)


def read_summary(run_folder: Path, required: bool = False) -> dict[str, Any]:
    """``summary.json`` of ``run_folder``; ``{}`` when it is missing or unreadable, unless ``required``
    (then ``FileNotFoundError`` / ``ValueError``)."""
    path = run_folder / SUMMARY_FILE
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise FileNotFoundError(f"{path} not found; run `mmverify score` first") from None
        return {}
    except (OSError, ValueError) as exc:
        if required:
            raise ValueError(f"{path} is unreadable: {exc}") from None
        return {}
    if not isinstance(summary, dict):
        if required:
            raise ValueError(f"{path} does not hold a JSON object")
        return {}
    return summary


def _config(summary: Mapping[str, Any]) -> dict[str, Any]:
    config = summary.get("config")
    return config if isinstance(config, dict) else {}


def recorded_manifest(run_folder: Path, summary: Mapping[str, Any] | None = None) -> Path | None:
    """The manifest named in ``summary.json``'s config, if that file can still be found: where the
    run recorded the manifests scored into it (``run.json``), one with the same bytes, so that a
    relative name never picks another run's manifest of that name."""
    recorded = _config(read_summary(run_folder) if summary is None else summary).get("manifest")
    known = set(known_manifests(run_folder))
    for candidate in _candidates(recorded, run_folder):
        if candidate.is_file() and (not known or manifest_fingerprint(candidate) in known):
            return candidate
    return None


def _names_task(named: Any, task: Any) -> bool:
    """Whether a manifest line's task (an id, ``task:``-prefixed or not, or an instruction file's
    name) is how the line came to be scored by ``task``."""
    if not isinstance(named, str) or not isinstance(task, str):
        return named == task
    named, task = bare_task_id(named), bare_task_id(task)  # an error row keeps the task as the line wrote it
    return named == task or (task in CATALOG and named in CATALOG[task].source_files)


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


def load_run(path: str | Path, *, require_summary: bool = False, per_line: bool = False) -> LoadedRun:
    """Read the current rows of a run folder or results file (``ValueError`` when unusable).

    ``require_summary``: the run must be a folder with ``summary.json`` (``FileNotFoundError``
    otherwise); such a finished run may hold no rows at all.  ``per_line``: keep
    ``results.latest.jsonl`` as written, one row per manifest line even where two lines name the
    same generation (what a report lists), instead of one row per generation (what comparisons pair).
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    summary = read_summary(path if require_summary else folder, required=require_summary)
    if require_summary and not any((path / name).is_file() for name in (LATEST_FILE, RESULTS_FILE)):
        source, rows = path / LATEST_FILE, []
    else:
        source = results_path(path)
        rows = ResultsFile(source).load(repair=False)
    if not rows and not require_summary:
        raise ValueError(f"{source} holds no results rows")
    current = list(rows) if per_line and source.name == LATEST_FILE else latest_rows(rows)
    config = _config(summary)
    instructions = existing_path(config.get("instructions"), folder)
    data_root = config.get("data_root") if isinstance(config.get("data_root"), str) else None
    return LoadedRun(
        path=path,
        source=source,
        rows=current,
        duplicates=len(rows) - len(current),
        manifest=recorded_manifest(folder, summary),
        summary=summary,
        instructions_dir=instructions if instructions is not None and instructions.is_dir() else None,
        data_root=(existing_path(data_root, folder) or Path(data_root)) if data_root else None,
    )
