"""A self-contained example: synthetic generations whose right answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from .verifiers.image.fill import NAMED_COLORS

SIZE = 256


def _scene(seed: int) -> np.ndarray:
    """A smooth, textured stand-in for a photo (deterministic)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    base = np.stack([np.sin(6 * x + seed), np.cos(5 * y - seed), np.sin(4 * (x + y))], axis=-1)
    noise = rng.normal(0.0, 0.15, (SIZE, SIZE, 3))
    return np.clip((base + noise + 1.0) * 110 + 10, 0, 255).astype(np.uint8)


def _bordered(color: str, fraction: float, seed: int) -> np.ndarray:
    image = _scene(seed)
    band = round(fraction * SIZE)
    image[:band], image[-band:], image[:, :band], image[:, -band:] = (NAMED_COLORS[color],) * 4
    return image


def write_demo(out: Path) -> Path:
    """Write ``out/media/*.png`` and ``out/manifest.jsonl``; returns the manifest path."""
    media = out / "media"
    media.mkdir(parents=True, exist_ok=True)
    left_green = _scene(3)
    left_green[:, : SIZE // 2] = NAMED_COLORS["green"]
    noisy = left_green.astype(np.int16)
    noisy[:, : SIZE // 2] += np.random.default_rng(4).integers(-40, 41, (SIZE, SIZE // 2, 3), dtype=np.int16)
    images = {
        "border_green_10pct.png": _bordered("green", 0.10, 1),
        "border_green_30pct.png": _bordered("green", 0.30, 1),
        "border_red_10pct.png": _bordered("red", 0.10, 1),
        "no_border.png": _scene(2),
        "left_half_green.png": left_green,
        "left_half_green_noisy.png": np.clip(noisy, 0, 255).astype(np.uint8),
    }
    for name, array in images.items():
        Image.fromarray(array).save(media / name)

    border = {"instruction": "Generate a serene mountain landscape surrounded by a solid green border of about 10% of the width.", "color": "green"}
    background = {"instruction": "Generate a bustling city street at dusk. The left half must be pure green.", "region": "left half", "color": "green"}
    order = {"instruction": "First generate an image of the Eiffel Tower, then describe its history.", "order": ["it"]}

    def image(name: str) -> dict[str, str]:
        return {"type": "image", "path": f"media/{name}"}

    lines = [
        ("i_format_border", "demo/border-clean", border, [image("border_green_10pct.png")]),
        ("i_format_border", "demo/border-too-wide", border, [image("border_green_30pct.png")]),
        ("i_format_border", "demo/border-wrong-colour", border, [image("border_red_10pct.png")]),
        ("i_format_border", "demo/no-border", border, [image("no_border.png")]),
        ("i_format_border", "demo/text-only", border, [{"type": "text", "text": "Sorry, I cannot draw."}]),
        ("i_format_background", "demo/left-half", background, [image("left_half_green.png")]),
        ("i_format_background", "demo/left-half-noisy", background, [image("left_half_green_noisy.png")]),
        ("i_structure", "demo/order-right", order, [image("no_border.png"), {"type": "text", "text": "Built in 1889 ..."}]),
        ("i_structure", "demo/order-wrong", order, [{"type": "text", "text": "Here it is:"}, image("no_border.png")]),
        ("i_format_border", "demo/missing-file", border, [image("does_not_exist.png")]),
    ]
    manifest = out / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as handle:
        for task, instance_id, instance, parts in lines:
            handle.write(json.dumps({"task": task, "instance_id": instance_id, "instance": instance, "parts": parts}) + "\n")
    return manifest
