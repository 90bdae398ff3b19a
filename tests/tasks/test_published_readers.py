"""The ``mmmg`` profile reads judge replies as the published evaluator did: differential tests from the
RAW reply text to the row's verdict.

A scripted judge returns a raw reply (seeded random ones, and the counter-examples that showed the
old end-anchored readers disagreeing with the published code); the task scores it through the
public API, and the verdict must be the one the published code reaches from the same reply, as
re-derived in tests/reference/mmmg_image.py and tests/reference/mmmg_interleaved.py (independently
of mmverify's readers).  The ``strict`` profile keeps its end-anchored readers; a few tests pin the
difference down.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from mmverify.models import hub as hub_module
from tests.conftest import save_png, scene
from tests.reference import mmmg_image as ref_image
from tests.reference import mmmg_interleaved as ref_inter
from tests.tasks.coherence_support import IMAGE, judge_knows_coherence_templates, score  # noqa: F401  (autouse)
from tests.tasks.fake_judge import FakeJudge, install, yes

SEEDS = range(120)


@pytest.fixture
def image(tmp_path: Path) -> np.ndarray:
    picture = scene(96, 128, seed=11)
    save_png(tmp_path / "gen.png", picture)
    return picture


def run(
    tmp_path: Path, task: str, instance: dict | str, text: str | None = None, *, profile: str = "mmmg", instructions: Path | None = None
) -> dict:
    """Score one image, then ``text`` (the coherence tasks read the text after the image)."""
    return score(tmp_path, instructions, task, instance, text, profile=profile)


# -- random raw replies --------------------------------------------------------------------------------
WORDS = ["there", "are", "several", "objects", "in", "the", "picture", "clearly", "visible", "left", "right", "I", "see"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))).capitalize() + "."


def option_reply(rng: random.Random, letters: str, likely: str | None = None) -> str:
    """A reply that names an option somewhere, in one of the shapes judges produce (and some they
    should not): quoted options in the reasoning, markdown, other spacing or case, several markers.
    ``likely`` (the right answer) is picked half the time, so both verdicts are exercised."""

    def pick() -> str:
        return likely if likely and rng.random() < 0.5 else rng.choice(letters + rng.choice(["", "G", "Z"]))

    finals = [
        "Answer: {L}", "Answer: {L}.", "Answer:{L}", "Answer:  {L}", "Answer:\n{L}", "**Answer:** {L}", "**Answer: {L}**",
        "answer: {L}", "Answer: {l}", "ANSWER: {L}", "Final answer: {L}", "Answer: ({L})", "{L}", "The answer is {L}.",
        "Answer: [{L}]", "Answer - {L}",
    ]  # fmt: skip
    lines = [sentence(rng) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.35:  # the reasoning quotes an option before the verdict
        lines.insert(rng.randint(0, len(lines)), rng.choice(["Answer: {L} would be wrong here.", "Option {L} fits. Answer: {L}?",
                                                            "I considered answer: {L} first."]).replace("{L}", pick()))
    final = pick()
    lines.append(rng.choice(finals).replace("{L}", final).replace("{l}", final.lower()))
    return rng.choice(["\n", " ", "\n\n"]).join(lines)


# -- i_object_count ------------------------------------------------------------------------------------
COUNTER_EXAMPLES_COUNT = [
    (3, "I count three cats.\nAnswer: B"),  # the option naming 3 (f7de1cf7); 0473209a wanted A
    (4, "I count four cats.\nAnswer: C"),
    (7, "Seven windmills.\nAnswer: B"),  # published layout above 6: B = 7
    (3, "Answer: A would mean fewer than three.\nAnswer: B"),  # the first marker decides: A
    (5, "There are five.\n**Answer:** D"),  # markdown: no marker fits -> wrong
    (6, "answer: E"),  # case matters
    (8, "Answer:\tC"),  # any whitespace after the colon
]


def count_case(rng: random.Random) -> tuple[int, str]:
    count = rng.randint(3, 10)
    return count, option_reply(rng, "ABCDEF", likely="BCDE"[(count - 3) % 4])


@pytest.mark.parametrize("case", [*COUNTER_EXAMPLES_COUNT, *(count_case(random.Random(s)) for s in SEEDS)])
def test_object_count_verdict_from_the_raw_reply(tmp_path, image, monkeypatch, case):
    count, reply = case
    judges = install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, "i_object_count", {"object": "cats", "count": count})
    assert row["status"] == "scored", row
    assert row["passed"] is ref_image.count_reply_passes(count, reply), (count, reply, row["evidence"]["answered_letters"])
    assert judges["default"].templates_asked() == ["count" if count <= 6 else "count_above_six"]


def test_object_count_strict_reads_the_final_letter(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on(None, "Answer: A would mean fewer than three.\nAnswer: B"))
    assert run(tmp_path, "i_object_count", {"object": "cats", "count": 3}, profile="strict")["passed"] is True
    assert run(tmp_path, "i_object_count", {"object": "cats", "count": 3})["passed"] is False


# -- it_coherence_count ----------------------------------------------------------------------------------
COUNTER_EXAMPLES_COHERENCE_COUNT = [
    (4, "There are four benches in the park scene.\nAnswer: C"),  # published: "t" is no count
    (4, "C"),
    (3, "Based on the image, two benches.\nAnswer: A"),  # published: "b" confirms 3
    (5, "**D**"),
    (6, "  e. six"),
    (5, "   "),  # published: crash -> error row
]


def coherence_count_reply(rng: random.Random) -> str:
    shapes = [
        lambda: option_reply(rng, "ABCDEF", "BCDE"[rng.randint(0, 3)]),
        lambda: rng.choice("ABCDEFabcdef"),
        lambda: rng.choice("ABCDEF") + rng.choice([".", ")", ". four", "\n\nbecause " + sentence(rng)]),
        lambda: rng.choice(["Based on", "Counting", "Every", "During", "Exactly"]) + " " + sentence(rng),
        lambda: rng.choice(["", " ", "\n"]) + rng.choice("bcde") + " " + sentence(rng),
    ]
    return rng.choice(shapes)()


@pytest.mark.parametrize(
    "case",
    [*COUNTER_EXAMPLES_COHERENCE_COUNT, *((random.Random(s).randint(3, 6), coherence_count_reply(random.Random(s))) for s in SEEDS)],
)
def test_coherence_count_verdict_from_the_raw_reply(tmp_path, image, monkeypatch, case):
    claim, reply = case
    install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, "it_coherence_count", {"object": "benches"}, f"<count>{claim}</count>")
    text = ref_inter.text_to_read(f"{IMAGE}<count>{claim}</count>", 1, several_images=False)
    assert ref_inter.count_claim(text) == claim
    published = ref_inter.count_reply_passes(claim, reply)
    if published is None:
        assert row["status"] == "error" and row["error"]["code"] == "judge_unparseable", row
    else:
        assert row["status"] == "scored" and row["score"] == float(published), (claim, reply, row)


# -- positions -------------------------------------------------------------------------------------------
COUNTER_EXAMPLES_POSITION = [
    "The cat is on the left.\n**Answer:** A",  # markdown: the published reader finds no option
    "Answer:A",
    "answer: A",  # "nswer: A" matches
    "Answer: B would mean right, but no.\nAnswer: A",
]


@pytest.mark.parametrize("reply", [*COUNTER_EXAMPLES_POSITION, *(option_reply(random.Random(s), "ABC", "A") for s in SEEDS)])
def test_relative_position_verdict_from_the_raw_reply(tmp_path, image, monkeypatch, reply):
    install(monkeypatch, FakeJudge().on("existence", yes()).on(None, reply))
    row = run(tmp_path, "i_spacial_relative", {"constraint": [["cat", "dog", "left"]]})
    expected = float(ref_image.relative_score(True, ref_image.first_option(reply, "ABC"), "left"))
    assert row["status"] == "scored" and row["score"] == expected, (reply, row["evidence"]["answered"])


@pytest.mark.parametrize("reply", [*COUNTER_EXAMPLES_POSITION, *(option_reply(random.Random(s), "ABCDE", "A") for s in SEEDS)])
def test_absolute_position_verdict_from_the_raw_reply(tmp_path, image, monkeypatch, reply):
    install(monkeypatch, FakeJudge().on("existence", yes()).on(None, reply))
    row = run(tmp_path, "i_spacial_absolute", {"constraint": [["cat", "bottom left"]]})
    expected = ref_image.absolute_score([True], [ref_image.first_option(reply, "ABCDE")], ["bottom left"])
    assert row["status"] == "scored" and row["score"] == expected, (reply, row["evidence"]["answered"])


@pytest.mark.parametrize("task", ["it_coherence_spacial_relative", "it_coherence_spacial_absolute"])
@pytest.mark.parametrize("seed", range(60))
def test_coherence_position_verdicts_from_the_raw_replies(tmp_path, image, monkeypatch, task, seed):
    rng = random.Random(seed)
    letters = "ABC" if task.endswith("relative") else "ABCDE"
    claimed = [rng.choice(letters[:3] if task.endswith("relative") else "ABCD") for _ in range(2)]
    replies = [COUNTER_EXAMPLES_POSITION[seed % 4] if seed < 8 else option_reply(rng, letters, claim) for claim in claimed]
    instance = {"object": [["cat", "dog"], ["cup", "book"]]} if task.endswith("relative") else {"object": ["cat", "dog"]}
    judge = FakeJudge().on("existence", yes())
    if task.endswith("relative"):
        judge.on("relative_horizontal", replies[0]).on("relative_vertical", replies[1])
    else:
        judge.on("absolute", replies[0], target="cat").on("absolute", replies[1], target="dog")
    install(monkeypatch, judge)
    row = run(tmp_path, task, instance, json.dumps(claimed))
    answers = [ref_image.first_option(reply, letters) for reply in replies]
    # the published code asks both position questions once the gates pass; a product of the two
    expected = ref_inter.positions_score([True, True], answers, claimed)
    assert row["status"] == "scored" and row["score"] == expected, (replies, claimed, row["evidence"])


# -- OCR lists -------------------------------------------------------------------------------------------
TEXT_WORDS = ["OPEN", "daily", "fresh", "bread", "Grand", "Cafe", "sale", "today", "only", "hello", "world"]


def ocr_reply(rng: random.Random, pieces: list[str]) -> str:
    other = [rng.choice(TEXT_WORDS) for _ in range(rng.randint(0, 2))]
    shapes = [
        lambda: f"{sentence(rng)}\n{json.dumps(pieces)}",
        lambda: f"The text reads {json.dumps(pieces)}.",
        lambda: "```json\n" + json.dumps(pieces, indent=2) + "\n```",  # over several lines (one line when empty)
        lambda: f"{sentence(rng)} [see the sign]\n{json.dumps(pieces)}",  # a bracket in the reasoning
        lambda: f"{json.dumps(other)}\nCorrected:\n{json.dumps(pieces)}",  # the first list is not the last
        lambda: "[" + ", ".join(f"'{p}'" for p in pieces) + "]",  # Python quotes: not JSON
        lambda: sentence(rng),  # no list at all
        lambda: f"{sentence(rng)}\n{json.dumps(pieces)}\n{sentence(rng)}",
    ]
    return rng.choice(shapes)()


def ocr_case(seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    reference = " ".join(rng.choice(TEXT_WORDS) for _ in range(rng.randint(1, 4)))
    pieces = reference.split() if rng.random() < 0.6 else [rng.choice(TEXT_WORDS) for _ in range(rng.randint(0, 3))]
    if pieces and rng.random() < 0.5:
        pieces = [" ".join(pieces)]
    return reference, ocr_reply(rng, pieces)


COUNTER_EXAMPLES_OCR = [
    ("hello world", 'The sign reads:\n```json\n[\n  "hello",\n  "world"\n]\n```'),  # the reviewer's: published reads []
    ("hello world", 'Candidates ["helo"]\nFinal: ["hello", "world"]'),  # the first list wins
    ("hello world", "['hello', 'world']"),  # not JSON: published reads []
]
OCR_CASES = [*COUNTER_EXAMPLES_OCR, *(ocr_case(s) for s in SEEDS)]


def assert_published_reading(row: dict, reference: str, reply: str) -> None:
    reading = ref_image.first_list(reply)
    assert row["status"] == "scored" and row["evidence"]["reading"] == reading, (reply, row)
    assert row["score"] == pytest.approx(ref_image.ocr_score([reference], [reading]), abs=1e-12), (reference, reply)


@pytest.mark.parametrize("case", OCR_CASES)
def test_ocr_reading_from_the_raw_reply(tmp_path, image, monkeypatch, case):
    reference, reply = case
    install(monkeypatch, FakeJudge().on(None, reply))
    assert_published_reading(run(tmp_path, "i_ocr", {"object": "the sign", "text": reference}), reference, reply)


@pytest.mark.parametrize("case", OCR_CASES[:60])
def test_german_ocr_reading_from_the_raw_reply(tmp_path, image, monkeypatch, case):
    reference, reply = case
    install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, "i_ocr_multi_lingual", {"object": "the sign", "text": reference, "language": "German"})
    assert_published_reading(row, reference, reply)


@pytest.mark.parametrize("case", OCR_CASES[:60])
def test_coherence_ocr_reading_from_the_raw_reply(tmp_path, image, monkeypatch, case):
    _, reply = case
    claim = "Grand opening sale today only"
    install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, "it_coherence_ocr", {"object": "the sign"}, f"<text>{claim}</text>")
    assert ref_inter.ocr_claim(ref_inter.text_to_read(f"{IMAGE}<text>{claim}</text>", 1, False)) == claim
    reading = ref_image.first_list(reply)
    assert row["status"] == "scored" and row["evidence"]["reading"] == reading, (reply, row)
    assert row["score"] == pytest.approx(ref_inter.ocr_score(claim, reading), abs=1e-12)


def edit_instructions(tmp_path: Path, task: str, source: np.ndarray, text: str) -> Path:
    folder = tmp_path / "instructions"
    (folder / "image").mkdir(parents=True, exist_ok=True)
    save_png(folder / "image" / f"{task}_0.png", source)
    (folder / f"{task}.jsonl").write_text(json.dumps({"text": text, "bbox": [20, 20, 60, 50], "image_list": [0]}) + "\n")
    return folder


@pytest.mark.parametrize("task", ["i_edit_text_add", "i_edit_text_alter"])
@pytest.mark.parametrize("case", OCR_CASES[:40])
def test_text_edit_reading_from_the_raw_reply(tmp_path, image, monkeypatch, task, case):
    reference, reply = case
    folder = edit_instructions(tmp_path, task, image, reference)  # the generation is the source: SSIM 1
    install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, task, f"{task}/0", instructions=folder)
    assert row["components"]["ssim_outside"] == pytest.approx(1.0)
    assert_published_reading(row, reference, reply)


def test_strict_ocr_reads_the_last_list_across_lines(tmp_path, image, monkeypatch):
    reference, reply = COUNTER_EXAMPLES_OCR[0]
    install(monkeypatch, FakeJudge().on(None, reply))
    row = run(tmp_path, "i_ocr", {"object": "the sign", "text": reference}, profile="strict")
    assert row["evidence"]["reading"] == ["hello", "world"] and row["score"] == 1.0
    assert run(tmp_path, "i_ocr", {"object": "the sign", "text": reference})["score"] == 0.0


# -- it_coherence_code: images alone -----------------------------------------------------------------------
class FixedSimilarity:
    name = "fixed-similarity"
    fingerprint = "fixed-similarity:1"

    def ensure_loaded(self) -> None:
        pass

    def similarity(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        return [0.625 for _ in pairs]


@pytest.mark.parametrize("verdict", [True, False])
def test_code_response_of_images_only_is_scored_in_mmmg(tmp_path, image, monkeypatch, verdict):
    folder = tmp_path / "instructions"
    (folder / "image").mkdir(parents=True)
    save_png(folder / "image" / "it_coherence_code_0.png", scene(32, 32, seed=9))
    row_data = {"object": "a red square", "ref_image_list": [0]}
    (folder / "it_coherence_code.jsonl").write_text(json.dumps(row_data) + "\n")
    reply = yes() if verdict else "It shows a blue circle.\nAnswer: No"
    install(monkeypatch, FakeJudge().on(None, reply))
    hub_module.get_hub()._instances["image_similarity"] = FixedSimilarity()
    row = run(tmp_path, "it_coherence_code", "it_coherence_code/0", instructions=folder)
    assert ref_inter.text_to_read(IMAGE, 1, several_images=True) == ""  # the published shape check passes
    expected = ref_inter.code_score(row_data, 1, lambda caption, criteria: verdict, 0.625)
    assert (row["status"], row["score"]) == ("scored", expected), row
    strict = run(tmp_path, "it_coherence_code", "it_coherence_code/0", instructions=folder, profile="strict")
    assert (strict["score"], strict["reason"]) == (0.0, "no_text")
