"""Items scored together -- their model forwards merged into shared batches, their media decoded in
their threads or in decoding processes -- give the same bytes as items scored one at a time, for
every kind of model task, with error rows in place."""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.core.decoding import DecodePool
from mmverify.models.clap_hf import HFClap
from mmverify.models.whisper import HFWhisper
from mmverify.references import sets
from tests.conftest import espeak
from tests.tasks.speech_task_fixtures import SPEECH_TASKS, speech_instructions, tiny_models, use_models  # noqa: F401
from tests.tasks.test_sound import ESC50_TASKS, esc50_tree, instruction_rows, noise, refs, tone, write
from tests.models.test_clap import build_tiny_clap
from tests.vlm_server import vlm_env, vlm_server  # noqa: F401

pytestmark = pytest.mark.slow
SR = 22_050


@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("tiny-clap"))


def sound_items(root: Path, instructions: Path, per_task: int) -> tuple[list[dict], Path]:
    """Items of every ESC-50 task on generated clips, and an ESC-50 tree for the classes they name."""
    items, classes = [], set()
    rng = np.random.default_rng(0)
    for task, fields in ESC50_TASKS.items():
        for index, row in enumerate(instruction_rows(instructions, task)[:per_task]):
            classes.update(row[f] for f in fields if row.get(f))
            clip = np.concatenate([tone(3, float(rng.uniform(200, 900)), seed=index), np.zeros(SR, np.float32), noise(3, seed=index)])
            path = write(root / f"{task}_{index}.wav", clip)
            items.append({"task": task, "instance_id": f"{task}/{index}", "parts": [{"type": "audio", "path": str(path)}]})
    tree = esc50_tree(root / "ESC-50", {c: refs(tone(2, 150 + 37 * i, seed=i), copies=2, unrelated=1) for i, c in enumerate(sorted(classes))})
    return items, tree


def test_batched_rows_are_byte_identical_to_one_by_one(tmp_path, monkeypatch, tiny_models, tiny_clap, speech_instructions, mmmg_instructions):
    instructions = tmp_path / "instructions"
    shutil.copytree(speech_instructions, instructions)
    for task in ESC50_TASKS:
        shutil.copy(mmmg_instructions / f"{task}.jsonl", instructions / f"{task}.jsonl")
    sound, tree = sound_items(tmp_path / "sound", mmmg_instructions, per_task=3)
    voices = [tmp_path / "speech0.wav", tmp_path / "speech1.wav"]
    espeak("The quick brown fox jumps over the lazy dog.", voices[0], voice="en-us+m3")
    espeak("She sells sea shells by the shore.", voices[1], voice="en+f2")
    speech = [
        {"task": task, "instance_id": f"{task}/{i}", "parts": [{"type": "audio", "path": str(voices[i])}]}
        for task in SPEECH_TASKS if task != "a_consistency_conversation" for i in range(2)
    ]  # fmt: skip
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot really audio")
    items = sound[:4] + [{**sound[0], "parts": [{"type": "audio", "path": str(broken)}]}] + sound[4:] + speech
    # interleave tasks so that requests of different backends and kinds meet in one round
    items = items[::2] + items[1::2]

    calls = {"clap": 0, "whisper": 0, "decoding processes": 0}
    for cls, name, method in ((HFClap, "clap", "_launch_audio"), (HFWhisper, "whisper", "_decode"), (DecodePool, "decoding processes", "clip")):
        original = getattr(cls, method)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, method, counted)
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")  # every run computes every embedding and transcript
    monkeypatch.setenv(sets.ENV_VAR, f"esc50={tree}")
    runs, counts = {}, {}
    for in_flight, decode_processes in ((1, 0), (6, 0), (6, 2)):
        sets.clear_memo()
        use_models(monkeypatch, tmp_path / "cache", f"{tiny_models},audio_text=clap-hf@{tiny_clap}?batch_size=4")
        score_items(items[:1], base_dir=tmp_path, instructions=instructions)  # references indexed and models loaded
        before = dict(calls)
        rows = score_items(items, base_dir=tmp_path, instructions=instructions, in_flight=in_flight, decode_processes=decode_processes)
        runs[in_flight, decode_processes] = [json.dumps(row, sort_keys=False) for row in rows]
        counts[in_flight, decode_processes] = {name: calls[name] - before[name] for name in calls}

    one_by_one, together, decoded_apart = runs[1, 0], runs[6, 0], runs[6, 2]
    statuses = [json.loads(line)["status"] for line in one_by_one]
    errors = [json.loads(line)["error"] for line in one_by_one if json.loads(line)["status"] == "error"]
    assert statuses.count("scored") >= len(items) - 3 and "error" in statuses, errors  # the broken clip, at least
    assert together == one_by_one
    assert decoded_apart == one_by_one  # media decoded in processes: the same arrays, the same rows
    # every clip but those of each task's first item (scored alone, as a task's first use is, in
    # its own thread; the first item's task was warmed before) went through them, and only there
    cold = len({item["task"] for item in items}) - 1
    assert counts[6, 2]["decoding processes"] >= len(items) - cold and counts[6, 0]["decoding processes"] == 0, counts
    # scored together, the same clips and pieces went through fewer (fuller) model batches
    assert counts[6, 0]["clap"] < counts[1, 0]["clap"] and counts[6, 0]["whisper"] < counts[1, 0]["whisper"], counts


def test_judged_items_in_flight_ask_concurrently_and_score_the_same_bytes(tmp_path, vlm_env, mmmg_instructions):
    """Judge questions of the items in flight go out together; each reply depends only on its own
    question and image, so the rows equal those of one item at a time."""
    from PIL import Image

    from tests.waiting import wait_until

    def reply(request):  # bright images hold what is asked about, dark ones do not
        return "Looking at it.\nAnswer: Yes" if request.images and request.images[-1].mean() > 100 else "Hmm.\nAnswer: No"

    vlm_env.script(reply)
    items = []
    for task in ("i_object_attribute", "i_object_cot", "i_relation_two", "i_object_include"):
        for index in range(3):
            path = tmp_path / f"{task}_{index}.png"
            Image.new("RGB", (48, 48), (40 + 90 * index,) * 3).save(path)
            items.append({"task": task, "instance_id": f"{task}/{index}", "parts": [{"type": "image", "path": str(path)}]})
    rows = {}
    for in_flight in (1, 6):
        vlm_env.reset()
        os.environ["MMVERIFY_VLM_CACHE"] = str(tmp_path / f"judge-{in_flight}.sqlite")  # every question asked anew
        if in_flight > 1:  # every task was built by the first run, so no item is scored alone under the hold
            vlm_env.hold()
        with ThreadPoolExecutor(1) as pool:
            run = pool.submit(score_items, items, base_dir=tmp_path, instructions=mmmg_instructions, in_flight=in_flight)
            if in_flight > 1:
                wait_until(lambda: vlm_env.held >= 2, message="items in flight did not ask their judge together")
                vlm_env.open()
            rows[in_flight] = [json.dumps(row) for row in run.result()]
    assert rows[6] == rows[1]
    statuses = {json.loads(row)["status"] for row in rows[1]}
    assert statuses == {"scored"}, [json.loads(r)["error"] for r in rows[1] if json.loads(r)["error"]]
