"""A local VLM judge keeps to its item's deadline where another process generates for it
(``--model-process``): the worker sends the deadline with each question, the model process does not
generate a question whose item ran out of time and cuts a generation when it does, and a reply cut
short is never returned (it would be a reply no local judge gives)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mmverify.core import waits
from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.models.rows import Staged
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout
from tests.models.test_judge import IMAGE_A, tiny_qwen, use_local_judge  # noqa: F401
from tests.waiting import wait_until

QUESTION = "Is there a cat? Answer Yes or No."
MAX_TOKENS = 12
LIMIT_S = 2.0  # an item's time limit in a test: it is waited out, never measured
SAFETY_S = 60.0  # how long a test waits for what should come: a failing test cannot hang


def _judge(path: Path):  # type: ignore[no-untyped-def]
    from mmverify.models.judge_local import TransformersVLMJudge

    return TransformersVLMJudge(str(path), device="cpu")


class _RecordingServer:
    """A model process that records each batch it is sent and answers it with a fixed reply."""

    def __init__(self) -> None:
        self.batches: list[list[object]] = []

    def device(self, requested: str | None) -> str:
        return "cpu"

    def ask(self, question: str, value: object = None, backend: object = None) -> object:
        assert question == "settings"
        return backend.worker_settings()  # type: ignore[attr-defined]

    def computation(self, backend: object, kind: object) -> Staged:
        assert kind == ("generate", MAX_TOKENS)
        return Staged(lambda batch: self.batches.append(batch) or [("Yes", (3, 1))], lambda outputs: outputs)


def test_a_served_judge_sends_its_items_deadline_on_the_machines_shared_clock(tiny_qwen):  # noqa: F811
    judge = _judge(tiny_qwen)
    judge.server = server = _RecordingServer()
    assert judge.ask(QUESTION, [IMAGE_A], max_tokens=MAX_TOKENS) == "Yes"
    before = waits.shared_clock()
    with deadline(3600):
        assert judge.ask("Text only?", max_tokens=MAX_TOKENS) == "Yes"
    after = waits.shared_clock()
    [[(prompt, images, due)]] = server.batches[:1]
    assert prompt == QUESTION and len(images) == 1 and due is None  # no deadline: none is sent
    [[(prompt, images, due)]] = server.batches[1:]
    assert prompt == "Text only?" and images == []
    # the item's deadline, an hour on, read on the clock every process of this machine shares
    # (the margin only covers the two clocks being read one after the other)
    assert before + 3600 - 1e-3 <= due <= after + 3600 + 1e-3
    assert judge._model is None  # the worker's copy never loaded the weights


class _AheadServer(_RecordingServer):
    """A model process whose clock saw the item's deadline pass before this thread's timeout landed."""

    def computation(self, backend: object, kind: object) -> Staged:
        def refuse(batch: list[object]) -> object:
            self.batches.append(batch)
            raise ScoringError(ErrorCode.TIMEOUT, "the question's item ran out of time while it was generated")

        return Staged(refuse, lambda outputs: outputs)


def test_a_timeout_answered_before_the_items_own_lands_gives_way_to_it(tiny_qwen):  # noqa: F811
    """The item's row is its own timeout, as any late item's, not an error row of the model process."""
    judge = _judge(tiny_qwen)
    judge.server = server = _AheadServer()
    with pytest.raises(ItemTimeout), deadline(LIMIT_S):
        judge.ask(QUESTION, max_tokens=MAX_TOKENS)
    with pytest.raises(ScoringError, match="while it was generated"):  # no deadline of its own: nothing to wait for
        judge.ask(QUESTION, max_tokens=MAX_TOKENS)
    assert len(server.batches) == 2


@pytest.fixture
def generated(tiny_qwen, monkeypatch):  # noqa: F811
    """A loaded judge whose model's generate calls are recorded: the new tokens of each."""
    judge = _judge(tiny_qwen)
    judge.ensure_loaded()
    lengths: list[int] = []
    generate = judge._model.generate

    def recorded(**inputs):  # type: ignore[no-untyped-def]
        output = generate(**inputs)
        lengths.append(int(output.shape[1] - inputs["input_ids"].shape[1]))
        return output

    monkeypatch.setattr(judge._model, "generate", recorded)
    return judge, lengths


def test_a_deadline_to_come_changes_no_reply_and_one_past_is_not_generated(generated):
    judge, lengths = generated
    compute = judge.computation(("generate", MAX_TOKENS))
    unbounded = compute([(QUESTION, [IMAGE_A], None)])
    assert unbounded == compute([(QUESTION, [IMAGE_A], waits.shared_clock() + 3600)])
    assert unbounded == [judge._generate(QUESTION, [IMAGE_A], MAX_TOKENS)] and lengths == [MAX_TOKENS] * 3
    with pytest.raises(ScoringError, match="before it was generated") as error:
        compute([(QUESTION, [IMAGE_A], waits.shared_clock() - 1)])
    assert error.value.code == ErrorCode.TIMEOUT and len(lengths) == 3  # nothing generated for it


def test_a_generation_that_reaches_its_deadline_is_cut_there_and_answers_a_timeout(generated, monkeypatch):
    from mmverify.models import judge_local

    judge, lengths = generated
    compute = judge.computation(("generate", MAX_TOKENS))
    assert compute([(QUESTION, [], None)])[0][1][1] == MAX_TOKENS  # uncut, it takes every token it may
    readings = iter([0.0] * 4)  # a clock read once before generating, then once a token: due at the fifth reading
    monkeypatch.setattr(judge_local, "shared_clock", lambda: next(readings, 10.0))
    with pytest.raises(ScoringError, match="while it was generated") as error:
        compute([(QUESTION, [], 5.0)])
    assert error.value.code == ErrorCode.TIMEOUT
    assert 0 < lengths[-1] < MAX_TOKENS  # cut, and its reply not returned


def test_an_item_waiting_for_the_in_process_judge_takes_its_timeout_while_it_waits(generated):
    """One generation at a time; a question waiting for its turn is waited for in steps, so its
    item's deadline lands there instead of after the generation ahead of it."""
    from mmverify.models.compute_locks import computing

    judge, lengths = generated
    outcome: list[BaseException] = []

    def ask_in_time() -> None:
        try:
            with deadline(LIMIT_S):
                judge.ask(QUESTION, [IMAGE_A], max_tokens=MAX_TOKENS)
        except BaseException as exc:  # noqa: BLE001  (what the item met)
            outcome.append(exc)

    with computing(judge):  # as if another item's question were being generated
        asking = threading.Thread(target=ask_in_time)
        asking.start()
        asking.join(SAFETY_S)
        assert not asking.is_alive() and isinstance(outcome[0], ItemTimeout)
    assert lengths == []  # its turn never came


def test_a_reply_finished_past_its_deadline_is_refused(generated, monkeypatch):
    from mmverify.models import judge_local

    judge, lengths = generated
    now = [0.0]  # the deadline does not pass while tokens are generated, only as generation returns
    monkeypatch.setattr(judge_local, "shared_clock", lambda: now[0])
    generate = judge._model.generate

    def finishes_late(**inputs):  # type: ignore[no-untyped-def]
        output = generate(**inputs)
        now[0] = 10.0
        return output

    monkeypatch.setattr(judge._model, "generate", finishes_late)
    with pytest.raises(ScoringError, match="while it was generated") as error:
        judge.computation(("generate", MAX_TOKENS))([(QUESTION, [], 5.0)])
    assert error.value.code == ErrorCode.TIMEOUT and lengths == [MAX_TOKENS]  # not cut, and still no one's


@pytest.mark.slow
def test_a_served_question_whose_item_timed_out_while_it_waited_is_never_generated(tiny_qwen, tmp_path, monkeypatch):  # noqa: F811
    """The realistic case: the model process is busy with another worker's generation while an
    item's question waits; the item times out in its worker, and once the model process comes to
    the question it drops it instead of generating it ahead of the questions behind."""
    from mmverify.models import hub
    from mmverify.models.compute_locks import computing
    from mmverify.models.served import ModelClient
    from mmverify.pipelines import model_process as serving_module
    from tests.pipelines.test_model_process import close, serving_loop

    use_local_judge(monkeypatch, tiny_qwen)  # what the serving loop answers with
    expected = _judge(tiny_qwen).ask(QUESTION, [IMAGE_A], max_tokens=MAX_TOKENS)
    launched: list[object] = []
    launch = serving_module._launch
    monkeypatch.setattr(serving_module, "_launch", lambda *args: launched.append(args[1].get("kind")) or launch(*args))
    with serving_loop(tmp_path / "socket") as address:
        served = _judge(tiny_qwen)
        served.server, served.role = ModelClient(address, "token"), "default"
        try:
            served.ask("Text only?", max_tokens=MAX_TOKENS)  # both sides loaded before any deadline runs
            there = hub.get_hub().judge("default")  # the serving loop's copy
            generations: list[int] = []
            generate = there._model.generate
            monkeypatch.setattr(there._model, "generate", lambda **inputs: generations.append(1) or generate(**inputs))
            with computing(there):  # as if generating another worker's question
                with pytest.raises(ItemTimeout), deadline(LIMIT_S):
                    served.ask(QUESTION, [IMAGE_A], max_tokens=MAX_TOKENS)
                # the question did reach the model process, where it waits for the generation to end
                assert wait_until(lambda: sum(kind is not None for kind in launched) == 2)
            assert served.ask(QUESTION, [IMAGE_A], max_tokens=MAX_TOKENS) == expected  # answered after the dropped one
            assert generations == [1]  # only the question asked in time was generated
        finally:
            close(served.server)
