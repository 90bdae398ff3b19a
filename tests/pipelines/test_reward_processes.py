"""``Reward(workers=N, model_process=...)``: each call's items scored by worker processes kept
between calls (and their models computed by one model process), with the rows of one process."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import shutil
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mmverify.pipelines.model_process import ModelProcessEnded
from mmverify.pipelines.reward import Reward
from tests.pipelines.test_batched_scoring import sound_items, tiny_clap  # noqa: F401
from tests.tasks.test_sound import ESC50_TASKS
from tests.waiting import HANG_GUARD_S, wait_until


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


def test_a_cold_reward_with_workers_travels():
    reward = Reward("i_format_border", workers=2)
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.workers == 2 and clone._processes is not reward._processes and clone._processes._reward is clone


@pytest.mark.slow
def test_a_warm_reward_with_workers_travels_without_its_processes(clap_reward):
    """A copy (a pickled reward, as a data loader's worker gets one) starts a pool of its own and
    leaves the original's workers alone."""
    make, items = clap_reward
    expected = lines(make("one").rows(items))
    reward = make("warm", workers=2)
    clone = None
    try:
        assert lines(reward.rows(items)) == expected
        first = kept_workers(reward)
        clone = pickle.loads(pickle.dumps(reward))
        assert clone._processes._executor is None and clone._processes._reward is clone
        assert lines(clone.rows(items)) == expected
        assert not set(kept_workers(clone)) & set(first)
        assert kept_workers(reward) == first and all(process.is_alive() for process in first)
        assert lines(reward.rows(items)) == expected and kept_workers(reward) == first
    finally:
        reward.close()
        if clone is not None:
            clone.close()


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
    from mmverify.pipelines import process_executor as executor_module

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

        submit = executor_module.ProcessWorker.submit

        def submit_after_a_kill(self, batch):  # the model process ends while the call's first batch goes out
            for models in model_processes():
                models.kill()
                models.join()
            return submit(self, batch)

        monkeypatch.setattr(executor_module.ProcessWorker, "submit", submit_after_a_kill)
        with pytest.raises(ModelProcessEnded, match="the next call starts new worker processes"):
            reward.rows(items)
        monkeypatch.setattr(executor_module.ProcessWorker, "submit", submit)
        assert lines(reward.rows(items)) == expected
    finally:
        reward.close()
    assert not model_processes()


def border_pairs(count: int) -> list[tuple[dict, list]]:
    from tests.pipelines.conftest import bordered

    return [({"color": color}, [bordered(color, seed=i)]) for i, color in zip(range(count), ["green", "red"] * count)]


def spawned_since(before: set) -> list:
    return [child for child in multiprocessing.active_children() if child not in before]


FORKED = """
import json, multiprocessing, sys
from mmverify.pipelines.reward import Reward
from tests.pipelines.test_reward_processes import border_pairs, kept_workers, lines

if __name__ == "__main__":
    pairs = border_pairs(6)
    expected = lines(Reward("i_format_border")(pairs).rows)
    reward = Reward("i_format_border", workers=2)
    first = lines(reward(pairs).rows)
    workers = kept_workers(reward)
    fork = multiprocessing.get_context("fork")
    verdicts = fork.Queue()

    def in_the_child():
        try:
            verdicts.put(lines(reward(pairs).rows) == expected)
        finally:
            reward.close()  # the child's own workers; the parent's are not its to stop

    child = fork.Process(target=in_the_child)
    child.start()
    in_child = verdicts.get(timeout=60)
    child.join(60)
    untouched = all(worker.is_alive() for worker in workers)
    again = lines(reward(pairs).rows)
    print(json.dumps({"first": first == expected, "in_child": in_child, "child_exit": child.exitcode,
                      "untouched": untouched, "again": again == expected, "same_workers": kept_workers(reward) == workers}))
    reward.close()
"""


@pytest.mark.slow
def test_a_reward_forked_into_another_process_starts_its_own_workers_there(tmp_path):
    """In a fresh interpreter (a fork of the test process would inherit its other tests' threads)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=5 * HANG_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"first": True, "in_child": True, "child_exit": 0, "untouched": True, "again": True, "same_workers": True}


@pytest.mark.slow
def test_closing_a_reward_while_a_call_runs_ends_what_that_call_started():
    import threading

    from mmverify.pipelines import reward_processes

    pairs = border_pairs(40)
    reward = Reward("i_format_border", workers=2)
    made, go = threading.Event(), threading.Event()
    making = reward_processes.RewardProcesses._pool

    def pool_then_wait(self):  # type: ignore[no-untyped-def]
        executor = making(self)
        made.set()
        go.wait(HANG_GUARD_S)
        return executor

    before = set(multiprocessing.active_children())
    reward._processes._pool = types.MethodType(pool_then_wait, reward._processes)  # type: ignore[method-assign]
    with ThreadPoolExecutor(1) as caller:
        call = caller.submit(reward, pairs)
        assert made.wait(HANG_GUARD_S)
        reward.close()  # before the call's pool has started a worker
        go.set()
        assert all(row["status"] == "scored" for row in call.result(HANG_GUARD_S).rows)
    assert wait_until(lambda: not [child for child in spawned_since(before) if child.is_alive()])
    assert reward._processes._executor is None
