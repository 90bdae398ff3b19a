"""Generation manifests: one JSON object per line (see README, "Manifest format").

Parsing is strict and total: every problem with a line raises :class:`ManifestError`, which the
pipeline turns into one error row while the run goes on: ``malformed_line`` for the line itself,
``invalid_instance`` when only the inline ``instance`` holds an unusable value.

Values that JSON decoding accepts but the pipeline cannot carry (see :mod:`.jsonsafe`: lone
surrogate escapes, ``NaN``/``Infinity``/``1e999``, integers beyond Python's int-string limit) are
refused in every field the pipeline reads; fields it ignores are not inspected.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import ErrorCode, ScoringError
from ..core.types import PART_TYPES, Generation, Part
from .jsonsafe import first_problem, loads

MAX_LINE_BYTES = 64 * 1024 * 1024  # inline base64 media can make lines long, but not unbounded


# the fields a generation is built from, besides the inline instance
_READ_FIELDS = ("task", "instance_id", "sample", "model", "parts")


class ManifestError(ValueError):
    """A line that cannot be scored.  ``code`` is the error row's code; ``generation`` is set when
    the rest of the line was valid, so the row can name the task, instance and sample; else
    ``names`` holds the task and instance id when those two were valid."""

    def __init__(
        self, message: str, code: str = ErrorCode.MALFORMED_LINE, generation: Generation | None = None,
        names: tuple[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.code = code
        self.generation = generation
        self.names = names


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise ManifestError(message)


def parse_part(raw: Any, index: int) -> Part:
    _expect(isinstance(raw, dict), f"parts[{index}] must be an object")
    kind = raw.get("type")
    _expect(kind in PART_TYPES, f"parts[{index}].type must be one of {', '.join(PART_TYPES)}")
    if kind == "text":
        _expect(isinstance(raw.get("text"), str), f"parts[{index}].text must be a string")
        return Part(type="text", text=raw["text"])
    path, data = raw.get("path"), raw.get("data")
    _expect((path is None) != (data is None), f"parts[{index}] needs exactly one of 'path' or 'data'")
    if path is not None:
        _expect(isinstance(path, str) and path != "", f"parts[{index}].path must be a non-empty string")
        _expect("\x00" not in path, f"parts[{index}].path holds a NUL character, which no file name can")
        return Part(type=kind, path=path)
    _expect(isinstance(data, str), f"parts[{index}].data must be a base64 string")
    try:
        payload = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ManifestError(f"parts[{index}].data is not valid base64") from None
    return Part(type=kind, data=payload)


def _refuse_unusable_values(raw: dict[str, Any]) -> None:
    problem = first_problem({name: raw[name] for name in _READ_FIELDS if name in raw})
    if problem is not None:
        raise ManifestError(f"unusable value at {problem}")


def _instance_problem(generation: Generation) -> str | None:
    return first_problem(generation.instance, "instance") if generation.instance is not None else None


def _usable_instance(generation: Generation) -> dict[str, Any] | None:
    """The inline instance, or None where it holds a value JSON cannot carry."""
    return None if _instance_problem(generation) is not None else generation.instance


def _check_instance_values(generation: Generation) -> Generation:
    problem = _instance_problem(generation)
    if problem is not None:
        raise ManifestError(f"unusable value at {problem}", ErrorCode.INVALID_INSTANCE, replace(generation, instance=None))
    return generation


def parse_generation(raw: Any, line: int = 0) -> Generation:
    """Validate one decoded manifest object."""
    _expect(isinstance(raw, dict), "a manifest line must be a JSON object")
    _refuse_unusable_values(raw)
    task = raw.get("task")
    _expect(isinstance(task, str) and task.strip() != "", "'task' must be a non-empty string")
    instance = raw.get("instance")
    _expect(instance is None or isinstance(instance, dict), "'instance' must be an object when given")
    instance_id = raw.get("instance_id")
    task = task.strip()
    if instance_id is None:
        _expect(instance is not None, "'instance_id' is required unless an inline 'instance' is given")
        instance_id = f"{task}/line-{line}"
    _expect(isinstance(instance_id, str) and instance_id != "", "'instance_id' must be a non-empty string")
    sample, model, parts = raw.get("sample", 0), raw.get("model"), raw.get("parts")
    try:
        _expect(isinstance(sample, int) and not isinstance(sample, bool) and sample >= 0, "'sample' must be an integer >= 0")
        _expect(model is None or isinstance(model, str), "'model' must be a string when given")
        _expect(isinstance(parts, list), "'parts' must be a list")
    except ManifestError as exc:  # its row names the task and instance, which are valid
        raise ManifestError(str(exc), exc.code, names=(task, instance_id)) from None
    generation = Generation(task=task, instance_id=instance_id, parts=(), sample=sample, model=model, instance=instance, line=line)
    try:
        parsed = tuple(parse_part(p, i) for i, p in enumerate(parts))
    except ManifestError as exc:  # the rest of the line is valid: its row names the task and sample
        raise ManifestError(str(exc), exc.code, replace(generation, instance=_usable_instance(generation))) from None
    return _check_instance_values(replace(generation, parts=parsed))


def parse_line(text: str, line: int = 0) -> Generation:
    """Decode and validate one manifest line."""
    try:
        raw = loads(text.rstrip("\r\n"))  # a line cut short is reported where it ends, not past its newline
    except json.JSONDecodeError as exc:
        raise ManifestError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ManifestError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # any other refusal of the decoder
        raise ManifestError(f"invalid JSON: {exc}") from None
    return parse_generation(raw, line)


def iter_manifest_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` for every non-blank line; ``None`` for a line over MAX_LINE_BYTES.

    Lines are read in bounded chunks, so an oversized line never sits in memory whole.  Undecodable
    bytes are replaced rather than fatal (the line then fails JSON or path checks on its own); a
    UTF-8 byte-order mark at the start of the file is dropped.
    """
    with open(path, "rb") as handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # discard the rest of the line
                    raw = handle.readline(1 << 20)
                yield number, None
                continue
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            text = raw.decode("utf-8", errors="replace")
            if text.strip():
                yield number, text


def is_stream(path: Path) -> bool:
    """True when ``path`` (after links) is a pipe, FIFO, socket or character device (such as
    ``/dev/stdin`` fed by a pipe): something that can be read only once."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def manifest_base_dir(path: Path) -> Path:
    """The folder relative media paths of a manifest resolve against: the manifest's own folder,
    or the working directory for a stream opened through ``/dev`` or ``/proc`` (``/dev/stdin``)."""
    resolved = Path(os.path.realpath(path))
    if is_stream(path) and Path(os.path.abspath(path)).parts[1:2] in (("dev",), ("proc",)):
        return Path.cwd()
    return resolved.parent


def path_exists(path: Path) -> bool:
    """``path.exists()`` that answers False instead of raising."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def is_regular_file(path: Path) -> bool:
    """``path.is_file()`` that answers False instead of raising (e.g. for a name over the
    file system's length limit)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


class PathPolicyError(ValueError):
    pass


@dataclass(frozen=True)
class MediaPaths:
    """The path policy of a run, for the media paths a line names and the instance media an
    annotation numbers alike: relative paths resolve against ``base_dir``; with a ``data_root``,
    one that resolves outside it (symlinks included) is refused; with ``allowed`` False (a
    server without a data root), every path is."""

    base_dir: Path
    data_root: Path | None = None
    allowed: bool = True

    def resolve(self, path: str) -> Path:
        """``path`` resolved, or ScoringError(path_outside_root) when the policy refuses it."""
        if not self.allowed:
            raise ScoringError(ErrorCode.PATH_OUTSIDE_ROOT, f"{path!r}: media paths are not accepted here (no data root is set)")
        try:
            return resolve_media_path(path, self.base_dir, self.data_root)
        except PathPolicyError as exc:
            raise ScoringError(ErrorCode.PATH_OUTSIDE_ROOT, str(exc)) from None


def resolve_media_path(path: str, base_dir: Path, data_root: Path | None) -> Path:
    """Resolve a manifest path; refuse paths (or symlinks) escaping ``data_root`` when one is set."""
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = base_dir / candidate
    if data_root is None:
        return candidate
    root = Path(os.path.realpath(data_root))
    real = Path(os.path.realpath(candidate))
    if real != root and root not in real.parents:
        raise PathPolicyError(f"{path!r} resolves outside the data root {root}")
    return real
