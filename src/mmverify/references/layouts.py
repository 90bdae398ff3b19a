"""Reference sets on disk: which files of a set are its reference clips, of which class, and the
fixed windows of a file that windowed layouts index instead of the whole file.

Layouts:

- ``esc50``: the ESC-50 release (``meta/esc50.csv``, categories spelled ``chirping_birds``) or
  MMMG's own copy (``dataset.csv`` beside ``audio/``, categories spelled ``chirping birds``).
- ``openmic``: one folder per instrument, of which the published pool is used: files ``0`` to
  ``99`` of MMMG's numbered folders (``<instrument>/<k>.mp3``; the published code loads exactly
  these 100 names), else the first 100 files by name.  The OpenMIC-2018 release itself
  (``openmic-2018-aggregated-labels.csv`` and ``audio/``) is read with the rule MMMG numbered its
  folders by: clips whose only fully agreed (relevance 1) label is the instrument, in the order
  of the labels file, the first 100 of each instrument.
- ``gtzan``: one folder per genre, every file.  ``gtzan-thirds`` indexes fixed windows of every
  file instead of whole files: GTZAN's 30 s clips cut into their first 10 s, 10-20 s and last
  10 s, three rows per file.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..core.registry import UnknownIdError

OPENMIC_POOL = 100  # references per instrument: the published code loads <instrument>/0..99.mp3
OPENMIC_LABELS = "openmic-2018-aggregated-labels.csv"
LAYOUTS = ("esc50", "openmic", "gtzan", "gtzan-thirds")
AUDIO_SUFFIXES = {
    "openmic": (".mp3", ".wav", ".ogg", ".flac"),
    "gtzan": (".wav", ".au"),
    "gtzan-thirds": (".wav", ".au"),
}
Window = tuple[float, Optional[float]]  # (start, end) in seconds; a negative start counts from the end
WINDOWS: dict[str, tuple[Window, ...]] = {
    "gtzan-thirds": ((0.0, 10.0), (10.0, 20.0), (-10.0, None)),
}


@dataclass(frozen=True)
class ReferenceFile:
    path: Path
    name: str  # path relative to the set's root, with forward slashes (+ "#window" for windowed layouts)
    label: str
    window: Window | None = None


def _window_name(window: Window) -> str:
    start, end = window
    return f"last{-start:g}s" if end is None else f"{start:g}s-{end:g}s"


def cut_window(clip: np.ndarray, sample_rate: int, window: Window, name: str = "clip") -> np.ndarray:
    """The samples of ``window``; a clip too short to hold the window is refused, not padded."""
    start_s, end_s = window
    n = len(clip)
    start = round(start_s * sample_rate) if start_s >= 0 else n + round(start_s * sample_rate)
    end = n if end_s is None else round(end_s * sample_rate)
    if not 0 <= start < end <= n:
        raise ValueError(f"{name} lasts {n / sample_rate:.2f} s, too short for the window {_window_name(window)}")
    return clip[start:end]


def _class_folders(root: Path, suffixes: tuple[str, ...]) -> list[ReferenceFile]:
    files = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix.lower() in suffixes and not path.name.startswith("."):
                files.append(ReferenceFile(path, path.relative_to(root).as_posix(), folder.name))
    return files


def _esc50_metadata(root: Path) -> Path:
    """The release's ``meta/esc50.csv``, else MMMG's ``dataset.csv`` (same columns)."""
    for meta in (root / "meta" / "esc50.csv", root / "dataset.csv"):
        if meta.is_file():
            return meta
    raise FileNotFoundError(f"ESC-50 metadata not found: {root / 'meta' / 'esc50.csv'} (or MMMG's {root / 'dataset.csv'})")


def _esc50(root: Path) -> list[ReferenceFile]:
    meta = _esc50_metadata(root)
    files, missing = [], []
    with open(meta, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        absent = {"filename", "category"} - set(reader.fieldnames or ())
        if absent:
            raise ValueError(f"{meta} lacks the column(s) {', '.join(sorted(absent))}")
        for row in reader:
            filename, category = (row.get("filename") or "").strip(), (row.get("category") or "").strip()
            if not filename or not category:
                raise ValueError(f"{meta} line {reader.line_num} lacks a filename or category")
            path = root / "audio" / filename
            if not path.is_file():
                missing.append(filename)
                continue
            files.append(ReferenceFile(path, f"audio/{filename}", category))
    if missing:
        raise FileNotFoundError(f"{len(missing)} file(s) listed in {meta} are missing under {root / 'audio'}, e.g. {missing[0]}")
    return files


def _numbered(path: Path) -> int | None:
    """``k`` for a file named ``<k>.<suffix>`` with ``k`` written as Python writes ints; else None."""
    stem = path.stem
    return int(stem) if stem.isascii() and stem.isdigit() and str(int(stem)) == stem else None


def published_pool(files: Sequence[ReferenceFile], size: int = OPENMIC_POOL) -> list[ReferenceFile]:
    """The files of one class folder that the published code loads: ``<class>/0`` .. ``<size - 1>``
    when the folder numbers its files (MMMG's layout), else the first ``size`` by name."""
    numbered: dict[int, ReferenceFile] = {}
    for ref in files:
        k = _numbered(ref.path)
        if k is None or len(Path(ref.name).parts) != 2:  # only files directly in the class folder
            continue
        if k in numbered:
            raise ValueError(f"two files are number {k} of {ref.label!r}: {numbered[k].name} and {ref.name}")
        numbered[k] = ref
    if numbered:
        return [numbered[k] for k in range(size) if k in numbered]
    return sorted(files, key=lambda f: f.name)[:size]


def _openmic_folders(root: Path) -> list[ReferenceFile]:
    by_class: dict[str, list[ReferenceFile]] = {}
    for ref in _class_folders(root, AUDIO_SUFFIXES["openmic"]):
        by_class.setdefault(ref.label, []).append(ref)
    return [ref for refs in by_class.values() for ref in published_pool(refs)]


def openmic_release_pool(rows: Sequence[dict[str, str]], size: int = OPENMIC_POOL) -> dict[str, list[str]]:
    """Sample keys per instrument, chosen from OpenMIC-2018's aggregated labels the way MMMG built
    its numbered folders: rows with relevance 1; clips with exactly one such row; per instrument in
    the order of the rows; the first ``size``."""
    agreed = [row for row in rows if float(row["relevance"]) == 1.0]
    counts: dict[str, int] = {}
    for row in agreed:
        counts[row["sample_key"]] = counts.get(row["sample_key"], 0) + 1
    pool: dict[str, list[str]] = {}
    for row in agreed:
        if counts[row["sample_key"]] == 1:
            pool.setdefault(row["instrument"].strip(), []).append(row["sample_key"])
    return {instrument: keys[:size] for instrument, keys in pool.items()}


def _release_audio(root: Path, key: str) -> Path | None:
    for folder in (root / "audio" / key[:3], root / "audio"):
        for suffix in AUDIO_SUFFIXES["openmic"]:
            if (folder / f"{key}{suffix}").is_file():
                return folder / f"{key}{suffix}"
    return None


def _openmic_release(root: Path) -> list[ReferenceFile]:
    labels = root / OPENMIC_LABELS
    with open(labels, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        absent = {"sample_key", "instrument", "relevance"} - set(reader.fieldnames or ())
        if absent:
            raise ValueError(f"{labels} lacks the column(s) {', '.join(sorted(absent))}")
        pool = openmic_release_pool(list(reader))
    files, missing = [], []
    for instrument, keys in pool.items():
        for key in keys:
            path = _release_audio(root, key)
            if path is None:
                missing.append(key)
                continue
            files.append(ReferenceFile(path, path.relative_to(root).as_posix(), instrument))
    if missing:
        raise FileNotFoundError(f"{len(missing)} clip(s) of the reference pool are missing under {root / 'audio'}, e.g. {missing[0]}")
    return files


def _openmic(root: Path) -> list[ReferenceFile]:
    return _openmic_release(root) if (root / OPENMIC_LABELS).is_file() else _openmic_folders(root)


def scan(layout: str, root: str | Path) -> list[ReferenceFile]:
    """The reference files of a set, in a stable order (by class, then name)."""
    root = Path(root).expanduser()
    if layout not in LAYOUTS:
        raise UnknownIdError("reference layout", layout, list(LAYOUTS))
    if not root.is_dir():
        raise FileNotFoundError(f"reference folder not found: {root}")
    if layout == "esc50":
        files = _esc50(root)
    elif layout == "openmic":
        files = _openmic(root)
    else:
        files = _class_folders(root, AUDIO_SUFFIXES[layout])
    if not files:
        raise FileNotFoundError(f"no reference audio found in {root} ({layout} layout)")
    if layout in WINDOWS:
        files = [
            ReferenceFile(f.path, f"{f.name}#{_window_name(w)}", f.label, w) for f in files for w in WINDOWS[layout]
        ]
    return sorted(files, key=lambda f: (f.label, f.name))
