"""The output folder of a score run: one writer at a time, which manifest it belongs to, current rows.

* ``OutputLock``: an exclusive ``flock`` on ``<out>/.lock`` holding the writer's pid.  The kernel
  drops it when the process dies, so a killed run never leaves a stale lock behind.
* ``run.json`` records the fingerprints of the manifests scored into the folder.  Scoring a different
  manifest into it needs ``append`` (keep the old rows beside the new ones) or ``overwrite`` (start
  afresh); otherwise the run is refused before anything is written.
* ``current_rows``: exactly one row per manifest line of this run, selected by key, so that
  summaries never mix in rows that an earlier configuration wrote.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

RUN_FILE = "run.json"
LOCK_FILE = ".lock"
LATEST_FILE = "results.latest.jsonl"
OUTPUT_FILES = ("results.jsonl", LATEST_FILE, "summary.json", RUN_FILE)


class OutputFolderError(ValueError):
    """The output folder cannot be used as asked (busy, a file, another manifest's results)."""


def check_output_folder(out: Path) -> None:
    """Refuse an ``--out`` that is a file, or whose results file is not a file, with one clear line."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"--out {out} is a file, not a folder")
    for name in OUTPUT_FILES:
        path = out / name
        if path.exists() and not path.is_file():
            raise OutputFolderError(f"{path} is not a regular file; move it away or choose another --out")


class OutputLock:
    """Exclusive use of an output folder by this process."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> "OutputLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                who = f"pid {holder}" if holder else "another process"
                raise OutputFolderError(
                    f"{self.path.parent} is being written by {who}; wait for it to finish or choose another --out"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def manifest_fingerprint(path: Path) -> str:
    """sha256 of the manifest's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def claim_for_manifest(out: Path, fingerprint: str | None, *, append: bool = False, overwrite: bool = False) -> None:
    """Record that ``out`` holds results of the manifest ``fingerprint``; refuse another manifest's
    folder unless ``append`` or ``overwrite``.  ``fingerprint`` None is a piped manifest, which
    cannot be read twice to be told apart: it may join a folder holding rows only with ``append``
    (which also resumes it).  Call with the folder locked."""
    if append and overwrite:
        raise OutputFolderError("choose --append or --overwrite, not both")
    run_file = out / RUN_FILE
    known = [] if overwrite else _known_manifests(run_file)  # --overwrite starts afresh, whatever the record holds
    has_rows = (out / "results.jsonl").is_file() and (out / "results.jsonl").stat().st_size > 0
    if overwrite:
        for name in OUTPUT_FILES:
            (out / name).unlink(missing_ok=True)
    elif has_rows and not append and fingerprint is None:
        raise OutputFolderError(
            f"{out} holds results, and a piped manifest cannot be told apart from the one they came from; "
            "use --append to add (or resume) its rows there, --overwrite to start afresh, or choose another --out"
        )
    elif has_rows and known and fingerprint not in known and not append:
        # a folder written before manifests were recorded (no run.json) is adopted as it is
        raise OutputFolderError(
            f"{out} holds results of another manifest; use --append to add this manifest's rows "
            "beside them, --overwrite to start afresh, or choose another --out"
        )
    if fingerprint is not None and fingerprint not in known:
        known.append(fingerprint)
    _write_json(run_file, {"schema": 1, "manifests": known})


def known_manifests(out: Path) -> list[str]:
    """Fingerprints of the manifests scored into ``out`` (none recorded: an empty list)."""
    try:
        return _known_manifests(out / RUN_FILE)
    except OutputFolderError:
        return []


def _known_manifests(run_file: Path) -> list[str]:
    if not run_file.is_file():
        return []
    try:
        data = json.loads(run_file.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise OutputFolderError(f"{run_file} is unreadable ({exc}); move it away or use --overwrite") from None
    manifests = data.get("manifests", []) if isinstance(data, dict) else None
    if not isinstance(manifests, list) or not all(isinstance(m, str) for m in manifests):
        raise OutputFolderError(
            f"{run_file} is unreadable (not an object whose \"manifests\" is a list of fingerprints); move it away or use --overwrite"
        )
    return manifests


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def current_rows(rows: Iterable[Mapping[str, Any]], line_keys: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    """One row per manifest line, in manifest order: the newest row carrying that line's key.

    A line whose generation repeats an earlier line (same key) gets a copy of that row with its own
    line number, so every line is accounted for.  Lines without a row yet (an interrupted run) are
    left out."""
    newest: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        newest[str(row.get("key"))] = row
    selected = []
    for line, key in line_keys:
        row = newest.get(key)
        if row is not None:
            selected.append({**row, "line": line} if row.get("line") != line else dict(row))
    return selected
