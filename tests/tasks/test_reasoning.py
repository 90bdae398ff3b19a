"""it_coherence_math and it_coherence_code on real MMMG rows and on rows shaped like the published
SVG version, with a scripted judge and a scripted image-similarity backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.models import hub as hub_module
from mmverify.models.base import ModelUnavailable
from mmverify.tasks import reasoning
from mmverify.verifiers.vlm.coherence_templates import COHERENCE_TEMPLATES
from tests.conftest import save_png, scene
from tests.tasks import fake_judge
from tests.tasks.fake_judge import FakeJudge, failed, install, no, yes
from tests.vlm_server import by_prompt, vlm_env, vlm_server  # noqa: F401  (fixtures)

MATH_TEXT = "The filled square moves one step right each time.\n<<{A horizontal row of six squares, the first holding a circle, the fifth filled.}>>"
NS = 'xmlns="http://www.w3.org/2000/svg"'
RED_LEFT = f'<svg {NS} viewBox="0 0 10 10"><rect width="5" height="10" fill="red"/></svg>'


@pytest.fixture(autouse=True)
def judge_knows_coherence_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted judge recognises prompts of every template; add this module's own."""
    patterns = {tid: fake_judge._pattern(t.text) for tid, t in COHERENCE_TEMPLATES.items()}
    monkeypatch.setattr(fake_judge, "_PATTERNS", {**fake_judge._PATTERNS, **patterns})
    monkeypatch.setattr(fake_judge, "TEMPLATES", {**fake_judge.TEMPLATES, **COHERENCE_TEMPLATES})


class ScriptedSimilarity:
    """image_similarity stand-in: returns ``value`` for every pair and keeps the pairs it saw."""

    name = "scripted-similarity"
    fingerprint = "scripted-similarity:1"

    def __init__(self, value: float = 0.75, unavailable: bool = False) -> None:
        self.value = value
        self.unavailable = unavailable
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def ensure_loaded(self) -> None:
        if self.unavailable:
            raise ModelUnavailable("dreamsim", "weights not found; run `mmverify models fetch dreamsim`")

    def similarity(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        self.pairs.extend((np.array(a), np.array(b)) for a, b in pairs)
        return [self.value] * len(pairs)


def use_similarity(similarity: ScriptedSimilarity) -> ScriptedSimilarity:
    hub_module.get_hub()._instances["image_similarity"] = similarity  # install() gave this test a fresh hub
    return similarity


@pytest.fixture
def images(tmp_path: Path) -> list[np.ndarray]:
    pictures = [scene(64, 64, seed=s) for s in (1, 2)]
    for i, picture in enumerate(pictures):
        save_png(tmp_path / f"gen{i}.png", picture)
    return pictures


def score(tmp_path: Path, task: str, instance: str | dict, text: str | None, images=("gen0.png", "gen1.png"), instructions: Path | None = None) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    parts += [{"type": "image", "path": name} for name in images]
    item: dict[str, Any] = {"task": task, "parts": parts}
    item.update({"instance": instance} if isinstance(instance, dict) else {"instance_id": instance})
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions)
    return row


# -- math -------------------------------------------------------------------------------------------
def test_math_text_by_llm_then_last_image_by_vlm(tmp_path, images, mmmg_instructions, monkeypatch):
    llm = FakeJudge("text-llm").on("pattern_text", yes("Same row, same circle, same filled square."))
    judges = install(monkeypatch, FakeJudge("vlm").on("pattern_image", yes()), llm=llm)
    row = score(tmp_path, "it_coherence_math", "it_coherence_math/0", MATH_TEXT, instructions=mmmg_instructions)
    assert row["score"] == 1.0 and row["passed"] is True
    assert row["components"] == {"text_match": 1.0, "image_match": 1.0}
    pattern = json.loads((mmmg_instructions / "it_coherence_math.jsonl").read_text().splitlines()[0])["pattern"]
    [text_call] = llm.calls
    assert text_call.values == {"truth": pattern, "candidate": "A horizontal row of six squares, the first holding a circle, the fifth filled."}
    assert llm.images == [[]]  # text only
    [image_call] = judges["default"].images
    assert len(image_call) == 1 and np.array_equal(image_call[0], images[-1])  # the last image
    assert [e["role"] for e in row["evidence"]["judge"]] == ["llm", "default"]
    assert [e["template"] for e in row["evidence"]["judge"]] == ["pattern_text@1", "pattern_image@1"]


def test_math_product(tmp_path, images, mmmg_instructions, monkeypatch):
    vlm = FakeJudge()  # unscripted: asking it would fail the test
    install(monkeypatch, vlm, llm=FakeJudge().on("pattern_text", no("The fifth square is not filled in the ground truth.")))
    row = score(tmp_path, "it_coherence_math", "it_coherence_math/0", MATH_TEXT, instructions=mmmg_instructions)
    assert row["score"] == 0.0 and row["components"] == {"text_match": 0.0}
    assert row["evidence"]["not_asked"] == ["image"] and vlm.calls == []

    install(monkeypatch, FakeJudge().on("pattern_image", no()), llm=FakeJudge().on("pattern_text", yes()))
    row = score(tmp_path, "it_coherence_math", "it_coherence_math/0", MATH_TEXT, instructions=mmmg_instructions)
    assert row["score"] == 0.0 and row["components"] == {"text_match": 1.0, "image_match": 0.0}


def test_math_text_errors(tmp_path, images, monkeypatch):
    instance = {"pattern": "A 3x3 grid with the centre filled."}
    for text, names, reason in [
        ("The answer is a row of squares.", ("gen0.png",), "missing_pattern"),
        ("<<>> and then << {} >>", ("gen0.png",), "missing_pattern"),
        (MATH_TEXT, (), "no_image"),
        (None, ("gen0.png",), "no_text"),
    ]:
        judges = install(monkeypatch, FakeJudge(auto=True))
        row = score(tmp_path, "it_coherence_math", instance, text, images=names)
        assert (row["status"], row["score"], row["reason"], row["passed"]) == ("scored", 0.0, reason, False), row
        assert judges.all_calls() == []
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, "it_coherence_math", instance, "Multi-line:\n<<A 3x3 grid\nwith the centre filled.>>", images=("gen0.png",))
    assert row["status"] == "scored" and row["evidence"]["described"] == "A 3x3 grid\nwith the centre filled."
    assert score(tmp_path, "it_coherence_math", {"pattern": ""}, MATH_TEXT)["error"]["code"] == "invalid_instance"


def test_math_judge_failures_are_error_rows(tmp_path, images, monkeypatch):
    instance = {"pattern": "A 3x3 grid with the centre filled."}
    for llm_reply, vlm_reply, code in [
        (failed(), yes(), "judge_failed"),
        ("It matches, I think.", yes(), "judge_unparseable"),
        (yes(), "Answer: Probably", "judge_unparseable"),
        (yes(), failed("HTTP 500 after 5 attempts"), "judge_failed"),
    ]:
        install(monkeypatch, FakeJudge().on(None, vlm_reply), llm=FakeJudge().on(None, llm_reply))
        row = score(tmp_path, "it_coherence_math", instance, MATH_TEXT)
        assert (row["status"], row["score"], row["error"]["code"]) == ("error", None, code), row


def test_math_end_to_end_through_the_http_judge(vlm_env, tmp_path, images, monkeypatch):
    monkeypatch.setattr(hub_module, "_HUB", None)
    vlm_env.script(by_prompt({
        "Model's description": "Both describe one filled centre square.\nAnswer: Yes",
        "draws this geometric pattern": "The centre cell is black, the rest white.\n**Answer: Yes**",
    }))  # fmt: skip
    instance = {"pattern": "A 3x3 grid with the centre filled."}
    row = score(tmp_path, "it_coherence_math", instance, "<<A 3x3 grid whose centre square is filled>>")
    assert row["status"] == "scored" and row["score"] == 1.0, row
    text_request, image_request = vlm_env.requests
    assert text_request.image_urls == [] and "centre square is filled" in text_request.prompt
    assert np.array_equal(image_request.images[0], images[-1])


# -- code -------------------------------------------------------------------------------------------
def test_code_html_rows_have_no_reference_so_only_existence_counts(tmp_path, images, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="'Yes' button"))
    similarity = use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "```html\n<button>Yes</button>\n```", instructions=mmmg_instructions)
    assert row["score"] == 1.0 and row["components"] == {"exists": 1.0}
    assert row["evidence"]["reference"] is None and similarity.pairs == []
    assert np.array_equal(judges["default"].images[0][0], images[-1])

    install(monkeypatch, FakeJudge().on("existence", no()))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "```html```", instructions=mmmg_instructions)
    assert row["score"] == 0.0 and row["components"] == {"exists": 0.0}


def test_code_svg_reference_is_rendered_and_compared(tmp_path, images, monkeypatch):
    pytest.importorskip("cairosvg")
    instance = {
        "instruction": f"### SVG Code:\n{RED_LEFT}\n### Instruction:\nWhat does this SVG code represent?",
        "object": "a red rectangle on the left half",
    }
    install(monkeypatch, FakeJudge().on("existence", yes(), target="red rectangle"))
    similarity = use_similarity(ScriptedSimilarity(0.625))
    row = score(tmp_path, "it_coherence_code", instance, "It is a red rectangle.")
    assert row["score"] == 0.625 and row["components"] == {"exists": 1.0, "similarity": 0.625}
    assert row["evidence"]["reference"] == "svg (instruction)" and row["evidence"]["backend"] == "scripted-similarity:1"
    [(generated, reference)] = similarity.pairs
    assert np.array_equal(generated, images[-1])
    assert reference.shape == (1024, 1024, 3) and reference[512, 100].tolist() == [255, 0, 0] and reference[512, 900].tolist() == [255] * 3

    # the SVG-version rows have no object: DreamSim alone; failing existence skips DreamSim
    judges = install(monkeypatch, FakeJudge())
    similarity = use_similarity(ScriptedSimilarity(0.5))
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, "A red rectangle.")
    assert row["score"] == 0.5 and row["components"] == {"similarity": 0.5} and judges.all_calls() == []
    install(monkeypatch, FakeJudge().on("existence", no()))
    similarity = use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT, "object": "a square"}, "A red rectangle.")
    assert row["score"] == 0.0 and similarity.pairs == [] and row["evidence"]["not_asked"] == ["similarity"]


def test_code_reference_image_from_the_instruction_set(tmp_path, images, monkeypatch):
    folder = tmp_path / "instructions"
    (folder / "image").mkdir(parents=True)
    reference = scene(32, 32, seed=9)
    save_png(folder / "image" / "it_coherence_code_3.png", reference)
    row = {"instruction": "What does this SVG code represent?", "ref_image_list": [3], "object": "a smiling face"}
    (folder / "it_coherence_code.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "ref_image_list": [4]}) + "\n")
    install(monkeypatch, FakeJudge().on("existence", yes()))
    similarity = use_similarity(ScriptedSimilarity(0.9))
    scored = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "A face.", instructions=folder)
    assert scored["score"] == 0.9 and np.array_equal(similarity.pairs[0][1], reference)
    assert scored["evidence"]["reference"] == "ref_image_list[0] = 3"
    missing = score(tmp_path, "it_coherence_code", "it_coherence_code/1", "A face.", instructions=folder)
    assert missing["status"] == "error" and missing["error"]["code"] == "missing_media"


def test_code_errors(tmp_path, images, monkeypatch):
    pytest.importorskip("cairosvg")
    judges = install(monkeypatch, FakeJudge(auto=True))
    xxe = '<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>'
    for instance in ({"svg": xxe, "object": "x"}, {"instruction": "Draw a cat."}, {"svg": 5, "object": "x"}):
        row = score(tmp_path, "it_coherence_code", instance, "text")
        assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", row
        assert "root:" not in row["error"]["message"]
    assert judges.all_calls() == []

    assert score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, "text", images=())["reason"] == "no_image"
    assert score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, None)["reason"] == "no_text"

    install(monkeypatch, FakeJudge().on("existence", yes()))
    use_similarity(ScriptedSimilarity(unavailable=True))
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT, "object": "x"}, "text")
    assert row["status"] == "error" and row["error"]["code"] == "model_unavailable"

    monkeypatch.setattr(reasoning, "render_svg", lambda *a, **k: (_ for _ in ()).throw(reasoning.SvgRendererUnavailable("no cairo")))
    reasoning._rendered.cache_clear()
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT.replace("red", "blue"), "object": "x"}, "text")
    assert row["error"]["code"] == "model_unavailable" and "no cairo" in row["error"]["message"]
    reasoning._rendered.cache_clear()


def test_code_external_references_in_an_inline_svg_are_refused(tmp_path, images, monkeypatch):
    pytest.importorskip("cairosvg")
    svg = f'<svg {NS} xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10"><image href="http://127.0.0.1:9/x.png" width="10" height="10"/><image xlink:href="file:///etc/passwd" width="10" height="10"/></svg>'
    install(monkeypatch, FakeJudge())
    similarity = use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", {"svg": svg}, "text")
    assert row["status"] == "scored" and row["evidence"]["reference_refused_resources"] == 2
    assert similarity.pairs[0][1].min() == 255  # a blank (white) reference: nothing was fetched


def test_code_params():
    from mmverify.tasks.catalog import TASK_REGISTRY

    params = TASK_REGISTRY.get("it_coherence_code")().params()
    assert params["render_size"] == 1024 and params["background"] == [255, 255, 255] and params["roles"] == ["default"]
    assert TASK_REGISTRY.get("it_coherence_math")().params()["roles"] == ["llm", "default"]
    assert TASK_REGISTRY.get("it_coherence_code")(background=None).params()["background"] is None
    with pytest.raises(ValueError):
        TASK_REGISTRY.get("it_coherence_code")(render_size=8)
