"""Several rewards in one process: each keeps its own models, and scoring together stays live when
the settings change between calls."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from mmverify.models import hub as hub_module
from mmverify.pipelines.reward import Reward
from tests.models.test_clap import build_tiny_clap
from tests.tasks.test_sound import esc50_tree, noise, refs, tone, write


def test_alternating_rewards_take_back_their_own_hub():
    """Each reward installs its settings when called; the hub of the settings it replaces is
    parked, models loaded, and comes back when those settings do -- up to PARKED_HUBS of them."""
    count = hub_module.PARKED_HUBS + 2
    rewards = [Reward("i_structure", env={"MMVERIFY_TEST_SETTING": str(n)}) for n in range(count)]
    answer = [({"order": ["t"]}, ["some text"])]
    hubs = []
    for reward in rewards[: hub_module.PARKED_HUBS + 1]:
        reward(answer)
        hubs.append(hub_module.get_hub())
    assert len({id(hub) for hub in hubs}) == len(hubs)
    for _ in range(2):
        for reward, hub in zip(rewards, hubs):
            reward(answer)
            assert hub_module.get_hub() is hub
    rewards[-1](answer)  # one settings more than can be kept: the least recently used hub goes
    hub_module.get_hub()
    rewards[0](answer)
    assert hub_module.get_hub() is not hubs[0]


def test_rewards_that_differ_only_in_references_or_judges_share_one_hub(tmp_path: Path):
    """Reference folders and judge settings are read elsewhere, so their models are loaded once."""
    first = Reward("i_structure", references=[f"esc50={tmp_path / 'a'}"])
    hub = hub_module.get_hub()
    Reward("i_structure", references=[f"esc50={tmp_path / 'b'}"], env={"MMVERIFY_VLM_MODEL": "judge-x"})
    assert hub_module.get_hub() is hub
    Reward("i_structure", models=["beat_tracker=librosa-beats"])
    assert hub_module.get_hub() is not hub
    first([({"order": ["t"]}, ["text"])])
    assert hub_module.get_hub() is hub


def test_a_hub_is_parked_under_the_settings_it_was_built_with(monkeypatch, tmp_path: Path):
    """Settings read from the environment can change under a built hub; leaving an installed
    context must then give a hub of the environment's settings now, not the stale one back."""
    from mmverify.pipelines.context import ScoringContext, installed

    monkeypatch.setenv("MMVERIFY_MODELS", f"audio_text=clap-hf@{tmp_path / 'a'}")
    stale = hub_module.get_hub()
    monkeypatch.setenv("MMVERIFY_MODELS", f"audio_text=clap-hf@{tmp_path / 'b'}")
    with installed(ScoringContext(models=f"audio_text=clap-hf@{tmp_path / 'c'}")):
        assert hub_module.get_hub().overrides["audio_text"][1].endswith("c")
    assert hub_module.get_hub() is not stale
    assert hub_module.get_hub().overrides["audio_text"][1].endswith("b")


@pytest.mark.slow
def test_scoring_together_under_new_settings_indexes_references_and_scores_every_item(tmp_path: Path):
    """The CLAP task was first used by another reward, so it is built; under the new settings its
    reference index must be built again, on a batch shape (16) that the 8 references leave partly
    empty, while other items of the batch wait for that index.  Every item is scored, with the
    rows of scoring one by one."""
    tiny_clap = build_tiny_clap(tmp_path / "clap")
    tree = esc50_tree(tmp_path / "ESC-50", {
        "dog": refs(tone(1, 300, seed=1), copies=3, unrelated=1),
        "rain": refs(noise(1, seed=2), copies=3, unrelated=1),
    })  # fmt: skip
    items = []
    for index in range(6):
        clip = tone(1, 250 + 40 * index, seed=index) if index % 2 else noise(1, seed=10 + index)
        path = write(tmp_path / f"clip{index}.wav", clip)
        items.append({"task": "a_sound_cot", "instance": {"target": ("dog", "rain")[index % 2]}, "parts": [{"type": "audio", "path": str(path)}]})
    env = {"MMVERIFY_REFERENCES": f"esc50={tree}", "MMVERIFY_NO_OUTPUT_CACHE": "1"}

    def reward(batch_size: int, in_flight: int, decode_processes: int = 0) -> Reward:
        models = f"audio_text=clap-hf@{tiny_clap}?batch_size={batch_size}"
        return Reward(
            models=models, device="cpu", env=env, cache_dir=tmp_path / "cache", in_flight=in_flight, decode_processes=decode_processes
        )

    reward(1, 1).rows(items[:1])  # the task is built and warm, under other settings
    together = [json.dumps(row) for row in reward(16, 4).rows(items)]
    one_by_one = [json.dumps(row) for row in reward(16, 1).rows(items)]
    assert [json.loads(row)["status"] for row in together] == ["scored"] * len(items), together
    assert together == one_by_one
    decoding = pickle.loads(pickle.dumps(reward(16, 4, decode_processes=2)))  # as a trainer ships it to a worker
    try:
        assert [json.dumps(row) for row in decoding.rows(items)] == one_by_one
        decoding.close()  # a closed reward's next call starts new decoding processes
        assert [json.dumps(row) for row in decoding.rows(items[:3])] == one_by_one[:3]
    finally:
        decoding.close()


def _answer(tag: str) -> list:
    return [({"order": ["t"], "caller": tag}, [f"text from {tag}"])]


def test_rewards_called_from_two_threads_take_turns_with_their_own_settings(monkeypatch):
    """Reward B, called while reward A is scoring in another thread, waits for A's call to end:
    A's item keeps A's settings and hub from start to finish, and B then scores with its own."""
    import threading

    from mmverify.core.settings import scoring_settings
    from mmverify.pipelines import context as context_module
    from mmverify.pipelines import reward as reward_module
    from tests.waiting import HANG_GUARD_S, wait_until

    first, second = Reward("i_structure", env={"MMVERIFY_TEST_SETTING": "A"}), Reward("i_structure", env={"MMVERIFY_TEST_SETTING": "B"})
    first(_answer("warm"))
    hub_first = hub_module.get_hub()
    second(_answer("warm"))
    hub_second = hub_module.get_hub()
    inside, release, seen, statuses = threading.Event(), threading.Event(), {}, {}
    score_item = reward_module.score_item

    def spying(entry):
        tag = entry.instance.data["caller"]
        seen.setdefault(tag, []).append((scoring_settings().get("MMVERIFY_TEST_SETTING"), hub_module.get_hub()))
        if tag == "A":
            inside.set()
            assert release.wait(HANG_GUARD_S)
            seen[tag].append((scoring_settings().get("MMVERIFY_TEST_SETTING"), hub_module.get_hub()))
        return score_item(entry)

    monkeypatch.setattr(reward_module, "score_item", spying)
    calls = [
        threading.Thread(target=lambda: statuses.setdefault("A", first(_answer("A")).rows[0]["status"])),
        threading.Thread(target=lambda: statuses.setdefault("B", second(_answer("B")).rows[0]["status"])),
    ]
    calls[0].start()
    assert inside.wait(HANG_GUARD_S)
    calls[1].start()
    wait_until(lambda: context_module._GATE._queue, message="reward B waiting for its turn")
    assert "B" not in seen
    release.set()
    for call in calls:
        call.join(HANG_GUARD_S)
        assert not call.is_alive()
    assert seen["A"] == [("A", hub_first)] * 2
    assert seen["B"] == [("B", hub_second)]
    assert statuses == {"A": "scored", "B": "scored"}


def test_a_call_interrupted_while_waiting_for_its_turn_leaves_no_one_waiting_for_it():
    import threading

    from mmverify.pipelines.context import ScoringContext, holding
    from mmverify.pipelines.deadlines import ItemTimeout, deadline
    from tests.waiting import HANG_GUARD_S

    held, release, outcome = threading.Event(), threading.Event(), []

    def hold_first() -> None:
        with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"})):
            held.set()
            release.wait(HANG_GUARD_S)

    def wait_with_deadline(seconds: float) -> None:
        try:
            with deadline(seconds), holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "B"})):
                outcome.append("entered")
        except ItemTimeout:
            outcome.append("timed out")

    holder = threading.Thread(target=hold_first)
    holder.start()
    assert held.wait(HANG_GUARD_S)
    waiter = threading.Thread(target=wait_with_deadline, args=(0.2,))  # runs out: the first context is held
    waiter.start()
    waiter.join(HANG_GUARD_S)
    assert outcome == ["timed out"]  # the first context is held until after this
    release.set()
    holder.join(HANG_GUARD_S)
    # a limit that only a hang reaches: a slow machine must not turn "entered" into a timeout
    later = threading.Thread(target=lambda: outcome.append(wait_with_deadline(HANG_GUARD_S) or "next call ran"))
    later.start()
    later.join(HANG_GUARD_S)
    assert outcome == ["timed out", "entered", "next call ran"]


def test_a_call_cannot_start_one_under_other_settings_in_its_own_thread():
    from mmverify.pipelines.context import ScoringContext, holding

    with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"})):
        with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"})):
            pass  # the same settings nest
        with pytest.raises(RuntimeError, match="same thread"):
            with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "B"})):
                pass


def test_installing_a_context_waits_for_the_calls_in_flight_under_another():
    """``ScoringContext.apply()`` (and ``install``) from another thread must not change the
    settings of a call half-way: it takes its turn behind the call; in the call's own thread it is
    refused unless it installs the context already held."""
    import threading

    from mmverify.core.settings import scoring_settings
    from mmverify.pipelines import context as context_module
    from mmverify.pipelines.context import ScoringContext, holding
    from tests.waiting import HANG_GUARD_S, wait_until

    first, second = ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"}), ScoringContext(env={"MMVERIFY_TEST_SETTING": "B"})
    held, release, seen = threading.Event(), threading.Event(), []

    def call() -> None:
        with holding(first):
            held.set()
            assert release.wait(HANG_GUARD_S)
            seen.append(scoring_settings().get("MMVERIFY_TEST_SETTING"))
            assert first.apply() is False  # the context it holds: nothing to do
            with pytest.raises(RuntimeError, match="own thread"):
                second.apply()
            seen.append(scoring_settings().get("MMVERIFY_TEST_SETTING"))

    caller = threading.Thread(target=call)
    caller.start()
    assert held.wait(HANG_GUARD_S)
    installer = threading.Thread(target=lambda: seen.append(("applied", second.apply())))
    installer.start()
    wait_until(lambda: context_module._GATE._queue, message="apply() waiting for its turn")
    release.set()
    for thread in (caller, installer):
        thread.join(HANG_GUARD_S)
        assert not thread.is_alive()
    assert seen == ["A", "A", ("applied", True)]
    assert scoring_settings().get("MMVERIFY_TEST_SETTING") == "B"


def test_a_context_installed_while_a_run_holds_it_stays_after_the_run():
    """A run (``installed``) puts back the context it found; an explicit install of that very
    context meanwhile is what was asked for last, so it must outlive the run."""
    import threading

    from mmverify.core.settings import installed_context
    from mmverify.pipelines.context import ScoringContext, install, installed
    from tests.waiting import HANG_GUARD_S

    context = ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"})
    held, release = threading.Event(), threading.Event()

    def run() -> None:
        with installed(context):
            held.set()
            assert release.wait(HANG_GUARD_S)

    assert installed_context() is None
    runner = threading.Thread(target=run)
    runner.start()
    assert held.wait(HANG_GUARD_S)
    assert install(context) is False  # in force already
    release.set()
    runner.join(HANG_GUARD_S)
    assert not runner.is_alive()
    assert installed_context() == context


def test_contexts_that_mean_the_same_are_equal_and_share_their_turn(tmp_path: Path):
    from mmverify.pipelines.context import JudgeOptions, ScoringContext, holding

    as_lists = ScoringContext(
        models=["beat_tracker=librosa-beats", "vad=silero-vad"], references=[f"esc50={tmp_path}"], cache_dir=tmp_path,
        judge=JudgeOptions(roles=["ocr=judge-b"]),
    )  # fmt: skip
    as_text = ScoringContext(
        models="beat_tracker=librosa-beats,vad=silero-vad", references=f"esc50={tmp_path}", cache_dir=str(tmp_path),
        judge=JudgeOptions(roles=("ocr=judge-b",)),
    )  # fmt: skip
    assert as_lists == as_text and as_lists.settings == as_text.settings
    with holding(as_lists):
        with holding(as_text):  # the same settings nest; a context under other settings would raise here
            pass


def test_an_interrupt_landing_while_a_call_leaves_the_gate_leaves_no_holder_behind(monkeypatch):
    """^C (or a trainer's SIGALRM handler) can strike as the call takes the gate's lock to leave:
    the call still leaves, then the interrupt goes on -- calls under other settings are not
    locked out for good."""
    import threading

    from mmverify.pipelines import context as context_module
    from mmverify.pipelines.context import ScoringContext, holding

    gate = context_module._GATE

    class InterruptedOnce:
        """The gate's condition, whose lock-taking is interrupted once, on the ``strike``-th time."""

        def __init__(self, condition: threading.Condition, strike: int) -> None:
            self.condition, self.taken, self.strike = condition, 0, strike

        def __enter__(self):
            self.taken += 1
            if self.taken == self.strike:
                raise KeyboardInterrupt
            return self.condition.__enter__()

        def __exit__(self, *exc):
            return self.condition.__exit__(*exc)

        def __getattr__(self, name):
            return getattr(self.condition, name)

    monkeypatch.setattr(gate, "_changed", InterruptedOnce(gate._changed, strike=2))  # 1: entering, 2: leaving
    with pytest.raises(KeyboardInterrupt):
        with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "A"})):
            pass
    assert not gate._holders
    entered = threading.Event()

    def other_settings() -> None:
        with holding(ScoringContext(env={"MMVERIFY_TEST_SETTING": "B"})):
            entered.set()

    thread = threading.Thread(target=other_settings, daemon=True)
    thread.start()
    assert entered.wait(60), "a call under other settings never got its turn"
