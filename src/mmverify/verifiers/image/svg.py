"""Rendering reference SVG code to pixels without letting the SVG reach anything outside itself.

The code-reasoning task compares a generated image with the rendering of the SVG in its
instruction (the published pipeline rendered each SVG with CairoSVG to a 1024x1024 PNG).  SVG can
point outside itself -- ``<image href="http://...">``, ``<use href="file:///...#id">``, CSS
``@import``, XML external entities -- and an SVG can come from an inline instance sent to the reward
server, so rendering is confined:

* the text is bounded (:data:`MAX_SVG_BYTES`) and parsed first with entity declarations refused
  (an XXE or "billion laughs" document is an :class:`SvgError`, never expanded);
* every resource CairoSVG asks for goes through :class:`_Fetcher`, which fetches nothing: only a
  bounded ``data:`` URL (bytes already inside the SVG) is decoded, anything else is answered with
  an empty resource and listed in :attr:`Rendered.refused`;
* ``xml:base`` attributes are dropped, so resolving a relative reference cannot even stat a path;
* the output size is the caller's (capped at :data:`MAX_SIDE`), whatever the SVG declares.

Text is drawn with the system's fonts through fontconfig; that is the only file access, and it is
not chosen by the SVG.  Output is deterministic on a given machine (same SVG and settings -> same
pixels); fonts installed elsewhere can change how text looks.

Background: the published PNGs were transparent, and a plain RGB conversion of them (dropping
alpha, as the published loader and :mod:`mmverify.core.media` do) shows the transparent area as
black.  A browser -- what the instruction asks the model to imitate -- shows SVG on white, so
:func:`render_svg` composites onto white by default; ``background=None`` reproduces the
alpha-dropped rendering.
"""

from __future__ import annotations

import base64
import io
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

MAX_SVG_BYTES = 4 * 1024 * 1024  # the published references are 1-2 kB; anything near this is not a drawing
MAX_ELEMENTS = 100_000
MAX_SIDE = 4096
MAX_DATA_BYTES = 2 * 1024 * 1024  # one embedded data: resource, decoded
MAX_DATA_PIXELS = MAX_SIDE * MAX_SIDE  # an embedded raster image, by its header
PUBLISHED_SIZE = 1024
WHITE = (255, 255, 255)

_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_EMPTY_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>'


class SvgError(ValueError):
    """SVG text that is refused or cannot be rendered; ``reason`` is machine-readable."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class SvgRendererUnavailable(ImportError):
    """CairoSVG (or the cairo library it loads) is not installed."""


@dataclass(frozen=True)
class Rendered:
    pixels: np.ndarray  # uint8 (H, W, 3)
    refused: tuple[str, ...] = ()  # resources the SVG asked for and did not get (data: URLs are kept short)


@dataclass
class _Fetcher:
    """CairoSVG's ``url_fetcher``: hands out bounded inline ``data:`` bytes, fetches nothing else."""

    allow_data: bool = True
    refused: list[str] = field(default_factory=list)

    def __call__(self, url: str, resource_type: str) -> bytes:
        data = self._inline(url) if self.allow_data and url.startswith("data:") else None
        if data is None:
            self.refused.append(url if len(url) <= 200 else url[:200] + "…")
            # an empty stand-in of the asked-for type: CairoSVG parses what it gets
            return _EMPTY_SVG if resource_type == "image/svg+xml" else b""
        return data

    @staticmethod
    def _inline(url: str) -> bytes | None:
        header, comma, payload = url.partition(",")
        if not comma or len(payload) > 2 * MAX_DATA_BYTES:
            return None
        try:
            if header.lower().endswith(";base64"):
                data = base64.b64decode(payload, validate=False)
            else:
                data = urllib.parse.unquote_to_bytes(payload)
        except ValueError:
            return None
        if len(data) > MAX_DATA_BYTES or data.startswith(b"\x1f\x8b"):  # CairoSVG would gunzip it unbounded
            return None
        if not data.lstrip().startswith(b"<"):  # a raster image: refuse decompression bombs by the header
            from PIL import Image

            try:
                with Image.open(io.BytesIO(data)) as image:
                    if image.width * image.height > MAX_DATA_PIXELS:
                        return None
            except Exception:  # not an image PIL can read: CairoSVG could not draw it either
                return None
        return data


def _import_cairosvg():  # type: ignore[no-untyped-def]
    try:
        import cairosvg
        from defusedxml import ElementTree as SafeElementTree
    except (ImportError, OSError) as exc:  # OSError: the cairo shared library is missing
        raise SvgRendererUnavailable(
            f"SVG rendering needs CairoSVG and the cairo library ({exc}); "
            'install them with `pip install "mmverify[models]"` and `apt-get install libcairo2`'
        ) from None
    return cairosvg, SafeElementTree


def _checked_source(svg: str | bytes, safe_tree) -> bytes:  # type: ignore[no-untyped-def]
    """The SVG bytes to render, after the size, entity and element-count checks."""
    data = svg.encode("utf-8") if isinstance(svg, str) else bytes(svg)
    if len(data) > MAX_SVG_BYTES:
        raise SvgError("svg_too_large", f"{len(data)} bytes, the limit is {MAX_SVG_BYTES}")
    if data.startswith(b"\x1f\x8b"):
        raise SvgError("svg_compressed", "compressed SVG (svgz) is not accepted")
    from defusedxml import DefusedXmlException

    try:
        root = safe_tree.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SvgError("svg_entities", f"entity declarations and external references are refused ({type(exc).__name__})") from None
    except Exception as exc:  # expat's ParseError and friends
        raise SvgError("svg_malformed", f"not well-formed XML: {exc}") from None
    if not isinstance(root.tag, str) or root.tag.rsplit("}", 1)[-1] != "svg":
        raise SvgError("svg_malformed", f"the root element is {root.tag!r}, not svg")
    elements = 0
    rebased = False
    for element in root.iter():
        elements += 1
        if elements > MAX_ELEMENTS:
            raise SvgError("svg_too_large", f"more than {MAX_ELEMENTS} elements")
        if _XML_BASE in element.attrib:
            del element.attrib[_XML_BASE]
            rebased = True
    if rebased:  # re-serialise only when something was removed, so ordinary SVG reaches CairoSVG as written
        from xml.etree import ElementTree

        data = ElementTree.tostring(root, encoding="utf-8")
    return data


def render_svg(
    svg: str | bytes,
    *,
    width: int = PUBLISHED_SIZE,
    height: int = PUBLISHED_SIZE,
    background: Sequence[int] | None = WHITE,
    allow_data_urls: bool = True,
) -> Rendered:
    """Render ``svg`` to a ``(height, width, 3)`` uint8 array, confined as the module describes.

    ``background`` is the RGB colour composited under transparent areas (``None``: alpha dropped).
    Raises :class:`SvgError` for refused or broken SVG, :class:`SvgRendererUnavailable` when
    CairoSVG cannot be imported, ``ValueError`` for bad arguments.
    """
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIDE:
            raise ValueError(f"{name} must be an integer in [1, {MAX_SIDE}], got {value!r}")
    if background is not None:
        background = tuple(int(c) for c in background)
        if len(background) != 3 or not all(0 <= c <= 255 for c in background):
            raise ValueError(f"background must be three integers in [0, 255], got {background!r}")
    cairosvg, safe_tree = _import_cairosvg()
    source = _checked_source(svg, safe_tree)
    fetcher = _Fetcher(allow_data=allow_data_urls)
    try:
        # PNGSurface.convert is what svg2png calls; only it passes ``url_fetcher`` on to the parser
        png = cairosvg.surface.PNGSurface.convert(
            bytestring=source, output_width=width, output_height=height, url_fetcher=fetcher, unsafe=False
        )
    except SvgError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # CairoSVG reports broken documents with many exception types
        raise SvgError("svg_unrenderable", f"{type(exc).__name__}: {exc}") from None
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        rgba = np.asarray(image.convert("RGBA"))
    if rgba.shape[:2] != (height, width):  # CairoSVG rounds sizes it derives; the contract is exact
        raise SvgError("svg_unrenderable", f"rendered {rgba.shape[1]}x{rgba.shape[0]}, expected {width}x{height}")
    return Rendered(pixels=_flatten(rgba, background), refused=tuple(fetcher.refused))


def _flatten(rgba: np.ndarray, background: tuple[int, ...] | None) -> np.ndarray:
    rgb = rgba[:, :, :3]
    if background is None:
        return np.ascontiguousarray(rgb)
    # integer "over" compositing with round-half-up: exact and platform-independent
    alpha = rgba[:, :, 3:4].astype(np.uint32)
    under = np.asarray(background, dtype=np.uint32).reshape(1, 1, 3)
    mixed = (rgb.astype(np.uint32) * alpha + under * (255 - alpha) + 127) // 255
    return mixed.astype(np.uint8)


_SVG_OPEN = re.compile(r"<svg\b", re.IGNORECASE)
_SVG_CLOSE = re.compile(r"</svg\s*>", re.IGNORECASE)


def find_svg(text: str) -> str | None:
    r"""The SVG document embedded in ``text`` (from the first ``<svg`` to the last ``</svg>``), if any:
    what ``re.search(r"<svg\b.*</svg\s*>", text, re.I | re.S)`` finds, without trying every
    ``<svg`` to the end of the text (if the first has no ``</svg>`` after it, none has)."""
    opened = _SVG_OPEN.search(text)
    if opened is None:
        return None
    last = None
    for last in _SVG_CLOSE.finditer(text, opened.end()):
        pass
    return text[opened.start() : last.end()] if last is not None else None
