"""``Reward(workers=N, model_process=...)``: each call's items scored by worker processes kept
between calls (and their models computed by one model process), with the rows of one process."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import shutil
from pathlib import Path

import pytest

from mmverify.pipelines.model_process import ModelProcessEnded
from mmverify.pipelines.reward import Reward
from tests.pipelines.test_batched_scoring import sound_items, tiny_clap  # noqa: F401
from tests.tasks.test_sound import ESC50_TASKS


@pytest.fixture
def clap_reward(tmp_path, tiny_clap, mmmg_instructions):  # noqa: F811
    """A maker of CLAP rewards over every ESC-50 task, and items of each task."""
    instructions = tmp_path / "instructions"
    instructions.mkdir()
    for task in ESC50_TASKS:
        shutil.copy(mmmg_instructions / f"{task}.jsonl", instructions / f"{task}.jsonl")
    items, tree = sound_items(tmp_path / "sound", mmmg_instructions, per_task=2)

    def make(name: str, **options: object) -> Reward:
        return Reward(
            models=f"audio_text=clap-hf@{tiny_clap}?batch_size=4", references=f"esc50={tree}", instructions=instructions,
            cache_dir=tmp_path / f"cache-{name}", env={"MMVERIFY_NO_OUTPUT_CACHE": "1"}, in_flight=3, **options,  # type: ignore[arg-type]
        )  # fmt: skip

    return make, items


def lines(rows: list[dict]) -> list[str]:
    return [json.dumps(row) for row in rows]


def kept_workers(reward: Reward) -> list:
    executor = reward._processes._executor
    assert executor is not None and executor._pool is not None
    return [worker.process for worker in executor._pool._kept or []]


def test_workers_and_a_model_process_are_asked_for_with_sense():
    with pytest.raises(ValueError, match="workers must be"):
        Reward("a_sound_cot", workers=0)
    with pytest.raises(ValueError, match="serves worker processes"):
        Reward("a_sound_cot", model_process=True)


def test_a_reward_with_workers_travels_without_its_processes():
    reward = Reward("i_format_border", workers=2)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.workers == 2 and clone._processes is not reward._processes and clone._processes._reward is clone


@pytest.mark.slow
def test_worker_processes_kept_between_calls_give_the_rows_of_one_process(clap_reward):
    make, items = clap_reward
    one = make("one")
    expected, reversed_order, alone = lines(one.rows(items)), lines(one.rows(items[::-1])), lines(one.rows(items[:1]))
    assert all(json.loads(row)["status"] == "scored" for row in expected) and len(expected) == 2 * len(ESC50_TASKS)
    for options in ({"workers": 2}, {"workers": 2, "model_process": True, "decode_processes": 1}):
        reward = make("-".join(map(str, options.values())), **options)
        try:
            assert lines(reward.rows(items)) == expected
            first = kept_workers(reward)
            assert len(first) == 2 and all(process.is_alive() for process in first)
            assert lines(reward.rows(items[::-1])) == reversed_order  # by the same workers, warm
            assert kept_workers(reward) == first
            first[0].kill()  # between calls: replaced before the next call, whose lone item it would have scored
            first[0].join()
            assert lines(reward.rows(items[:1])) == alone and first[0] not in kept_workers(reward)
        finally:
            reward.close()
        assert not any(process.is_alive() for process in first)
        assert not [child for child in multiprocessing.active_children() if child.name == "mmverify-models"]


def model_processes() -> list:
    return [child for child in multiprocessing.active_children() if child.name == "mmverify-models"]


@pytest.mark.slow
def test_processes_that_end_between_calls_are_replaced_and_one_lost_in_a_call_fails_that_call_only(clap_reward, monkeypatch):
    from mmverify.pipelines import pool as pool_module

    make, items = clap_reward
    expected = lines(make("one").rows(items))
    reward = make("served", workers=2, model_process=True)
    try:
        assert lines(reward.rows(items)) == expected
        [first] = model_processes()
        first.kill()  # between calls: its workers end too, and the next call starts all anew
        first.join()
        assert lines(reward.rows(items)) == expected
        [second] = model_processes()
        assert second.pid != first.pid

        submit = pool_module.ProcessWorker.submit

        def submit_after_a_kill(self, batch):  # the model process ends while the call's first batch goes out
            for models in model_processes():
                models.kill()
                models.join()
            return submit(self, batch)

        monkeypatch.setattr(pool_module.ProcessWorker, "submit", submit_after_a_kill)
        with pytest.raises(ModelProcessEnded, match="the next call starts new worker processes"):
            reward.rows(items)
        monkeypatch.setattr(pool_module.ProcessWorker, "submit", submit)
        assert lines(reward.rows(items)) == expected
    finally:
        reward.close()
    assert not model_processes()
