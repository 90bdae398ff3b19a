"""it_coherence_math and it_coherence_code on real MMMG rows and on rows shaped like the newest
published version, with a scripted judge and a scripted image-similarity backend.  The ``mmmg``
profile is compared with the re-derived published evaluator (tests/reference/mmmg_interleaved.py)
on seeded random texts, rows and judge answers."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.core.errors import ScoringError
from mmverify.models import hub as hub_module
from mmverify.models.base import ModelUnavailable
from mmverify.tasks import reasoning
from mmverify.verifiers.vlm.coherence_templates import COHERENCE_TEMPLATES
from mmverify.verifiers.vlm.parse import parse_verdict
from mmverify.verifiers.vlm.templates import CODE_CRITERIA
from tests.conftest import save_png, scene
from tests.reference import mmmg_interleaved as ref
from tests.tasks.fake_judge import FakeJudge, failed, install, learn, no, verdict, yes
from tests.vlm_server import by_prompt, vlm_env, vlm_server  # noqa: F401  (fixtures)

MATH_TEXT = "The filled square moves one step right each time.\n<<{A horizontal row of six squares, the first holding a circle, the fifth filled.}>>"
NS = 'xmlns="http://www.w3.org/2000/svg"'
RED_LEFT = f'<svg {NS} viewBox="0 0 10 10"><rect width="5" height="10" fill="red"/></svg>'


@pytest.fixture(autouse=True)
def judge_knows_the_reasoning_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted judge recognises prompts of every template; add this module's own."""
    learn(monkeypatch, {**COHERENCE_TEMPLATES, CODE_CRITERIA.id: CODE_CRITERIA})


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


def score(
    tmp_path: Path,
    task: str,
    instance: str | dict,
    text: str | None,
    images=("gen0.png", "gen1.png"),
    instructions: Path | None = None,
    profile: str = "mmmg",
) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    parts += [{"type": "image", "path": name} for name in images]
    item: dict[str, Any] = {"task": task, "parts": parts}
    item.update({"instance": instance} if isinstance(instance, dict) else {"instance_id": instance})
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions, profile=profile)
    return row


def instruction_set(tmp_path: Path, rows: list[dict], references: dict[int, np.ndarray]) -> Path:
    """A folder with it_coherence_code.jsonl holding ``rows`` and image/it_coherence_code_<k>.png."""
    folder = tmp_path / "instructions"
    (folder / "image").mkdir(parents=True, exist_ok=True)
    for k, picture in references.items():
        save_png(folder / "image" / f"it_coherence_code_{k}.png", picture)
    (folder / "it_coherence_code.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return folder


# -- math -------------------------------------------------------------------------------------------
def test_math_text_by_llm_then_last_image_by_vlm(tmp_path, images, mmmg_instructions, monkeypatch):
    llm = FakeJudge("text-llm").on("pattern_text", yes("Same row, same circle, same filled square."))
    judges = install(monkeypatch, FakeJudge("vlm").on("pattern_image", yes()), llm=llm)
    row = score(tmp_path, "it_coherence_math", "it_coherence_math/0", MATH_TEXT, instructions=mmmg_instructions)
    assert row["score"] == 1.0 and row["passed"] is True and row["verifier"] == "it_coherence_math@2:mmmg"
    assert row["components"] == {"text_match": 1.0, "image_match": 1.0}
    pattern = json.loads((mmmg_instructions / "it_coherence_math.jsonl").read_text().splitlines()[0])["pattern"]
    [text_call] = llm.calls
    assert text_call.values == {"truth": pattern, "candidate": "A horizontal row of six squares, the first holding a circle, the fifth filled."}
    assert llm.images == [[]]  # text only
    [image_call] = judges["default"].images
    assert len(image_call) == 1 and np.array_equal(image_call[0], images[-1])  # the last image
    assert [e["role"] for e in row["evidence"]["judge"]] == ["llm", "default"]
    assert [e["template"] for e in row["evidence"]["judge"]] == ["pattern_text@2", "pattern_image@2"]


def test_math_image_question_rules_out_several_patterns_and_question_marks(tmp_path, images, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("pattern_image", yes()), llm=FakeJudge().on("pattern_text", yes()))
    score(tmp_path, "it_coherence_math", {"pattern": "A 3x3 grid with the centre filled."}, "<<A 3x3 grid, centre filled>>")
    [call] = judges["default"].calls
    assert "question mark" in call.prompt and "several patterns" in call.prompt
    assert call.prompt.rstrip().endswith("`Answer: No`.")  # the verdict line is still asked for last


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
        (None, ("gen0.png",), "missing_pattern"),  # published: images alone pass the shape check
        ("Multi-line:\n<<A 3x3 grid\nwith the centre filled.>>", ("gen0.png",), "missing_pattern"),  # published: one line
    ]:
        judges = install(monkeypatch, FakeJudge(auto=True))
        row = score(tmp_path, "it_coherence_math", instance, text, images=names)
        assert (row["status"], row["score"], row["reason"], row["passed"]) == ("scored", 0.0, reason, False), row
        assert judges.all_calls() == []
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, "it_coherence_math", instance, None, images=("gen0.png",), profile="strict")
    assert (row["score"], row["reason"]) == (0.0, "no_text") and judges.all_calls() == []
    row = score(tmp_path, "it_coherence_math", instance, "Multi-line:\n<<A 3x3 grid\nwith the centre filled.>>", images=("gen0.png",), profile="strict")
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


def test_math_matches_the_reference(tmp_path, images, monkeypatch):
    rng = random.Random(23)
    pieces = ["<<", ">>", "{", "}", "\n", " ", "a row of squares", "a grid", "x", "<", ">"]
    outcomes: list[float] = []
    for _ in range(120):
        core = rng.choice(["a row of squares", "a grid", "{a grid}", "", " { } ", "a\ngrid"])
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(4))) + f"<<{core}>>" * rng.choice([0, 1, 1, 1, 2])
        text = text or "no text"
        names = rng.choice([("gen0.png",), ("gen0.png", "gen1.png"), ()])
        table = {"a row of squares": rng.random() < 0.7, "a grid": rng.random() < 0.7, "a\ngrid": rng.random() < 0.7, "": False}
        image_ok = rng.random() < 0.7

        def llm_reply(prompt: str, values: dict) -> str:
            return yes() if table.get(values["candidate"].strip("{} "), False) else no()

        install(monkeypatch, FakeJudge().on("pattern_image", yes() if image_ok else no()), llm=FakeJudge().on("pattern_text", llm_reply))
        row = score(tmp_path, "it_coherence_math", {"pattern": "a grid"}, text, images=names)
        response = text + "".join(ref.placeholder(k) for k in range(len(names)))
        read = ref.text_to_read(response, len(names), several_images=True)
        described = ref.math_description(read) if read is not None else None
        expected = 0.0 if read is None else ref.math_score(described, lambda d: table.get(d.strip("{} "), False), image_ok)
        assert row["score"] == expected, (text, names, row)
        outcomes.append(expected)
    assert outcomes.count(0.0) >= 10 and outcomes.count(1.0) >= 10


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


# -- code: the published rows -------------------------------------------------------------------------
def test_code_published_row_existence_times_dreamsim_of_the_last_image(tmp_path, images, mmmg_instructions, monkeypatch):
    first = json.loads((mmmg_instructions / "it_coherence_code.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["ref_image_list"] == [0] and "caption" not in first and first["object"] == "a woman in purple shrugging"
    reference = scene(32, 32, seed=9)
    folder = instruction_set(tmp_path, [first], {0: reference})
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="a woman in purple shrugging"))
    similarity = use_similarity(ScriptedSimilarity(0.625))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "```svg\n<svg/>\n```", instructions=folder)
    assert row["score"] == 0.625 and row["components"] == {"exists": 1.0, "similarity": 0.625}
    assert row["verifier"] == "it_coherence_code@3:mmmg" and row["evidence"]["reference"] == "ref_image_list[0] = 0"
    assert np.array_equal(judges["default"].images[0][0], images[-1])
    [(generated, seen_reference)] = similarity.pairs
    assert np.array_equal(generated, images[-1]) and np.array_equal(seen_reference, reference)

    install(monkeypatch, FakeJudge().on("existence", no()))
    similarity = use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "text", instructions=folder)
    assert row["score"] == 0.0 and row["components"] == {"exists": 0.0} and similarity.pairs == []
    assert row["evidence"]["not_asked"] == ["similarity"]


def test_code_reference_images_must_be_present(tmp_path, images, mmmg_instructions, monkeypatch):
    install(monkeypatch, FakeJudge(auto=True))
    use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "text", instructions=mmmg_instructions)
    assert row["status"] == "error" and row["error"]["code"] == "missing_media"  # the published data ships no images


# -- code: caption and criteria rows ------------------------------------------------------------------
CRITERIA_ROW = {
    "caption": "A directed graph with three nodes A, B, C and a red edge from A to C.",
    "criteria": ["There are exactly three nodes labelled A, B and C.", "An edge goes from A to C.", "That edge is red."],
    "ref_image_list": [4],
}


def test_code_criteria_rows_ask_for_a_verdict(tmp_path, images, monkeypatch):
    folder = instruction_set(tmp_path, [CRITERIA_ROW], {4: scene(32, 32, seed=4)})
    judges = install(monkeypatch, FakeJudge("vlm").on("code_criteria", verdict("PASS")))
    use_similarity(ScriptedSimilarity(0.5))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "```latex\n\\begin{tikzpicture}```", instructions=folder)
    assert row["score"] == 0.5 and row["components"] == {"criteria": 1.0, "similarity": 0.5}
    [call] = judges["default"].calls
    assert call.values == {
        "description": CRITERIA_ROW["caption"],
        "criteria": "1. There are exactly three nodes labelled A, B and C.\n2. An edge goes from A to C.\n3. That edge is red.",
    }
    assert np.array_equal(judges["default"].images[0][0], images[-1])
    [entry] = row["evidence"]["judge"]
    assert (entry["template"], entry["step"], entry["verdict"], entry["role"]) == ("code_criteria@1", "criteria", True, "default")
    assert row["evidence"]["criteria"] == CRITERIA_ROW["criteria"] and row["evidence"]["caption"] == CRITERIA_ROW["caption"]

    # the per-criterion "PASS" words of the reasoning never count: only the final verdict does
    install(monkeypatch, FakeJudge().on("code_criteria", verdict("FAIL", "Criterion 1: PASS. Criterion 2: VERDICT: PASS would need C.")))
    similarity = use_similarity(ScriptedSimilarity(0.5))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "text", instructions=folder)
    assert row["score"] == 0.0 and row["components"] == {"criteria": 0.0} and similarity.pairs == []


@pytest.mark.parametrize("reply", ["All three criteria hold.", "VERDICT: PASS or FAIL", "VERDICT: maybe", "", failed()])
def test_code_unreadable_verdicts_are_error_rows(tmp_path, images, monkeypatch, reply):
    folder = instruction_set(tmp_path, [CRITERIA_ROW], {4: scene(32, 32, seed=4)})
    install(monkeypatch, FakeJudge().on("code_criteria", reply))
    use_similarity(ScriptedSimilarity(0.5))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "text", instructions=folder)
    assert row["status"] == "error" and row["score"] is None
    assert row["error"]["code"] == ("judge_failed" if isinstance(reply, Exception) else "judge_unparseable")
    assert "criteria (code_criteria@1" in row["error"]["message"]


def test_code_caption_without_criteria_is_an_existence_question(tmp_path, images, monkeypatch):
    rows = [{"caption": "a red circle above a blue square", "ref_image_list": [2]}, {"caption": "a star", "criteria": []}]
    folder = instruction_set(tmp_path, rows, {2: scene(32, 32, seed=2)})
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="a red circle above a blue square"))
    use_similarity(ScriptedSimilarity(0.25))
    row = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "text", instructions=folder)
    assert row["score"] == 0.25 and row["components"] == {"exists": 1.0, "similarity": 0.25}
    assert judges["default"].templates_asked() == ["existence"]
    assert score(tmp_path, "it_coherence_code", "it_coherence_code/1", "text", instructions=folder)["error"]["code"] == "invalid_instance"


def test_parse_verdict():
    assert parse_verdict("Criterion 1: ... MET\n\n**VERDICT: PASS**") is True
    assert parse_verdict("Criterion 1: PASS\nCriterion 2: PASS\nVERDICT: FAIL") is False
    assert parse_verdict("verdict - pass.\nThe second criterion was close.") is True  # a note after the verdict line
    assert parse_verdict("VERDICT：FAIL") is False
    assert parse_verdict("Earlier I wrote VERDICT: PASS by mistake.\nFinal VERDICT: FAIL") is False
    for reply in ["", "PASS", "All good. VERDICT:", "VERDICT: PASS or FAIL", "VERDICT: FAIL\nVERDICT: unsure", "VERDICT: PASSED"]:
        with pytest.raises(ScoringError) as info:
            parse_verdict(reply)
        assert info.value.code == "judge_unparseable"


def test_parse_verdict_agrees_with_the_published_reading_on_well_formed_replies():
    """The published check is ``"VERDICT: PASS" in reply``; on replies that end with the asked-for
    line and say VERDICT nowhere else, both readings agree."""
    rng = random.Random(29)
    words = ["Criterion", "1:", "the", "nodes", "are", "red", "MET", "NOT", "pass", "fail", "PASS", "FAIL", "\n", "-", "**"]
    for _ in range(2000):
        reasoning = " ".join(rng.choice(words) for _ in range(rng.randrange(30)))
        value = rng.choice(["PASS", "FAIL"])
        reply = reasoning + "\n" + rng.choice(["VERDICT: {}", "**VERDICT: {}**", "VERDICT: {}\n", "VERDICT: {}."]).format(value)
        assert parse_verdict(reply) == ("VERDICT: PASS" in reply), reply


def test_code_matches_the_reference(tmp_path, images, monkeypatch):
    rng = random.Random(31)
    outcomes: list[float] = []
    for case in range(80):
        row: dict[str, Any] = {"ref_image_list": [case]}
        row[rng.choice(["caption", "object"])] = rng.choice(["a red circle", "a tree", "a graph"])
        if "caption" in row and rng.random() < 0.5:
            row["criteria"] = rng.sample(["three nodes", "a red edge", "labels A-C", "a legend"], rng.randrange(1, 4))
        folder = instruction_set(tmp_path / str(case), [row], {case: scene(16, 16, seed=case)})
        accept = {name: rng.random() < 0.7 for name in ("a red circle", "a tree", "a graph")}
        similarity = rng.choice([0.0, 0.25, 0.5, 1.0])
        names = rng.choice([("gen0.png",), ("gen0.png", "gen1.png"), ()])
        judge = (
            FakeJudge()
            .on("code_criteria", lambda prompt, values: verdict("PASS" if accept[values["description"]] else "FAIL"))
            .on("existence", lambda prompt, values: yes() if accept[values["target"]] else no())
        )
        install(monkeypatch, judge)
        use_similarity(ScriptedSimilarity(similarity))
        scored = score(tmp_path, "it_coherence_code", "it_coherence_code/0", "code", images=names, instructions=folder)
        expected = ref.code_score(row, len(names), lambda caption, criteria: accept[caption], similarity)
        assert scored["score"] == expected, (row, names, scored)
        asked = judge.templates_asked()
        assert asked in ([], ["code_criteria" if "criteria" in row else "existence"])
        outcomes.append(expected)
    assert outcomes.count(0.0) >= 10 and sum(o > 0 for o in outcomes) >= 10


# -- code: rows without a reference image (SVG code rendered here) -------------------------------------
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

    # a row with SVG code and no description: DreamSim alone; failing existence skips DreamSim
    judges = install(monkeypatch, FakeJudge())
    similarity = use_similarity(ScriptedSimilarity(0.5))
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, "A red rectangle.")
    assert row["score"] == 0.5 and row["components"] == {"similarity": 0.5} and judges.all_calls() == []
    install(monkeypatch, FakeJudge().on("existence", no()))
    similarity = use_similarity(ScriptedSimilarity())
    row = score(tmp_path, "it_coherence_code", {"svg": RED_LEFT, "caption": "a square"}, "A red rectangle.")
    assert row["score"] == 0.0 and similarity.pairs == [] and row["evidence"]["not_asked"] == ["similarity"]


def test_code_errors(tmp_path, images, monkeypatch):
    pytest.importorskip("cairosvg")
    judges = install(monkeypatch, FakeJudge(auto=True))
    xxe = '<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>'
    for instance in (
        {"svg": xxe, "object": "x"},
        {"instruction": "Draw a cat."},
        {"svg": 5, "object": "x"},
        {"svg": RED_LEFT, "criteria": ["a red rectangle"]},  # criteria need a caption to judge against
        {"svg": RED_LEFT, "caption": "x", "criteria": "not a list"},
    ):
        row = score(tmp_path, "it_coherence_code", instance, "text")
        assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", row
        assert "root:" not in row["error"]["message"]
    assert judges.all_calls() == []

    assert score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, "text", images=())["reason"] == "no_image"
    assert score(tmp_path, "it_coherence_code", {"svg": RED_LEFT}, None, profile="strict")["reason"] == "no_text"

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
    assert params["code_templates"].startswith("1:")
    assert TASK_REGISTRY.get("it_coherence_math")().params()["roles"] == ["llm", "default"]
    assert TASK_REGISTRY.get("it_coherence_code")(background=None).params()["background"] is None
    with pytest.raises(ValueError):
        TASK_REGISTRY.get("it_coherence_code")(render_size=8)


@pytest.mark.parametrize("seed", range(400))
def test_the_text_between_marks_is_what_the_expression_captures(seed):
    import re

    from mmverify.tasks.reasoning import first_between_marks

    rng = random.Random(seed)
    text = "".join(rng.choice("<<>>\na{} ") for _ in range(rng.randint(0, 30)))
    for multiline in (False, True):
        match = re.search(r"<<(.*?)>>", text, re.DOTALL if multiline else 0)
        assert first_between_marks(text, multiline) == (match.group(1) if match else None), (text, multiline)


def test_unclosed_marks_end_the_search():
    from mmverify.tasks.reasoning import first_between_marks

    assert first_between_marks("<" * 100_000, False) is None
    assert first_between_marks("<<\n" * 30_000 + "<<x>>", False) == "x"
    assert first_between_marks("<<a\n" * 3 + ">>", True) == "a\n<<a\n<<a\n"
