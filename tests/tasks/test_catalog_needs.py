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
