"""A small realistic run: real MMMG instructions, synthetic generations with known answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
import soundfile as sf

from mmverify.verifiers.image.fill import NAMED_COLORS, region_boxes
from tests.conftest import save_png, scene, write_manifest


def bordered(color: str, fraction: float = 0.1, seed: int = 0) -> np.ndarray:
    image = scene(200, 200, seed=seed)
    band = round(fraction * 200)
    image[:band], image[-band:], image[:, :band], image[:, -band:] = (NAMED_COLORS[color],) * 4
    return image


@pytest.fixture
def run_dir(tmp_path: Path, mmmg_instructions: Path) -> dict:
    """Manifest lines covering good, bad and unimplemented cases; returns paths and expectations."""
    media = tmp_path / "gen"
    # i_format_border/0 asks for green, i_format_background/0 for a green left half (see the data)
    save_png(media / "border_ok.png", bordered("green"))
    save_png(media / "border_red.png", bordered("red"))
    left = scene(200, 300, seed=3)
    x0, y0, x1, y1 = region_boxes("left half", 300, 200)[0]
    left[y0:y1, x0:x1] = NAMED_COLORS["green"]
    save_png(media / "left_green.png", left)
    (media / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    sf.write(media / "speech.wav", np.zeros(8000, dtype=np.float32), 8000)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.png"
    save_png(outside, bordered("green"))

    img = lambda name: {"type": "image", "path": f"gen/{name}"}  # noqa: E731
    lines = [
        {"task": "i_format_border", "instance_id": "i_format_border/0", "parts": [img("border_ok.png")]},
        {"task": "i_format_border", "instance_id": "i_format_border/0", "sample": 1, "parts": [img("border_red.png")]},
        {"task": "i_format_background", "instance_id": "i_format_background/0", "parts": [img("left_green.png")]},
        {"task": "i_structure", "instance_id": "i_structure/0", "parts": [img("border_ok.png"), {"type": "text", "text": "History."}]},
        {"task": "a_structure", "instance_id": "a_structure/0", "parts": [{"type": "audio", "path": "gen/speech.wav"}, {"type": "text", "text": "Notes."}]},
        "{this is not json",
        {"task": "i_format_bordr", "instance_id": "i_format_border/0", "parts": []},
        {"task": "i_ocr", "instance_id": "i_ocr/0", "parts": [img("border_ok.png")]},
        {"task": "i_format_border", "instance_id": "i_format_border/999", "parts": [img("border_ok.png")]},
        {"task": "i_format_border", "instance_id": "i_format_border/1", "parts": [img("absent.png")]},
        {"task": "i_format_border", "instance_id": "i_format_border/2", "parts": [{"type": "image", "path": str(outside)}]},
        {"task": "i_format_border", "instance_id": "i_format_border/3", "parts": [img("corrupt.png")]},
        {"task": "i_format_border", "instance_id": "i_format_border/4", "parts": [{"type": "text", "text": "no image"}]},
        {"task": "i_format_border", "instance": {"instruction": "a border"}, "parts": [img("border_ok.png")]},
        {"task": "i_format_border", "instance": {"color": "green"}, "model": "inline-model", "parts": [img("border_ok.png")]},
    ]
    expected = [
        ("scored", None, ">0.99"),
        ("scored", None, "0"),
        ("scored", None, ">0.99"),
        ("scored", None, "1"),
        ("scored", None, "1"),
        ("error", "malformed_line", None),
        ("error", "unknown_task", None),
        ("error", "model_unavailable", None),  # i_ocr needs a judge; none is configured
        ("error", "unknown_instance", None),
        ("error", "missing_media", None),
        ("error", "path_outside_root", None),
        ("scored", "unreadable_image", "0"),
        ("scored", "no_image", "0"),
        ("error", "invalid_instance", None),
        ("scored", None, ">0.99"),
    ]
    manifest = write_manifest(tmp_path / "manifest.jsonl", lines)
    return {"manifest": manifest, "instructions": mmmg_instructions, "root": tmp_path, "expected": expected}


@pytest.fixture
def slow_manifest(tmp_path, mmmg_instructions):
    """Large images: decoding alone takes far longer than a millisecond."""
    big = np.random.default_rng(0).integers(0, 256, (2000, 2000, 3), dtype=np.uint8)
    save_png(tmp_path / "big.png", big)
    lines = [
        {"task": "i_format_border", "instance_id": f"i_format_border/{i}", "parts": [{"type": "image", "path": "big.png"}]}
        for i in range(3)
    ]
    return write_manifest(tmp_path / "slow.jsonl", lines)


@pytest.fixture
def serve() -> Iterator[Callable[..., Any]]:
    """Start reward servers on free loopback ports (``serve(reward=None, **ServerConfig options)``);
    every one started is stopped after the test."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    from mmverify.pipelines.server import BackgroundServer, ServerConfig, create_app

    servers: list[BackgroundServer] = []

    def start(reward: Any = None, **config: Any) -> BackgroundServer:
        server = BackgroundServer(create_app(ServerConfig(**config), reward=reward)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
