"""The order tasks under each profile: mmmg reads only the parts' types, as the published rule
does; strict first decodes each image and audio part, so a file that is not one scores 0."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.pipelines.reward import Reward
from mmverify.tasks.catalog import TASK_REGISTRY
from tests.conftest import save_png


def _png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _wav(path: Path) -> Path:
    buffer = io.BytesIO()
    sf.write(buffer, np.sin(np.arange(8000) / 10).astype(np.float32), 8000, format="WAV")
    path.write_bytes(buffer.getvalue())
    return path


@pytest.mark.parametrize(
    "task, kind, make_bad, reason",
    [
        ("i_structure", "image", lambda p: p.write_text("not an image"), "unreadable_image"),
        ("i_structure", "image", lambda p: p.write_bytes(b""), "unreadable_image"),
        ("a_structure", "audio", lambda p: p.write_bytes(b""), "unreadable_audio"),
        ("a_structure", "audio", lambda p: p.write_bytes(_png_bytes()), "unreadable_audio"),  # an image named .wav
    ],
)
def test_a_media_part_that_does_not_decode_counts_under_mmmg_only(tmp_path: Path, task, kind, make_bad, reason):
    bad = tmp_path / f"bad.{'png' if kind == 'image' else 'wav'}"
    make_bad(bad)
    good = tmp_path / f"good.{'png' if kind == 'image' else 'wav'}"
    save_png(good, np.zeros((8, 8, 3), np.uint8)) if kind == "image" else _wav(good)
    letter = "i" if kind == "image" else "a"
    instance = {"order": [f"t{letter}t"]}
    for profile, expected in (("mmmg", [1.0, 1.0]), ("strict", [1.0, 0.0])):
        reward = Reward(task, profile=profile, media_root=tmp_path)
        rows = reward([(instance, ["a", {"type": kind, "path": media.name}, "b"]) for media in (good, bad)]).rows
        assert [row["score"] for row in rows] == expected, (profile, rows)
        if profile == "strict":
            assert rows[1]["reason"] == reason and rows[1]["status"] == "scored"


def test_the_mmmg_profile_keeps_its_settings_and_so_its_keys():
    """Rows scored under mmmg before strict decoded media keep their keys: only strict's settings name it."""
    for task in ("i_structure", "a_structure"):
        family = TASK_REGISTRY.get(task)
        assert "readable_media" not in family.build("mmmg").params()
        assert family.build("strict").params()["readable_media"] is True
