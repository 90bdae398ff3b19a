"""Tasks declare what they need in the model hub's own vocabulary."""

from __future__ import annotations

from mmverify.models.catalog import CAPABILITIES
from mmverify.pipelines.readiness import task_readiness
from mmverify.tasks.catalog import CATALOG, judge_role


def test_every_need_is_a_hub_capability_or_a_judge_role():
    for info in CATALOG.values():
        for need in info.needs:
            assert need in CAPABILITIES or judge_role(need) is not None, (info.id, need)
    assert judge_role("judge") == "default" and judge_role("judge:llm") == "llm" and judge_role("audio_text") is None


def test_readiness_checks_exactly_the_declared_capabilities():
    chinese = task_readiness("a_speech_chinese")
    assert [r.what.split(" ")[0] for r in chinese.requirements][:2] == ["transcriber_zh", "gender"]
    judged = task_readiness("it_coherence_count")
    assert any(r.what.startswith("judge") for r in judged.requirements)


def test_a_task_reaches_only_what_it_declares(monkeypatch):
    import pytest

    from mmverify.api import score_items
    from mmverify.models.base import ModelUnavailable
    from mmverify.tasks import models
    from mmverify.tasks.music import MusicIntensity

    with models.declared("a_sound_cot"):
        with pytest.raises(models.UndeclaredNeed, match="'transcriber'.*audio_text"):
            models.backend("transcriber")
        with pytest.raises(models.UndeclaredNeed, match="'judge'"):
            models.judge("ocr")
    with models.declared("it_coherence_math"):
        for role in ("llm", "default"):  # declared: the hub answers (here: no judge is configured)
            with pytest.raises(ModelUnavailable):
                models.judge(role)

    # a program task that reaches for a model scores an internal_error row naming the undeclared need
    def sneaky(self, instance, response):
        return models.backend("speaker")

    monkeypatch.setattr(MusicIntensity, "score", sneaky)
    item = {"task": "a_music_intensity", "instance": {"trend": "fade_in"}, "parts": []}
    [row] = score_items([item])
    assert row["error"]["code"] == "internal_error" and "does not declare" in row["error"]["message"]
