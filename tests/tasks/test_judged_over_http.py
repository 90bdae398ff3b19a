"""Every judged image task scored through the real HTTP judge client against a local
OpenAI-compatible server gives the same rows (scores, components, verdicts) as with the in-process
fake judge answering the same way -- and a rerun is served entirely from the reply cache."""

from __future__ import annotations

import pytest

from mmverify.models import hub as hub_module
from tests.tasks.fake_judge import FakeJudge, install, letter, no, yes
from tests.tasks.test_image_judged import FIRST, JUDGED, image, score  # noqa: F401  (fixture)
from tests.vlm_server import vlm_env, vlm_server  # noqa: F401  (fixtures)


def _answers(name: str = "scripted") -> FakeJudge:
    """Deterministic replies that exercise both outcomes: some Yes, some No, a letter, a reading."""
    judge = FakeJudge(name, auto=True)
    return judge.on("absence", no()).on("count", letter("C")).on("relative_horizontal", letter("A")).on("absolute", letter("B"))


@pytest.mark.parametrize("task", JUDGED)
def test_http_judge_matches_the_in_process_judge(task, tmp_path, mmmg_instructions, image, vlm_env, monkeypatch):  # noqa: F811
    with pytest.MonkeyPatch.context() as patch:  # the fake only for this first run
        # Chinese OCR needs a second reader that is a different model from the first
        install(patch, default=_answers(), ocr_second=_answers("scripted-second"))
        expected = score(tmp_path, mmmg_instructions, task, FIRST[task])
    monkeypatch.setattr(hub_module, "_HUB", None)  # a fresh hub: the real client, configured by vlm_env
    monkeypatch.setenv("MMVERIFY_VLM_OCR_SECOND_MODEL", "scripted-second")  # same server, another model name
    replier = _answers()
    vlm_env.script(lambda request: replier.ask(request.prompt, request.images))
    actual = score(tmp_path, mmmg_instructions, task, FIRST[task])
    assert expected["status"] == "scored" and vlm_env.count > 0, (expected, vlm_env.count)
    assert (actual["status"], actual["score"], actual["components"]) == (expected["status"], expected["score"], expected["components"])
    assert [e["verdict"] for e in actual["evidence"].get("judge", [])] == [e["verdict"] for e in expected["evidence"].get("judge", [])]
    sent = vlm_env.count
    monkeypatch.setattr(hub_module, "_HUB", None)
    again = score(tmp_path, mmmg_instructions, task, FIRST[task])
    assert vlm_env.count == sent and again["score"] == actual["score"]  # cache hits: no new requests
