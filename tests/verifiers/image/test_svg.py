"""Confined SVG rendering: correct pixels, identical pixels every time, and no access to anything
outside the SVG text -- no network (a loopback server counts requests, and urlopen/socket connects
are trapped), no files (the secret files the SVGs point at are never opened or drawn), no entities."""

from __future__ import annotations

import base64
import builtins
import io
import socket
import struct
import sys
import threading
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("cairosvg", reason="SVG rendering needs CairoSVG (scripts/setup.sh installs it)")

from mmverify.verifiers.image import svg as svg_module  # noqa: E402
from mmverify.verifiers.image.svg import MAX_SVG_BYTES, SvgError, SvgRendererUnavailable, find_svg, render_svg  # noqa: E402

NS = 'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
HALF_RED = f'<svg {NS} viewBox="0 0 10 10"><rect width="5" height="10" fill="red"/></svg>'
WHITE, RED, BLACK = [255, 255, 255], [255, 0, 0], [0, 0, 0]


def png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


# -- pixels --------------------------------------------------------------------------------------------
def test_renders_at_the_asked_size_on_white():
    image = render_svg(HALF_RED).pixels  # the published size
    assert image.shape == (1024, 1024, 3) and image.dtype == np.uint8
    assert image[512, 100].tolist() == RED and image[512, 900].tolist() == WHITE
    small = render_svg(HALF_RED, width=40, height=20).pixels  # the square viewBox keeps its aspect, centred
    assert small.shape == (20, 40, 3) and small[10, 15].tolist() == RED
    assert small[10, 5].tolist() == WHITE and small[10, 25].tolist() == WHITE


def test_background_choice():
    assert render_svg(HALF_RED, width=8, height=8, background=None).pixels[4, 7].tolist() == BLACK  # alpha dropped
    assert render_svg(HALF_RED, width=8, height=8, background=(0, 0, 255)).pixels[4, 7].tolist() == [0, 0, 255]
    half = f'<svg {NS} viewBox="0 0 1 1"><rect width="1" height="1" fill="black" fill-opacity="0.5"/></svg>'
    assert render_svg(half, width=4, height=4).pixels[2, 2].tolist() in ([127] * 3, [128] * 3)
    with pytest.raises(ValueError):
        render_svg(HALF_RED, background=(0, 0, 256))
    for size in (0, 5000, 1.5, True):
        with pytest.raises(ValueError):
            render_svg(HALF_RED, width=size)  # type: ignore[arg-type]


def test_same_svg_same_pixels():
    busy = f"""<svg {NS} viewBox="0 0 100 100">
      <defs><linearGradient id="g"><stop offset="0" stop-color="gold"/><stop offset="1" stop-color="teal"/></linearGradient></defs>
      <circle cx="50" cy="50" r="40" fill="url(#g)" stroke="navy" stroke-width="3"/>
      <path d="M10 90 Q 50 10 90 90" fill="none" stroke="crimson" stroke-width="2"/>
      <text x="20" y="55" font-size="14" fill="black">Hello</text></svg>"""
    first, second = render_svg(busy, width=256, height=256), render_svg(busy, width=256, height=256)
    assert np.array_equal(first.pixels, second.pixels) and first.pixels.std() > 10


def test_embedded_data_images_are_drawn():
    red = png_bytes(np.full((4, 4, 3), (255, 0, 0), np.uint8))
    doc = f'<svg {NS} width="8" height="8"><image href="{data_url(red)}" width="8" height="8"/></svg>'
    rendered = render_svg(doc, width=8, height=8)
    assert rendered.refused == () and rendered.pixels[4, 4].tolist() == RED
    refused = render_svg(doc, width=8, height=8, allow_data_urls=False)
    assert refused.pixels[4, 4].tolist() == WHITE and refused.refused[0].startswith("data:image/png")


def _png_header(width: int, height: int) -> bytes:
    """A PNG that claims a size in its header and has no pixel data (a decompression bomb's header)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def test_oversized_or_compressed_embedded_data_is_refused():
    bomb = _png_header(50_000, 50_000)
    gz = b"\x1f\x8b" + b"\x00" * 20
    for payload, mime in ((bomb, "image/png"), (gz, "image/svg+xml"), (b"x" * (svg_module.MAX_DATA_BYTES + 1), "image/png")):
        doc = f'<svg {NS} width="8" height="8"><image href="{data_url(payload, mime)}" width="8" height="8"/></svg>'
        rendered = render_svg(doc, width=8, height=8)
        assert len(rendered.refused) == 1 and rendered.pixels.min() == 255


# -- no network --------------------------------------------------------------------------------------
class _Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        body = png_bytes(np.full((4, 4, 3), (0, 255, 0), np.uint8))
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    _Counter.hits = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", _Counter.hits
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Trap every way out: urlopen (CairoSVG's own fetcher uses it) and socket connections."""
    attempts: list[str] = []

    def trap(*args: object, **kwargs: object) -> None:
        attempts.append(repr(args[:1]))
        raise AssertionError("network access during SVG rendering")

    import cairosvg.url

    monkeypatch.setattr(urllib.request, "urlopen", trap)
    monkeypatch.setattr(cairosvg.url, "urlopen", trap)
    monkeypatch.setattr(socket.socket, "connect", trap)
    monkeypatch.setattr(socket, "create_connection", trap)
    return attempts


def test_external_http_references_are_never_fetched(server, no_network):
    base, hits = server
    doc = f"""<svg {NS} width="16" height="16">
      <style>@import url({base}/style.css); @import "{base}/other.css";</style>
      <image href="{base}/a.png" width="16" height="16"/>
      <image xlink:href="{base}/b.png" width="16" height="16"/>
      <use href="{base}/sprite.svg#icon"/>
      <rect width="4" height="4" fill="url({base}/paint.svg#gradient)"/>
      <rect x="8" width="4" height="4" fill="blue"/></svg>"""
    rendered = render_svg(doc, width=16, height=16)
    assert hits == [] and no_network == []
    assert {f"{base}/a.png", f"{base}/b.png", f"{base}/sprite.svg", f"{base}/style.css", f"{base}/other.css"} <= set(rendered.refused)
    # nothing green from the server, and the local drawing is intact
    assert not (rendered.pixels == [0, 255, 0]).all(axis=-1).any()
    assert rendered.pixels[2, 10].tolist() == [0, 0, 255]


def test_file_references_are_never_opened_or_drawn(tmp_path, monkeypatch, no_network):
    secret_png = tmp_path / "secret.png"
    secret_png.write_bytes(png_bytes(np.full((4, 4, 3), (255, 0, 0), np.uint8)))
    secret_svg = tmp_path / "secret.svg"
    secret_svg.write_text(f'<svg {NS}><rect id="x" width="100" height="100" fill="red"/></svg>')
    opened: list[str] = []
    real_open = builtins.open

    def spy(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    monkeypatch.setattr(io, "open", spy)
    monkeypatch.chdir(tmp_path)  # relative references would resolve next to the secrets
    doc = f"""<svg {NS} width="16" height="16">
      <image href="file://{secret_png}" width="16" height="16"/>
      <image href="secret.png" width="16" height="16"/>
      <g xml:base="file://{tmp_path}/"><image href="secret.png" width="16" height="16"/></g>
      <use href="file://{secret_svg}#x"/><use href="secret.svg#x"/>
      <image href="file:///etc/passwd" width="16" height="16"/>
      <style>@import url(file:///etc/passwd);</style></svg>"""
    rendered = render_svg(doc, width=16, height=16)
    assert rendered.pixels.min() == 255  # all white: no secret was drawn
    assert not any("secret" in path or "passwd" in path for path in opened)
    assert len(rendered.refused) >= 6 and no_network == []


@pytest.mark.parametrize(
    "doc",
    [
        '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        f'<svg {NS} width="400" height="40"><text y="20">&xxe;</text></svg>',
        '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
        f'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><svg {NS}><text>&c;</text></svg>',
        f'<!DOCTYPE svg [<!ENTITY remote SYSTEM "http://127.0.0.1:9/x">]><svg {NS}>&remote;</svg>',
    ],
)
def test_entities_are_refused(doc, no_network):
    with pytest.raises(SvgError) as info:
        render_svg(doc, width=16, height=16)
    assert info.value.reason == "svg_entities" and "root:" not in str(info.value)
    assert no_network == []


def test_a_plain_doctype_is_fine(no_network):
    doc = '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">' + HALF_RED
    assert render_svg(doc, width=8, height=8).pixels[4, 1].tolist() == RED and no_network == []


# -- limits and bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ("<svg", "svg_malformed"),
        ("<html><body/></html>", "svg_malformed"),
        ("just text", "svg_malformed"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 16, "svg_compressed"),
        (f"<svg {NS}>" + " " * MAX_SVG_BYTES + "</svg>", "svg_too_large"),
        (f"<svg {NS}>" + "<g/>" * (svg_module.MAX_ELEMENTS + 1) + "</svg>", "svg_too_large"),
    ],
)
def test_bad_svg_is_refused_with_a_reason(doc, reason):
    with pytest.raises(SvgError) as info:
        render_svg(doc, width=8, height=8)
    assert info.value.reason == reason


def test_find_svg_in_an_instruction():
    instruction = f"### SVG Code:\n<?xml version='1.0'?>{HALF_RED}\n### Instruction:\nWhat does this SVG code represent?"
    assert find_svg(instruction) == HALF_RED
    assert find_svg("Generate HTML code for a blue button.") is None


def test_missing_renderer_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cairosvg", None)
    with pytest.raises(SvgRendererUnavailable) as info:
        render_svg(HALF_RED)
    assert "libcairo2" in str(info.value) and "mmverify[models]" in str(info.value)



@pytest.mark.parametrize("seed", range(300))
def test_find_svg_finds_what_the_published_expression_finds(seed):
    import random
    import re

    rng = random.Random(seed)
    text = "".join(rng.choice(["<svg", "<SVG ", "<svgx", "</svg>", "</svg \n>", "</svg", ">", "a", "\n", " "]) for _ in range(rng.randint(0, 12)))
    match = re.search(r"<svg\b.*</svg\s*>", text, re.IGNORECASE | re.DOTALL)
    assert find_svg(text) == (match.group(0) if match else None), text


def test_find_svg_reads_a_long_run_of_unclosed_openings_once():
    assert find_svg("<svg " * 100_000) is None
    assert find_svg("<svg " * 100_000 + "</svg>") == "<svg " * 100_000 + "</svg>"
