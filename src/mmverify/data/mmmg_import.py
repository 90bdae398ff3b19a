"""Convert the official MMMG output layout into a generation manifest.

Layout: ``<dir>/<source>.jsonl`` with one row per generation -- ``response`` text plus the lists
``image_list`` / ``audio_list`` of global numbers naming ``<dir>/image/<source>_<n>.png`` and
``<dir>/audio/<source>_<n>.wav``.  Samples of one instruction are consecutive rows, so row ``r``
is instruction ``r // samples``, sample ``r % samples``.

**Which media a line carries.**  The official pipeline loads every entry of a row's
``image_list`` and ``audio_list``, in list order, whatever the response says; its evaluators then
read either those lists or the response text.  Each line here carries what the official evaluator
of its task reads:

* *list tasks* (image generation, editing, consistency, sound, music, speech, conversation): the
  images and clips of the row's lists, in list order.  The response text rides along (these
  evaluators do not read it): when its placeholders name the list entries one by one in order (any
  of the spellings below), text and media are interleaved as in the response; otherwise the whole
  response comes first as one verbatim text part and the media follow.  An empty response, a
  text-only response or an unusual placeholder spelling therefore loses no media.
* *coherence tasks* (``it_coherence_*``): the images of ``image_list`` are carried when the
  response holds exactly one ``<image_start><image_N><image_end>`` placeholder
  (``it_coherence_math`` / ``_code``: at least one); otherwise none are, because the official
  evaluator then scores the row 0 without looking at them (the task here says ``no_image``).  For
  the one-image tasks the text before and after the placeholder keep their sides (the newest
  evaluator reads only the text after the image); for math and code the response with every
  placeholder removed, joined without separator, comes first (those evaluators read all of it).
* *order tasks* (``i_structure``, ``a_structure``): only the response.  It is split on
  ``<K_start><K_N><K_end>`` where each K is ``image`` or ``audio`` (kinds may be mixed; the middle
  token gives the part's kind), text pieces kept verbatim.  When the response holds a
  ``<image_N>`` / ``<audio_N>`` token outside such a placeholder (e.g. the ``<image_begin>``
  spelling), the official evaluator scores 0; the line then carries the response as one text part,
  whose order ``t`` no instruction allows.  A placeholder whose number is beyond the row's list
  names no file; the official evaluator still scores the order, so its part carries an empty inline
  payload (order tasks never decode media) and the import report notes the row.

One official misalignment is not reproduced: eval_audio.py's gender check (``a_speech_attribute``,
``a_speech_chinese``) opens ``audio/<source>_<i>.wav`` with ``i`` the row's position among the rows
that have exactly one clip, not the row's own ``audio_list`` entry; lines here carry the row's own
clip for every check.

Placeholder spellings recognised for interleaving: ``<image_start>`` (what the official models
write), ``<image_begin>`` (the spelling of the official template for custom models), ``<image_end>``
or ``</image_end>``; likewise for audio.

**Per-row problems never stop an import.**  A list entry that does not name a file the official
way (not an integer) becomes a part pointing at ``<kind>/<source>_unusable-entry-row<r>-<i>.<ext>``,
a file that does not exist, so scoring gives that line a ``missing_media`` error row (the official
pipeline stops with a missing-file error there).  A missing list counts as empty.  Only problems of
a whole file (rows that do not line up with the instructions, invalid JSON) stop the import, and
they are raised before any line is produced: :meth:`MMMGImporter.lines` validates everything first,
and :meth:`MMMGImporter.write_manifest` writes atomically.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..tasks.catalog import tasks_for_source
from .instructions import InstructionSet, read_jsonl_objects
from .jsonsafe import LONE_SURROGATE, replace_surrogates

_SUFFIX = {"image": "png", "audio": "wav"}
KINDS = ("image", "audio")

ORDER_TASKS = frozenset({"i_structure", "a_structure"})
SINGLE_IMAGE_COHERENCE = frozenset(
    {
        "it_coherence_count",
        "it_coherence_color",
        "it_coherence_size",
        "it_coherence_spacial_relative",
        "it_coherence_spacial_absolute",
        "it_coherence_ocr",
    }
)
SEVERAL_IMAGE_COHERENCE = frozenset({"it_coherence_math", "it_coherence_code"})

# what the official evaluators match (\d as there: any Unicode decimal digit)
COHERENCE_PLACEHOLDER = re.compile(r"<image_start><image_\d+><image_end>")
ORDER_PLACEHOLDER = re.compile(r"<(?:image|audio)_start><(image|audio)_(\d+)><(?:image|audio)_end>")
MEDIA_TOKEN = re.compile(r"<(?:image|audio)_\d+>")
# every spelling recognised when interleaving list-task text with media (same kind throughout)
ANY_PLACEHOLDER = re.compile(r"<(image|audio)_(?:start|begin)><(image|audio)_(\d+)></?(image|audio)_end>")

_ENTRY_NAME = re.compile(r"[A-Za-z0-9_-]+")  # a list entry written into a file name as it is
_MAX_INDEX_DIGITS = 18


class MMMGLayoutError(ValueError):
    """The output folder does not match the instruction set."""


@dataclass
class ImportReport:
    lines: int = 0
    files: int = 0
    skipped_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class RowParts:
    """The manifest parts of one row for one task, and what was unusual about the row."""

    parts: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


# -- one row's media -------------------------------------------------------------------------------
def _entries(row: dict[str, Any], kind: str, notes: list[str]) -> list[Any]:
    entries = row.get(f"{kind}_list", [])
    if isinstance(entries, list):
        return entries
    notes.append(f"{kind}_list is not a list; read as empty")
    return []


def entry_path(media_dir: Path, kind: str, source: str, entry: Any, row: int, position: int) -> tuple[Path, bool]:
    """``(path, usable)``: the file the official pipeline opens for a list entry, or a path that does
    not exist when the entry names no file (so scoring reports it as missing media)."""
    name = entry if isinstance(entry, str) else None
    if isinstance(entry, int) and not isinstance(entry, bool):
        name = str(entry)
    if name is not None and _ENTRY_NAME.fullmatch(name):
        return media_dir / kind / f"{source}_{name}.{_SUFFIX[kind]}", True
    return media_dir / kind / f"{source}_unusable-entry-row{row}-{position}.{_SUFFIX[kind]}", False


def _media_part(kind: str, path: Path) -> dict[str, Any]:
    return {"type": kind, "path": str(path)}


def list_media(
    row: dict[str, Any], kind: str, source: str, media_dir: Path, r: int, notes: list[str]
) -> list[dict[str, Any]]:
    """One part per entry of the row's ``<kind>_list``, in list order."""
    parts = []
    for position, entry in enumerate(_entries(row, kind, notes)):
        path, usable = entry_path(media_dir, kind, source, entry, r, position)
        if not usable:
            notes.append(f"{kind}_list[{position}] = {_shown(entry)} names no file")
        parts.append(_media_part(kind, path))
    return parts


def _shown(value: Any, limit: int = 40) -> str:
    text = replace_surrogates(repr(value))
    return text if len(text) <= limit else text[:limit] + "..."


def _index(digits: str) -> int | None:
    """A placeholder number, or None when it is too long to name any list entry."""
    return int(digits) if len(digits) <= _MAX_INDEX_DIGITS else None


def _text_part(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text != "" else []


# -- the three families ----------------------------------------------------------------------------
def list_task_parts(response: str, row: dict[str, Any], source: str, media_dir: Path, r: int = 0) -> RowParts:
    """Parts for a task whose official evaluator reads the row's lists."""
    notes: list[str] = []
    media = {kind: list_media(row, kind, source, media_dir, r, notes) for kind in KINDS}
    matches = list(ANY_PLACEHOLDER.finditer(response))
    if _names_lists_in_order(matches, {kind: len(media[kind]) for kind in KINDS}):
        return RowParts(_interleave(response, matches, media), notes)
    if matches:
        notes.append("the response's placeholders do not name the list entries in order; media follow the lists")
    return RowParts(_text_part(response) + media["image"] + media["audio"], notes)


def _names_lists_in_order(matches: list[re.Match[str]], sizes: dict[str, int]) -> bool:
    """True when the placeholders of each kind are ``0, 1, ..., n-1`` for that kind's n entries."""
    seen: dict[str, list[int | None]] = {kind: [] for kind in KINDS}
    for match in matches:
        if not match.group(1) == match.group(2) == match.group(4):
            return False
        seen[match.group(1)].append(_index(match.group(3)))
    return all(seen[kind] == list(range(sizes[kind])) for kind in KINDS)


def _interleave(response: str, matches: list[re.Match[str]], media: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    position = 0
    for match in matches:
        parts += _text_part(response[position : match.start()])
        parts.append(media[match.group(1)][int(match.group(3))])
        position = match.end()
    return parts + _text_part(response[position:])


def coherence_parts(
    response: str, row: dict[str, Any], source: str, media_dir: Path, r: int = 0, *, several: bool = False
) -> RowParts:
    """Parts for an ``it_coherence_*`` task: the joined text, and the images when the response has
    the placeholder count the official evaluator requires."""
    notes: list[str] = []
    pieces = COHERENCE_PLACEHOLDER.split(response)
    count = len(pieces) - 1
    text = "".join(pieces)
    if count == 1 and not several:  # the text around the image keeps its side: only what follows is read
        images = list_media(row, "image", source, media_dir, r, notes)
        return RowParts(_text_part(pieces[0]) + images + _text_part(pieces[1]), notes)
    if several and count >= 1:
        return RowParts(_text_part(text) + list_media(row, "image", source, media_dir, r, notes), notes)
    wanted = "at least one" if several else "exactly one"
    notes.append(f"the response holds {count} <image_start><image_N><image_end> placeholders, not {wanted}; "
                 "no image is read")
    return RowParts(_text_part(text), notes)


def order_parts(response: str, row: dict[str, Any], source: str, media_dir: Path, r: int = 0) -> RowParts:
    """Parts for ``i_structure`` / ``a_structure``: the response split on its placeholders."""
    notes: list[str] = []
    matches = list(ORDER_PLACEHOLDER.finditer(response))
    if len(matches) != len(MEDIA_TOKEN.findall(response)):
        notes.append("the response holds a media token outside a placeholder; its order is unreadable (scored 0)")
        return RowParts(_text_part(response), notes)
    entries = {kind: _entries(row, kind, notes) for kind in KINDS}
    parts: list[dict[str, Any]] = []
    position = 0
    for match in matches:
        parts += _text_part(response[position : match.start()])
        parts.append(_placeholder_part(match, entries, source, media_dir, r, notes))
        position = match.end()
    return RowParts(parts + _text_part(response[position:]), notes)


def _placeholder_part(
    match: re.Match[str], entries: dict[str, list[Any]], source: str, media_dir: Path, r: int, notes: list[str]
) -> dict[str, Any]:
    kind, index = match.group(1), _index(match.group(2))
    if index is None or index >= len(entries[kind]):
        number = match.group(2) if len(match.group(2)) <= 20 else match.group(2)[:20] + "..."
        notes.append(f"placeholder <{kind}_{number}> is beyond {kind}_list; its part has no media")
        return {"type": kind, "data": ""}
    path, usable = entry_path(media_dir, kind, source, entries[kind][index], r, index)
    if not usable:
        notes.append(f"{kind}_list[{index}] names no file")
    return _media_part(kind, path)


def task_parts(task: str, response: str, row: dict[str, Any], source: str, media_dir: Path, r: int = 0) -> RowParts:
    """The parts of one row for ``task``, following what that task's official evaluator reads."""
    if task in ORDER_TASKS:
        return order_parts(response, row, source, media_dir, r)
    if task in SINGLE_IMAGE_COHERENCE or task in SEVERAL_IMAGE_COHERENCE:
        return coherence_parts(response, row, source, media_dir, r, several=task in SEVERAL_IMAGE_COHERENCE)
    return list_task_parts(response, row, source, media_dir, r)


# -- the importer ----------------------------------------------------------------------------------
class MMMGImporter:
    """Reads one model's output folder against an instruction set (see the module docstring)."""

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
        self.model = replace_surrogates(model if model is not None else self.output_dir.resolve().name)
        self.relative_to = relative_to
        self.report = ImportReport()

    def _path(self, path: str) -> str:
        if self.relative_to is None:
            shown = str(Path(path).resolve())
        else:
            shown = os.path.relpath(Path(path).resolve(), self.relative_to.resolve())
        if LONE_SURROGATE.search(shown):
            raise MMMGLayoutError(f"{shown!r} is not valid UTF-8, so a manifest cannot name it")
        return shown

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

    def _response(self, row: dict[str, Any], where: str) -> str:
        response = row.get("response")
        if not isinstance(response, str):
            self.report.warnings.append(f"{where}: no 'response' text; imported as empty")
            return ""
        return response

    def _finish(self, parts: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
        """Manifest-ready parts: paths made absolute or relative, text made valid UTF-8."""
        finished = []
        for part in parts:
            part = dict(part)
            if "path" in part:
                part["path"] = self._path(part["path"])
            if "text" in part and LONE_SURROGATE.search(part["text"]):
                self.report.warnings.append(f"{where}: unpaired surrogates in the text replaced by U+FFFD")
                part["text"] = replace_surrogates(part["text"])
            finished.append(part)
        return finished

    def _file_lines(self, path: Path) -> list[dict[str, Any]] | None:
        source = path.stem
        try:
            instruction_rows = self.instructions.rows(source)
        except FileNotFoundError:
            self.report.skipped_files.append(path.name)
            return None
        rows = read_jsonl_objects(path)
        per_instruction = self._samples_for(source, len(rows), len(instruction_rows))
        lines: list[dict[str, Any]] = []
        for r, row in enumerate(rows):
            index, sample = divmod(r, per_instruction)
            lines += self._row_lines(source, r, row, index, sample, instruction_rows[index])
        return lines

    def _row_lines(
        self, source: str, r: int, row: dict[str, Any], index: int, sample: int, instruction: dict[str, Any]
    ) -> list[dict[str, Any]]:
        where = f"{source}.jsonl row {r}"
        tasks = tasks_for_source(source, instruction)
        if not tasks:
            self.report.warnings.append(f"{source}/{index}: belongs to no task")
            return []
        response = self._response(row, where)
        lines = []
        for info in tasks:
            built = task_parts(info.id, response, row, source, self.output_dir, r)
            self.report.warnings += [f"{where} ({info.id}): {note}" for note in built.notes]
            lines.append(
                {
                    "task": info.id,
                    "instance_id": f"{source}/{index}",
                    "sample": sample,
                    "model": self.model,
                    "parts": self._finish(built.parts, where),
                }
            )
        return lines

    def collect(self) -> list[dict[str, Any]]:
        """Every manifest line of the folder.  Raises (MMMGLayoutError, InstructionSetError)
        before returning anything when a file does not line up with the instructions."""
        self.report = ImportReport()
        collected: list[dict[str, Any]] = []
        for path in sorted(self.output_dir.glob("*.jsonl")):
            lines = self._file_lines(path)
            if lines is None:
                continue
            self.report.files += 1
            collected += lines
        self.report.lines = len(collected)
        return collected

    def lines(self) -> Iterator[dict[str, Any]]:
        """The manifest lines; the whole folder is read and checked before the first is yielded."""
        yield from self.collect()

    def manifest_text(self) -> str:
        """The whole manifest as JSON Lines text."""
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.collect())

    def write_manifest(self, path: str | Path) -> None:
        """Write the manifest to ``path`` atomically: on any failure ``path`` is left as it was."""
        text = self.manifest_text()
        target = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
