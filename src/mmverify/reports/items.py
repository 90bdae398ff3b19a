"""One JSON record per result row for the item browser, with media for a capped number of rows.

Per task, at most ``max_media`` rows get their media embedded, chosen from both ends of the score
range (lowest, highest, next lowest, ...), so the worst and best items can be looked at; the other
rows are listed with their scores, reasons and evidence but without media.  Media entries point
into one table of data URIs (``src`` and ``plot`` are positions in it).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..core.media import MediaError
from .alignment import transcript_alignment
from .audio_marks import audio_figure
from .figures import audio_svg, svg_data_uri
from .media import AUDIO_RATE, encode_audio, image_overlays, image_thumbnail, load_report_audio
from .rundata import MediaRef, RunData

TEXT_LIMIT = 4000  # characters of an instruction, response text, prompt or reply
EVIDENCE_LIMIT = 6000  # characters of the pretty-printed evidence
MEDIA_NOTE_CAP = "media not embedded (over the --max-media cap for this task)"


def clip_text(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in all)"


def _has_media(data: RunData, row: Mapping[str, Any]) -> bool:
    return any(p.get("type") in ("image", "audio") for p in data.response_parts(row)) or bool(data.input_media(row, 1))


def _extremes_first(indices: Sequence[int], rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """Scored rows alternately from the low and the high end of the score range, then the rest."""
    scored = sorted((i for i in indices if isinstance(rows[i].get("score"), (int, float))), key=lambda i: (rows[i]["score"], i))
    order, low, high = [], 0, len(scored) - 1
    while low <= high:
        order.append(scored[low])
        if high != low:
            order.append(scored[high])
        low, high = low + 1, high - 1
    done = set(scored)
    return order + [i for i in indices if i not in done]


def media_selection(data: RunData, max_media: int) -> set[int]:
    """Indices of the rows whose media are embedded: at most ``max_media`` per task."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(data.rows):
        if _has_media(data, row):
            by_task[str(row.get("task"))].append(index)
    chosen: set[int] = set()
    for task in sorted(by_task):
        chosen.update(_extremes_first(by_task[task], data.rows)[: max(max_media, 0)])
    return chosen


class MediaTable:
    """Data URIs stored once per page; items refer to them by position, so an image shown for many
    items (an edit's source image, a file several lines name) is encoded and embedded once."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._positions: dict[str, int] = {}
        self._thumbs: dict[str, tuple[int, int, int]] = {}
        self._audio: dict[str, int] = {}

    def add(self, uri: str) -> int:
        if uri not in self._positions:
            self._positions[uri] = len(self.uris)
            self.uris.append(uri)
        return self._positions[uri]

    def image(self, ref: MediaRef) -> tuple[int, int, int]:
        """(position, width, height) of the image's thumbnail."""
        key = _source_key(ref)
        if key not in self._thumbs:
            thumb = image_thumbnail(_source(ref))
            self._thumbs[key] = (self.add(thumb.uri), thumb.width, thumb.height)
        return self._thumbs[key]

    def audio(self, ref: MediaRef, samples: Any) -> int:
        key = _source_key(ref)
        if key not in self._audio:
            self._audio[key] = self.add(encode_audio(samples))
        return self._audio[key]


def _source(ref: MediaRef) -> Any:
    return ref.path if ref.path is not None else ref.data


def _source_key(ref: MediaRef) -> str:
    return f"path:{ref.path}" if ref.path is not None else "sha256:" + hashlib.sha256(ref.data or b"").hexdigest()


def _image_entry(table: MediaTable, ref: MediaRef, evidence: Mapping[str, Any], boxes: bool) -> dict[str, Any]:
    position, width, height = table.image(ref)
    entry: dict[str, Any] = {"kind": "image", "label": ref.label, "src": position, "w": width, "h": height}
    entry["boxes"] = image_overlays(evidence, width, height) if boxes else []
    return entry


def _audio_entry(table: MediaTable, ref: MediaRef, row: Mapping[str, Any]) -> dict[str, Any]:
    samples = load_report_audio(_source(ref))
    figure = audio_figure(row, samples, AUDIO_RATE)
    plot = table.add(svg_data_uri(audio_svg(figure)))
    return {"kind": "audio", "label": ref.label, "src": table.audio(ref, samples), "plot": plot, "caption": figure.caption}


def media_entries(table: MediaTable, data: RunData, row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The response's media, then the instruction's input images; unreadable media say why."""
    evidence = row.get("evidence") or {}
    response = data.response_media(row)
    single_image = sum(r.kind == "image" for r in response) == 1
    entries = []
    for ref, is_input in [(r, False) for r in response] + [(r, True) for r in data.input_media(row)]:
        if ref.problem is not None:
            entries.append({"kind": ref.kind, "label": ref.label, "problem": ref.problem})
            continue
        try:
            if ref.kind == "image":
                entries.append(_image_entry(table, ref, evidence, boxes=single_image or is_input))
            else:
                entries.append(_audio_entry(table, ref, row))
        except MediaError as exc:
            entries.append({"kind": ref.kind, "label": ref.label, "problem": exc.message})
        except (OSError, ValueError) as exc:
            entries.append({"kind": ref.kind, "label": ref.label, "problem": f"cannot show: {type(exc).__name__}: {exc}"})
    return entries


def judge_entries(evidence: Mapping[str, Any]) -> list[dict[str, str]]:
    entries = evidence.get("judge")
    if not isinstance(entries, list):
        return []
    out = []
    for entry in entries:
        if isinstance(entry, Mapping):
            verdict = entry.get("verdict")
            out.append(
                {
                    "step": str(entry.get("step", "")),
                    "role": str(entry.get("role", "")),
                    "judge": str(entry.get("judge", "")),
                    "template": str(entry.get("template", "")),
                    "prompt": clip_text(str(entry.get("prompt", ""))),
                    "reply": clip_text(str(entry.get("reply", ""))),
                    "verdict": verdict if isinstance(verdict, str) else json.dumps(verdict, ensure_ascii=False),
                }
            )
    return out


def transcripts(evidence: Mapping[str, Any]) -> list[str]:
    """Transcripts a speech row carries: one (``transcript``) or one per turn (``turns``)."""
    if isinstance(evidence.get("transcript"), str):
        return [clip_text(evidence["transcript"])]
    turns = evidence.get("turns")
    if isinstance(turns, list):
        return [clip_text(t["transcript"]) for t in turns if isinstance(t, Mapping) and isinstance(t.get("transcript"), str)]
    return []


def compact_json(value: Any, indent: str = "") -> str:
    """Pretty JSON with sorted keys that keeps short values (boxes, lists of numbers) on one line."""
    inline = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(inline) <= 72 or not isinstance(value, (Mapping, list)) or not value:
        return inline
    inner = indent + "  "
    if isinstance(value, Mapping):
        body = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {compact_json(value[k], inner)}" for k in sorted(value, key=str)]
        return "{\n" + ",\n".join(body) + f"\n{indent}}}"
    return "[\n" + ",\n".join(inner + compact_json(v, inner) for v in value) + f"\n{indent}]"


def _evidence_text(evidence: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in evidence.items() if k != "judge"}
    return clip_text(compact_json(rest), EVIDENCE_LIMIT) if rest else ""


def _error(row: Mapping[str, Any]) -> dict[str, str] | None:
    error = row.get("error")
    if not isinstance(error, Mapping):
        return None
    return {"code": str(error.get("code", "")), "message": clip_text(str(error.get("message", "")))}


def item_record(table: MediaTable, data: RunData, index: int, row: Mapping[str, Any], embed: bool) -> dict[str, Any]:
    raw_evidence = row.get("evidence")
    evidence: Mapping[str, Any] = raw_evidence if isinstance(raw_evidence, Mapping) else {}
    instance = data.instance_of(row)
    instruction = instance.get("instruction") if instance else None
    texts = [clip_text(str(p.get("text", ""))) for p in data.response_parts(row) if p.get("type") == "text"]
    has_media = _has_media(data, row)
    score = row.get("score")
    return {
        "n": index,
        "task": str(row.get("task")),
        "model": str(row.get("model")),
        "id": str(row.get("instance_id")),
        "sample": row.get("sample"),
        "line": row.get("line"),
        "status": str(row.get("status")),
        "score": float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        "passed": row.get("passed") if isinstance(row.get("passed"), bool) else None,
        "reason": row.get("reason") if isinstance(row.get("reason"), str) else None,
        "error": _error(row),
        "components": {str(k): v for k, v in sorted((row.get("components") or {}).items())},
        "instruction": clip_text(instruction) if isinstance(instruction, str) else None,
        "texts": texts,
        "media": media_entries(table, data, row) if embed and has_media else [],
        "media_note": MEDIA_NOTE_CAP if has_media and not embed else None,
        "judge": judge_entries(evidence),
        "transcripts": transcripts(evidence),
        "alignment": transcript_alignment(str(row.get("task")), instance, evidence),
        "evidence": _evidence_text(evidence),
        "verifier": str(row.get("verifier") or ""),
    }


def item_records(data: RunData, max_media: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of every row, and the data URIs their media entries point into."""
    embedded = media_selection(data, max_media)
    table = MediaTable()
    records = [item_record(table, data, i, row, i in embedded) for i, row in enumerate(data.rows)]
    return records, table.uris
