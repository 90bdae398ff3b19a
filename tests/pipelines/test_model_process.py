"""One model process computing the batches of several worker processes (``score --workers N
--model-process``): values and errors cross the wire unchanged, a served CLAP computes the bytes a
local one does without loading its weights, scores are the bytes of one process, and a model
process that dies ends the run, which then resumes to the same bytes."""

from __future__ import annotations

import multiprocessing
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from mmverify.core.decode_worker import read_message, write_message
from mmverify.models.base import ModelUnavailable
from mmverify.models.clap import HFClap
from mmverify.models.served import PROTOCOL, ModelClient, error_reply, pack, raised, received_value, send_value
from mmverify.pipelines.context import ScoringContext
from mmverify.pipelines.model_process import ModelProcess, ModelProcessEnded
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.references import sets
from tests.conftest import write_manifest
from tests.pipelines.test_batched_scoring import sound_items, tiny_clap  # noqa: F401
from tests.tasks.test_sound import ESC50_TASKS

SAFETY_S = 60.0  # how long a test waits for what should come: a failing test cannot hang


# -- the wire ----------------------------------------------------------------------------------------
def _random_value(rng: np.random.Generator, depth: int = 0) -> object:
    kind = int(rng.integers(0, 9 if depth < 3 else 6))
    if kind == 0:
        dtype = ["float32", "float64", "int16", "uint8", "bool", "complex64"][int(rng.integers(0, 6))]
        shape = tuple(int(n) for n in rng.integers(0, 4, size=int(rng.integers(0, 3))))
        array = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
        array.flags.writeable = bool(rng.integers(0, 2))
        return array if rng.integers(0, 2) else array.T  # a non-contiguous view now and then
    if kind == 1:
        return [None, True, False, 0, -7, 2**40][int(rng.integers(0, 6))]
    if kind == 2:
        return float(rng.choice([0.1, -0.0, 1e300, float("inf"), float("-inf"), rng.standard_normal()]))
    if kind == 3:
        return "".join(chr(int(c)) for c in rng.integers(32, 0x2FFF, size=int(rng.integers(0, 6))))
    if kind == 4:
        return np.float32(rng.standard_normal())
    if kind == 5:
        return np.int64(rng.integers(-1000, 1000))
    parts = [_random_value(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    if kind == 6:
        return parts
    if kind == 7:
        return tuple(parts)
    return {f"k{i}": part for i, part in enumerate(parts)} | {i: str(i) for i in range(int(rng.integers(0, 2)))}


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        return (
            type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == np.asarray(b).tobytes()  # type: ignore[union-attr]
            and (not isinstance(a, np.ndarray) or a.flags.writeable == b.flags.writeable)  # type: ignore[union-attr]
        )  # fmt: skip
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _through_the_wire(value: object) -> object:
    left, right = socket.socketpair()
    with left, right, left.makefile("wb", buffering=0) as sending, right.makefile("rb", buffering=0) as receiving:
        send_value(sending, {"id": 0}, value, "value")
        header, payload = read_message(receiving)
    return received_value(header, payload, "value")


def test_values_cross_the_wire_unchanged():
    rng = np.random.default_rng(7)
    for _ in range(300):
        value = _random_value(rng)
        assert _same(value, _through_the_wire(value)), value


def test_a_batch_sends_a_repeated_input_once_and_refuses_what_it_cannot_carry():
    clip = np.arange(5, dtype=np.float32)
    data, arrays = pack([clip, np.arange(3.0), clip, clip])
    assert len(arrays) == 2 and data[0] == data[2] == data[3] != data[1]
    with pytest.raises(TypeError, match="cannot send a set"):
        pack([clip, {1, 2}])


@pytest.mark.parametrize(
    "exc, kind",
    [(ValueError("bad clip"), ValueError), (MemoryError("out"), MemoryError), (KeyError("k"), KeyError), (ZeroDivisionError("x"), RuntimeError)],
)
def test_errors_come_back_as_their_type(exc, kind):
    back = raised(error_reply(exc))
    assert type(back) is kind and str(exc) in str(back)
    unavailable = raised(error_reply(ModelUnavailable("clap-hf", "no weights at /m")))
    assert isinstance(unavailable, ModelUnavailable) and unavailable.backend == "clap-hf" and unavailable.message == "clap-hf: no weights at /m"


# -- the model process ---------------------------------------------------------------------------------
@pytest.fixture
def model_process(tiny_clap):  # noqa: F811
    process = ModelProcess(ScoringContext(models=f"audio_text=clap-hf@{tiny_clap}?batch_size=4", env={"MMVERIFY_NO_OUTPUT_CACHE": "1"}))
    yield process
    process.stop()
    assert process.ended() and not Path(process.address).parent.exists()


@pytest.mark.slow
def test_a_served_clap_computes_the_bytes_of_a_local_one_without_its_weights(model_process, tiny_clap):  # noqa: F811
    rng = np.random.default_rng(3)
    clips = [(rng.standard_normal(int(n)) * 0.3).astype(np.float32) for n in rng.integers(1, 48_000 * 13, size=11)]
    texts = ["a dog barks", "rain", "", "a long sentence about a train passing by at night"]
    local, served = HFClap(source=str(tiny_clap), batch_size=4), HFClap(source=str(tiny_clap), batch_size=4)
    served.server = ModelClient(model_process.address, model_process.token)
    for padding in ("zero", "repeat"):
        assert local.embed_audio(clips, padding).tobytes() == served.embed_audio(clips, padding).tobytes()
    assert local.embed_text(texts).tobytes() == served.embed_text(texts).tobytes()
    assert served._model is None and local._model is not None  # only the model process holds the weights
    with pytest.raises(ValueError, match="NaN"):  # inputs are checked where they are prepared, as always
        served.embed_audio([np.array([0.0, np.nan], np.float32)])
    other = HFClap(source=str(tiny_clap), batch_size=2)  # another batch shape: other bytes, refused
    other.server = served.server
    with pytest.raises(ModelUnavailable, match="not with"):
        other.embed_audio(clips[:1])


def test_a_model_process_refuses_a_worker_without_its_token(model_process):
    with pytest.raises(ModelUnavailable, match="refused"):
        ModelClient(model_process.address, "not the token")
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(model_process.address)
    with connection, connection.makefile("rwb", buffering=0) as stream:
        write_message(stream, {"hello": PROTOCOL.replace("1", "0"), "token": model_process.token})
        assert "refused" in read_message(stream)[0]


# -- score --workers N --model-process ---------------------------------------------------------------------
@pytest.fixture
def clap_run(tmp_path, monkeypatch, tiny_clap, mmmg_instructions):  # noqa: F811
    instructions = tmp_path / "instructions"
    instructions.mkdir()
    for task in ESC50_TASKS:
        shutil.copy(mmmg_instructions / f"{task}.jsonl", instructions / f"{task}.jsonl")
    items, tree = sound_items(tmp_path / "sound", mmmg_instructions, per_task=4)
    monkeypatch.setenv("MMVERIFY_MODELS", f"audio_text=clap-hf@{tiny_clap}?batch_size=4")
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(sets.ENV_VAR, f"esc50={tree}")
    sets.clear_memo()
    manifest = write_manifest(tmp_path / "manifest.jsonl", items)

    def config(out: Path, **options: object) -> ScoreConfig:
        return ScoreConfig(manifest=manifest, out=out, instructions=instructions, in_flight=6, **options)  # type: ignore[arg-type]

    return config


def test_a_model_process_serves_worker_processes_only(clap_run, tmp_path):
    for options in ({"workers": 1}, {"workers": 2, "executor": "ray"}):
        with pytest.raises(ValueError, match="serves worker processes"):
            clap_run(tmp_path / "out", model_process=True, **options)


@pytest.mark.slow
def test_scores_through_a_model_process_are_the_bytes_of_one_process(clap_run, tmp_path, monkeypatch):
    # each run with caches of its own: the workers also embed the reference clips through the model process
    served = run_score(clap_run(tmp_path / "served", workers=2, model_process=True))
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache-one"))
    sets.clear_memo()
    one = run_score(clap_run(tmp_path / "one"))
    assert (tmp_path / "cache" / "references").is_dir() and (tmp_path / "cache-one" / "references").is_dir()
    assert one.errors == 0 and served.written == one.written > 8
    assert (tmp_path / "served" / "results.jsonl").read_bytes() == (tmp_path / "one" / "results.jsonl").read_bytes()
    assert not [p for p in multiprocessing.active_children() if p.name == "mmverify-models"]  # stopped with the run


@pytest.mark.slow
def test_a_model_process_that_dies_ends_the_run_and_the_run_resumes(clap_run, tmp_path):
    run_score(clap_run(tmp_path / "one"))
    killed: list[int] = []

    def kill_the_model_process(_: int) -> None:  # once the first row is written
        for child in multiprocessing.active_children():
            if child.name == "mmverify-models" and not killed:
                child.kill()
                child.join()
                killed.append(child.exitcode)

    with pytest.raises(ModelProcessEnded, match="resumes"):
        run_score(clap_run(tmp_path / "served", workers=2, model_process=True), progress=kill_the_model_process)
    assert killed
    written = (tmp_path / "served" / "results.jsonl").read_bytes()
    reference = (tmp_path / "one" / "results.jsonl").read_bytes()
    assert written and reference.startswith(written) and written != reference  # rows kept, none of them an error
    run_score(clap_run(tmp_path / "served", workers=2, model_process=True))
    assert (tmp_path / "served" / "results.jsonl").read_bytes() == reference


def test_a_client_whose_model_process_ends_fails_what_waits_and_what_comes(model_process):
    lost = threading.Event()
    client = ModelClient(model_process.address, model_process.token, on_lost=lost.set)
    waiting = client.send({"capability": "audio_text", "backend": "clap-hf", "fingerprint": "-"}, ("clap_audio", "zero"), [])
    with pytest.raises(ModelUnavailable, match="not with -"):  # no backend has that fingerprint: an answer all the same
        waiting.result()
    model_process.stop()
    assert lost.wait(SAFETY_S)
    with pytest.raises(ModelUnavailable, match="went away"):
        client.send({"capability": "audio_text", "backend": "clap-hf", "fingerprint": "-"}, ("clap_audio", "zero"), [])
