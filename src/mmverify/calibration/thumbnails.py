"""Media of the generations a report lists: small PNG thumbnails (as data URIs) of their images and
the paths of their other media, read from the manifest the run scored.

A results row records its manifest line number; the line is used only if it names the same task,
instance and sample as the row (a folder scored from several manifests may number lines of
another one).  Images are decoded through :mod:`mmverify.core.media`, so its size limits apply.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.media import MediaError, load_image
from ..data.manifest import ManifestError, iter_manifest_lines, manifest_base_dir, parse_line, resolve_media_path

THUMBNAIL_PIXELS = 96


@dataclass
class Media:
    """What a report shows for one generation."""

    images: list[str] = field(default_factory=list)  # data URIs
    paths: list[str] = field(default_factory=list)  # every media path, as written in the manifest
    problems: list[str] = field(default_factory=list)


def png_data_uri(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def thumbnail(source: Path | bytes, size: int = THUMBNAIL_PIXELS) -> str:
    """A PNG data URI of the image scaled to fit ``size`` x ``size`` (``MediaError`` if unreadable)."""
    from PIL import Image

    image = Image.fromarray(load_image(source))
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return png_data_uri(buffer.getvalue())


def _wanted_lines(rows: Iterable[Mapping[str, Any]]) -> dict[int, tuple[str, str, int]]:
    wanted = {}
    for row in rows:
        line = row.get("line")
        if isinstance(line, int) and line > 0:
            wanted[line] = (str(row.get("task")), str(row.get("instance_id")), int(row.get("sample") or 0))
    return wanted


def _media_of(generation: Any, base: Path) -> Media:
    media = Media()
    for part in generation.parts:
        if part.type == "text":
            continue
        media.paths.append(part.path or f"(inline {part.type})")
        if part.type != "image":
            continue
        try:
            # from the manifest's folder only: the report may be shared, the manifest may name ~/private.png
            source = part.data if part.data is not None else resolve_media_path(str(part.path), base, base)
            if isinstance(source, Path) and not source.is_file():
                raise ValueError("not a regular file")  # /dev/zero or a FIFO would be read for ever
            media.images.append(thumbnail(source))
        except (MediaError, OSError, ValueError) as exc:
            media.problems.append(f"{part.path or 'inline image'}: {exc}")
    return media


def media_for_rows(manifest: Path, rows: Iterable[Mapping[str, Any]]) -> dict[int, Media]:
    """Media per manifest line for ``rows`` (rows whose line is missing or disagrees are left out)."""
    wanted = _wanted_lines(rows)
    base = manifest_base_dir(manifest)
    found: dict[int, Media] = {}
    for number, text in iter_manifest_lines(manifest):
        if number not in wanted or text is None:
            continue
        try:
            generation = parse_line(text, number)
        except ManifestError:
            continue
        if (generation.task, generation.instance_id, generation.sample) == wanted[number]:
            found[number] = _media_of(generation, base)
    return found
