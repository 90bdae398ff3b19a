"""What the coherence task tests share: the image placeholder and a judge that knows the coherence
question templates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mmverify.api import score_items
from mmverify.verifiers.vlm.coherence_templates import COHERENCE_TEMPLATES
from tests.tasks.fake_judge import learn

IMAGE = "<image_start><image_0><image_end>"


@pytest.fixture(autouse=True)
def judge_knows_coherence_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    learn(monkeypatch, COHERENCE_TEMPLATES)


def score(
    tmp_path: Path,
    instructions: Path | None,
    task: str,
    instance: str | dict,
    text: str | None,
    images=("gen.png",),
    *,
    before: str | None = None,
    profile: str = "mmmg",
) -> dict:
    """Score ``[before] image(s) [text]`` -- the instructions ask for the text after the image."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": before}] if before is not None else []
    parts += [{"type": "image", "path": name} for name in images]
    if text is not None:
        parts.append({"type": "text", "text": text})
    item: dict[str, Any] = {"task": task, "parts": parts}
    item.update({"instance": instance} if isinstance(instance, dict) else {"instance_id": instance})
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions, profile=profile)
    return row
