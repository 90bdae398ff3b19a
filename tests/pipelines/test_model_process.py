"""One model process computing the batches of several worker processes (``score --workers N
--model-process``): values and errors cross the wire unchanged, a served CLAP computes the bytes a
local one does without loading its weights, scores are the bytes of one process, and a model
process that dies ends the run, which then resumes to the same bytes."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import socket
import threading
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from mmverify.core.decode_worker import SocketStream, read_message, write_message
from mmverify.models.base import ModelUnavailable, pick_device
from mmverify.models.clap_hf import HFClap
from mmverify.models import served as served_module
from mmverify.models.served import PROTOCOL, ModelClient, error_reply, pack, raised, received_value, value_message
from mmverify.pipelines.context import ScoringContext
from mmverify.pipelines import model_process as serving_module
from mmverify.pipelines.model_process import ModelProcess, ModelProcessEnded, serve
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.references import sets
from tests.conftest import write_manifest
from tests.waiting import wait_until
from tests.pipelines.test_batched_scoring import sound_items, tiny_clap  # noqa: F401
from tests.tasks.test_sound import ESC50_TASKS, SR, write

SAFETY_S = 60.0  # how long a test waits for what should come: a failing test cannot hang
LIMIT_S = 10.0  # an item's time limit where a test needs one: a stall of the shared machine must not reach it
MARKED_SIZE = 320 * 451  # samples at 48 kHz of the clip a test's served model hangs on (147 * 451 at 22.05 kHz),
# a length no part the tasks cut from the other clips has


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
    with left, right:
        write_message(SocketStream(left), *value_message({"id": 0}, value, "value"))  # type: ignore[arg-type]
        header, payload = read_message(SocketStream(right))  # type: ignore[arg-type]
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
    for unclear in (np.array([object()]), np.zeros(2, dtype=[("a", "f4"), ("b", "i4")])):  # bytes would not say what they hold
        with pytest.raises(TypeError, match="cannot send an array of dtype"):
            pack([unclear])


class BadClip(ValueError):
    """An error type of this module's own: a worker could not import it from the model process."""


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def _raised_here(exc: Exception) -> tuple[Exception, str]:
    """``exc`` raised and caught (so that it has a traceback), and the line it was raised at."""
    try:
        raise exc
    except Exception as caught:
        return caught, f"test_model_process.py:{caught.__traceback__.tb_lineno}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "exc, builtin",
    [
        (ValueError("bad clip"), ValueError), (MemoryError("out"), MemoryError), (KeyError("k"), KeyError),
        (KeyError("k", 2), KeyError), (ZeroDivisionError("x"), ZeroDivisionError), (OSError(2, "No such file"), FileNotFoundError),
        (IndexError(), IndexError),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), UnicodeError),  # its constructor wants five arguments
        (BadClip("a clip this model cannot take"), ValueError), (Unprintable("x"), RuntimeError),
        (FileNotFoundError(2, "No such file or directory", "/models/weights.bin"), FileNotFoundError),  # the name is no argument
        (KeyError(("a", 1)), KeyError), (KeyError(3.5), KeyError),  # keys the wire does not carry as arguments
    ],
)  # fmt: skip
def test_errors_come_back_as_their_type_with_their_text_and_where_they_were_raised(exc, builtin):
    """An error comes back as its type where that is a builtin that reads the same, else as a
    class of its name derived from its nearest builtin (the same handlers catch it).  The row's text
    is the same: ``Type: message (at file:line)`` of where the model process raised it."""
    from mmverify.core.errors import raised_at
    from mmverify.pipelines.execute import described

    exc, line = _raised_here(exc)
    back = raised(json.loads(json.dumps(error_reply(exc))))  # as the wire carries it
    assert type(back).__name__ == type(exc).__name__ and isinstance(back, builtin)
    if type(exc) in (ValueError, MemoryError, ZeroDivisionError, IndexError) or exc.args == ("k",):
        assert type(back) is type(exc)  # builtins made from their arguments
    text = "" if isinstance(exc, Unprintable) else str(exc)
    assert str(back) == text and described(back) == f"{type(exc).__name__}: {text}"
    assert raised_at(back) == line == raised_at(exc)


def test_scoring_errors_come_back_with_their_code():
    unavailable = raised(error_reply(ModelUnavailable("clap-hf", "no weights at /m")))
    assert isinstance(unavailable, ModelUnavailable) and unavailable.backend == "clap-hf" and unavailable.message == "clap-hf: no weights at /m"
    from mmverify.core.errors import ScoringError

    back = raised(error_reply(ScoringError("media_too_large", "a clip of 3 h")))
    assert type(back) is ScoringError and (back.code, back.message) == ("media_too_large", "a clip of 3 h")


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


# What a worker computes with each kind of servable backend, on seeded inputs: run in a process of its
# own (the worker) and in the test's (the local model).  Whisper decodes a fixed number of tokens.
_OUTPUTS = """
import hashlib, json, sys
import numpy as np


def outputs(kind, path, server=None):
    rng = np.random.default_rng(5)
    speech = [(np.sin(np.arange(int(n)) * rng.uniform(0.01, 0.2)) * 0.5).astype(np.float32) for n in rng.integers(400, 16_000 * 4, 5)]
    if kind == "clap":
        from mmverify.models.clap_hf import HFClap as Backend
        arguments, compute = {"batch_size": 4}, lambda b: b.embed_audio(speech * 2).tobytes() + b.embed_text(["rain", "a dog barks twice"]).tobytes()
    elif kind == "whisper":
        from mmverify.models.whisper import HFWhisper as Backend
        arguments, compute = {"batch_size": 3, "max_new_tokens": 4}, lambda b: json.dumps(b.transcribe(speech, language="en")).encode()
    elif kind == "beats":
        from mmverify.models.beats import BeatThisTracker as Backend
        arguments, compute = {}, lambda b: b"".join(b.beats(clip, 16_000).tobytes() + b"|" for clip in speech)
    elif kind == "speaker":
        from mmverify.models.speaker import WavLMSpeaker as Backend
        arguments, compute = {"batch_size": 3}, lambda b: b.embed(speech).tobytes()
    else:
        from mmverify.models.gender import Wav2Vec2Gender as Backend
        arguments, compute = {"batch_size": 3}, lambda b: json.dumps(b.classify(speech)).encode()
    backend = Backend(source=path, **arguments)
    backend.server = server
    return hashlib.sha256(compute(backend)).hexdigest(), str(backend.device)
"""
_WORKER_SCRIPT = _OUTPUTS + """
from mmverify.models.served import model_client, use_model_process
if sys.argv[1]:  # a worker of that model process; else the local model, in a process as fresh
    use_model_process(sys.argv[1], sys.argv[2])
digest, device = outputs(sys.argv[3], sys.argv[4], model_client())
print(digest, device, sorted(set(sys.modules) & {"torch", "transformers"}))
"""
_SERVED_KINDS = {"clap": "audio_text=clap-hf@{}?batch_size=4", "whisper": "transcriber=whisper-hf@{}?batch_size=3&max_new_tokens=4",
                 "speaker": "speaker=wavlm-sv@{}?batch_size=3", "gender": "gender=gender-w2v2@{}?batch_size=3",
                 "beats": "beat_tracker=beat-this@{}"}  # fmt: skip


@pytest.mark.slow
def test_a_worker_process_computes_through_the_model_process_without_importing_torch(tmp_path, tiny_clap):  # noqa: F811
    """A worker asks the model process for its device and its models' settings: it imports
    neither torch nor transformers, and each servable kind gives the bytes of a local model."""
    import os
    import subprocess
    import sys

    from mmverify.testing.speech_models import build_wav2vec2_gender, build_wavlm_xvector
    from tests.models.test_beats import build_tiny_beat_this
    from tests.models.test_whisper import build_tiny_hf_whisper

    paths = {
        "clap": tiny_clap, "whisper": build_tiny_hf_whisper(tmp_path / "whisper", max_length=24),
        "speaker": build_wavlm_xvector(tmp_path / "wavlm"), "gender": build_wav2vec2_gender(tmp_path / "gender"),
        "beats": build_tiny_beat_this(tmp_path / "beat_this" / "tiny.ckpt"),
    }  # fmt: skip
    models = [spec.format(paths[kind]) for kind, spec in _SERVED_KINDS.items()]
    process = ModelProcess(ScoringContext(models=models, env={"MMVERIFY_NO_OUTPUT_CACHE": "1"}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH")]))}

    def computed(kind: str, address: str = "", token: str = "") -> tuple[str, str, str]:
        """(digest of the outputs, device, what of torch and transformers was imported), in a new process."""
        done = subprocess.run(
            [sys.executable, "-c", _WORKER_SCRIPT, address, token, kind, str(paths[kind])],
            capture_output=True, text=True, timeout=SAFETY_S * 5, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        digest, device, imported = done.stdout.split(maxsplit=2)
        return digest, device, imported.strip()

    try:
        for kind in paths:
            digest, device, imported = computed(kind, process.address, process.token)
            assert imported == "[]", kind
            assert (digest, device) == computed(kind)[:2], kind
    finally:
        process.stop()


def test_a_served_clap_asks_the_shapes_of_a_calls_texts_at_once(serving_here, tmp_path, monkeypatch, tiny_clap):  # noqa: F811
    """A served CLAP has no tokenizer: the model process counts the texts of an embed_text call in
    one question (not one per text, which would wait behind the worker's batches each time)."""
    from tests.tasks.speech_task_fixtures import use_models

    use_models(monkeypatch, tmp_path / "cache", f"audio_text=clap-hf@{tiny_clap}?batch_size=4")
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    asked = []
    original = serving_module._answer_question
    monkeypatch.setattr(serving_module, "_answer_question", lambda *args: asked.append(args[1]["ask"]) or original(*args))
    texts = ["rain", "a dog barks", "", "rain", "an engine idles in the street at night", "wind"]
    local, served = HFClap(source=str(tiny_clap), batch_size=4), HFClap(source=str(tiny_clap), batch_size=4)
    served.server = serving_here
    assert served.embed_text(texts).tobytes() == local.embed_text(texts).tobytes()
    assert asked.count("text_shapes") == 1 and asked.count("settings") == 1


def test_a_message_without_its_id_ends_its_connection_alone(tmp_path, monkeypatch):
    """A reply must name the message it answers: one without an id ends that worker's connection
    (the worker then ends, as when its model process goes away), with no thread failing."""
    failed = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failed.append(args.exc_type))
    with serving_loop(tmp_path / "socket") as address:
        other = ModelClient(address, "token")
        connection = socket.socket(socket.AF_UNIX)
        connection.connect(address)
        with connection, connection.makefile("rwb", buffering=0) as stream:
            write_message(stream, {"hello": PROTOCOL, "token": "token"})
            assert read_message(stream)[0]["ready"] == PROTOCOL
            write_message(stream, {"ask": "device", "arrays": [], "batch": None})
            with pytest.raises(EOFError):
                read_message(stream)
        assert other.device(None) == pick_device(None)  # the other connection is still answered
        close(other)
    assert failed == []


def test_a_served_backend_meets_the_device_the_model_process_refuses(model_process, tiny_clap):  # noqa: F811
    """The device is the model process's choice, refused there with the words a local load uses."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: nothing refuses it")
    local, served = HFClap(source=str(tiny_clap), device="cuda"), HFClap(source=str(tiny_clap), device="cuda")
    served.server = ModelClient(model_process.address, model_process.token)
    with pytest.raises(ModelUnavailable) as refused_here:
        local.ensure_loaded()
    with pytest.raises(ModelUnavailable) as refused_there:
        served.ensure_loaded()
    assert refused_there.value.message == refused_here.value.message and "CUDA is not available" in refused_here.value.message
    close(served.server)


def test_only_the_sender_thread_writes_batches(serving_here, monkeypatch):
    """An item thread that hands over a batch never writes to the socket itself, so a deadline
    raised in it cannot cut a message short."""
    writers = []
    monkeypatch.setattr(served_module, "write_message", lambda *args: writers.append(threading.current_thread().name))
    with pytest.raises(TypeError, match="not arrays"):  # a computation's name is what it says; nothing is left waiting
        serving_here.send({"capability": "audio_text", "backend": "clap-hf", "fingerprint": "-"}, ("clap_audio", np.zeros(2)), [])
    assert not serving_here.waiting()
    serving_here.send({"capability": "audio_text", "backend": "clap-hf", "fingerprint": "-"}, ("clap_audio", "zero"), [np.zeros(3)])
    assert wait_until(lambda: writers) and writers == ["mmverify-model-batches"]


def test_a_model_process_refuses_a_worker_without_its_token(model_process):
    with pytest.raises(ModelUnavailable, match="refused"):
        ModelClient(model_process.address, "not the token")
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(model_process.address)
    with connection, connection.makefile("rwb", buffering=0) as stream:
        write_message(stream, {"hello": PROTOCOL.replace("1", "0"), "token": model_process.token})
        assert "refused" in read_message(stream)[0]
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(model_process.address)
    with connection, connection.makefile("rwb", buffering=0) as stream:  # a hello with a payload: not read, no reply
        with pytest.raises((EOFError, ConnectionResetError, BrokenPipeError)):  # closed before, or after, it is all written
            write_message(stream, {"hello": PROTOCOL, "token": model_process.token}, b"x" * 1000)
            read_message(stream)


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
        return ScoreConfig(manifest=manifest, out=out, instructions=instructions, **{"in_flight": 6, **options})  # type: ignore[arg-type]

    return config


def test_a_worker_that_stops_sending_still_gets_the_replies_of_what_it_sent(tmp_path, monkeypatch):
    """The model process closes a connection only once its replies are sent: here the reply to a
    batch is made after the worker shut its sending side and the reading thread ended."""
    read_all = threading.Event()
    reading, make_error = serving_module.serve_connection, serving_module.error_reply

    def read_then_say_so(*args):  # type: ignore[no-untyped-def]
        try:
            reading(*args)
        finally:
            read_all.set()

    monkeypatch.setattr(serving_module, "serve_connection", read_then_say_so)
    monkeypatch.setattr(serving_module, "error_reply", lambda exc: read_all.wait(SAFETY_S) and make_error(exc))
    with serving_loop(tmp_path / "models") as address, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as worker:
        worker.connect(address)
        stream = SocketStream(worker)
        write_message(stream, {"hello": PROTOCOL, "token": "token"})  # type: ignore[arg-type]
        assert read_message(stream)[0] == {"ready": PROTOCOL, "size": 0}  # type: ignore[arg-type]
        batch = {"id": 5, "capability": "no_such_capability", "backend": "x", "fingerprint": "y", "kind": "k"}
        write_message(stream, *value_message(batch, [np.zeros(3, np.float32)], "batch"))  # type: ignore[arg-type]
        worker.shutdown(socket.SHUT_WR)
        reply, _ = read_message(stream)  # type: ignore[arg-type]
    assert read_all.is_set() and reply["id"] == 5 and "no_such_capability" in reply["error"]["message"]


def test_a_model_process_serves_worker_processes_only(clap_run, tmp_path):
    for options in ({"workers": 1}, {"workers": 2, "executor": "ray"}):
        with pytest.raises(ValueError, match="serves worker processes"):
            clap_run(tmp_path / "out", model_process=True, **options)


@pytest.mark.slow
def test_scores_through_a_model_process_are_the_bytes_of_one_process(clap_run, tmp_path, monkeypatch):
    """Also with decoding processes in each worker (what a GPU machine with CPUs to spare runs)."""
    # each run with caches of its own: the workers also embed the reference clips through the model process
    served = run_score(clap_run(tmp_path / "served", workers=2, model_process=True))
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache-decoding"))
    sets.clear_memo()
    run_score(clap_run(tmp_path / "decoding", workers=2, model_process=True, decode_processes=1))
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache-one"))
    sets.clear_memo()
    one = run_score(clap_run(tmp_path / "one"))
    assert all((tmp_path / cache / "references").is_dir() for cache in ("cache", "cache-decoding", "cache-one"))
    assert one.errors == 0 and served.written == one.written > 8
    for run in ("served", "decoding"):
        assert (tmp_path / run / "results.jsonl").read_bytes() == (tmp_path / "one" / "results.jsonl").read_bytes()
    assert not [p for p in multiprocessing.active_children() if p.name == "mmverify-models"]  # stopped with the run


@pytest.mark.slow
def test_tempo_and_judged_rows_through_a_model_process_are_the_bytes_of_one_process(tmp_path, monkeypatch, mmmg_instructions):
    """beat-this tracks, and a local VLM judge generates, in the model process, each request as
    its worker's item sends it: tempo clips at three rates, one too short to track and one missing,
    and judged pictures of several roles give one process's rows."""
    import soundfile as sf
    from PIL import Image

    from tests.models.test_beats import build_tiny_beat_this, drum_track
    from tests.models.test_judge import build_tiny_qwen25_vl, use_local_judge

    checkpoint = build_tiny_beat_this(tmp_path / "beat_this" / "tiny.ckpt")
    rows = [json.loads(line) for line in (mmmg_instructions / "a_music_attribute.jsonl").read_text().splitlines() if line.strip()]
    tempo = [i for i, row in enumerate(rows) if row.get("tempo")][:5]
    clips = [drum_track(bpm, 4.0, sr=sr) for bpm, sr in ((90, 22050), (120, 16000), (150, 44100))] + [np.zeros(400, np.float32)]
    items = []
    for n, (index, clip) in enumerate(zip(tempo, clips + [None])):
        name = f"t{n}.wav"
        if clip is not None:
            sf.write(tmp_path / name, clip, (22050, 16000, 44100, 16000)[n])
        items.append({"task": "a_music_tempo", "instance_id": f"a_music_attribute/{index}", "parts": [{"type": "audio", "path": name}]})
    rng = np.random.default_rng(3)
    for n, task in enumerate(["i_object_count", "i_object_include", "i_ocr", "i_object_count"]):
        Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)).save(tmp_path / f"p{n}.png")
        items.append({"task": task, "instance_id": f"{task}/{n}", "parts": [{"type": "image", "path": f"p{n}.png"}]})
    manifest = write_manifest(tmp_path / "manifest.jsonl", items)
    monkeypatch.setenv("MMVERIFY_MODELS", f"beat_tracker=beat-this@{checkpoint}")
    use_local_judge(monkeypatch, build_tiny_qwen25_vl(tmp_path / "qwen"))
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    served = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "served", instructions=mmmg_instructions, workers=2, model_process=True))
    one = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "one", instructions=mmmg_instructions))
    assert served.written == one.written == 9
    assert (tmp_path / "served" / "results.jsonl").read_bytes() == (tmp_path / "one" / "results.jsonl").read_bytes()
    written = [json.loads(line) for line in (tmp_path / "one" / "results.jsonl").read_text().splitlines()]
    assert [row["status"] for row in written[:5]] == ["scored"] * 4 + ["error"]
    assert {row["evidence"]["tracker"] for row in written[:4]} == {"beat-this"} and written[0]["evidence"]["beats"] > 0
    judged = json.dumps(written[5:])
    assert '"role": "default"' in judged and '"role": "ocr"' in judged and "transformers-vlm:" in judged


@pytest.mark.slow
def test_a_model_process_that_dies_ends_the_run_and_the_run_resumes(clap_run, tmp_path, monkeypatch):
    from mmverify.pipelines import process_executor as executor_module

    run_score(clap_run(tmp_path / "one"))
    rows_written, killed_after = [0], []
    submit = executor_module.ProcessWorker.submit

    def submit_after_a_kill(worker, batch):
        """Kill the model process before the first batch sent once a row is written (or before the
        last batch): that batch cannot be scored, so the run cannot end without noticing."""
        if not killed_after and (rows_written[0] or batch[-1][0] == LAST_ITEM):
            [models] = [child for child in multiprocessing.active_children() if child.name == "mmverify-models"]
            models.kill()
            models.join()
            killed_after.append(rows_written[0])
        return submit(worker, batch)

    monkeypatch.setattr(executor_module.ProcessWorker, "submit", submit_after_a_kill)
    config = clap_run(tmp_path / "served", workers=2, model_process=True, in_flight=3)
    LAST_ITEM = len(config.manifest.read_text().splitlines()) - 1
    with pytest.raises(ModelProcessEnded, match="resumes"):
        run_score(config, progress=lambda count: rows_written.__setitem__(0, rows_written[0] + count))
    written = (tmp_path / "served" / "results.jsonl").read_bytes()
    reference = (tmp_path / "one" / "results.jsonl").read_bytes()
    # rows written before the kill are kept (none of them an error); the batch sent after it is not scored
    assert killed_after and len(written.splitlines()) >= killed_after[0] and reference.startswith(written) and written != reference
    monkeypatch.setattr(executor_module.ProcessWorker, "submit", submit)
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


# -- loading ahead of the first batch -----------------------------------------------------------------
class _LoadingHub:
    """A hub whose backends and judges record their loads: ``servable`` ones are served, ``broken``
    ones fail.  Judges are named ``judge:ROLE``; the one of an unconfigured role is an endpoint's."""

    def __init__(self, servable: set[str], broken: set[str]) -> None:
        self.servable, self.broken, self.loaded = servable, broken, []

    def instance(self, capability: str) -> object:
        if capability == "unknown":
            raise ModelUnavailable("models", "no backend for unknown")
        return types.SimpleNamespace(servable=capability in self.servable)

    def judge(self, role: str) -> object:
        name = f"judge:{role}"
        if name in self.broken:
            raise ModelUnavailable("vlm", "not configured")
        if name not in self.servable:
            return types.SimpleNamespace(ensure_loaded=lambda: self.loaded.append(f"endpoint {name}"))
        return types.SimpleNamespace(servable=True, ensure_loaded=lambda: self.loaded.append(name))

    def backend(self, capability: str) -> object:
        if capability in self.broken:
            raise ModelUnavailable(capability, "no weights")
        self.loaded.append(capability)
        return self.instance(capability)


def test_the_model_process_loads_the_servable_models_it_is_told_of_before_any_batch(monkeypatch, tmp_path):
    hub = _LoadingHub(servable={"audio_text", "transcriber", "speaker", "gender", "judge:default"}, broken={"transcriber", "judge:ocr"})
    monkeypatch.setattr(serving_module, "get_hub", lambda: hub)
    parent, child = multiprocessing.Pipe(duplex=False)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "models.sock"))
    listener.listen(1)
    watcher = threading.Thread(target=serving_module._watch_lifeline, args=(parent, listener), daemon=True)
    watcher.start()
    # a failed load, an unknown capability and one that is not served do not stop the loads after them
    child.send(["transcriber", "unknown", "vad", "audio_text"])
    child.send(["speaker"])
    child.send(["judge:ocr", "judge:llm", "judge"])  # a judge that fails, an endpoint's (nothing to load), a local one
    child.send(["audio_text", "speaker", "gender", "judge"])  # a kept pool names them again on its next run: loaded once
    assert wait_until(lambda: len(hub.loaded) == 4) and hub.loaded == ["audio_text", "speaker", "judge:default", "gender"]
    child.close()  # the parent is gone: the watcher shuts the listener, which ends the serving loop
    watcher.join(SAFETY_S)
    assert not watcher.is_alive()
    with listener, pytest.raises(OSError):
        listener.accept()


@pytest.mark.slow
def test_the_model_process_loads_the_local_judge_a_task_names(tmp_path, monkeypatch):
    from mmverify.models import hub
    from tests.models.test_judge import build_tiny_qwen25_vl, use_local_judge

    use_local_judge(monkeypatch, build_tiny_qwen25_vl(tmp_path / "qwen"))  # with the model process's hub
    monkeypatch.setenv("MMVERIFY_VLM_OCR_MODEL", f"transformers:{build_tiny_qwen25_vl(tmp_path / 'reader', seed=1)}")
    reader, default = hub.get_hub().judge("ocr"), hub.get_hub().judge("default")  # i_ocr asks the first alone
    assert reader is not default and reader._model is None
    serving_module.preload(serving_module.task_needs("i_ocr"))
    assert hub.get_hub().judge("ocr") is reader and reader._model is not None  # loaded before any question
    assert default._model is None  # a judge no task of the run asks is not loaded


def test_the_parent_names_each_tasks_models_and_judges_once_as_its_first_item_passes():
    from mmverify.pipelines.model_process import announced
    from tests.pipelines.test_pool_batches import item

    told: list[list[str]] = []
    plan = [
        item(0, "a_sound_cot"), {"error": "a row made while planning"}, item(1, "a_sound_cot"),
        item(2, "i_object_count"), item(3, "i_format_border"),  # a judge; no model at all: nothing to tell
        item(4, "a_speech_attribute"), item(5, "not_in_the_catalog"), item(6, "a_speech_attribute"),
        item(7, "i_ocr_multi_lingual"), item(8, "it_coherence_math"),  # the roles each task asks
    ]  # fmt: skip
    seen_when_passed = [len(told) for _ in announced(iter(plan), told.append)]
    assert seen_when_passed == [1, 1, 1, 2, 2, 3, 3, 3, 4, 5]  # told before the item goes on, once per task
    assert told == [["audio_text"], ["judge:default"], ["transcriber", "gender"], ["judge:ocr", "judge:ocr_second"], ["judge:llm", "judge:default"]]


# -- every servable backend ----------------------------------------------------------------------------
SERVING_THREADS = ("mmverify-model-reader", "mmverify-model-answer")


@contextmanager
def serving_loop(folder: Path) -> Iterator[str]:
    """A model process's serving loop in a thread of this process, answering with this process's
    hub (where tests can reach its backends); its socket's path.  On leaving, it waits until every
    connection it answered has ended (the test closes its clients): a batch still read or computed
    later would meet the next test's patches."""
    folder.mkdir(mode=0o700)
    before = set(threading.enumerate())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "models.sock"))
    listener.listen(8)
    thread = threading.Thread(target=serve, args=(listener, "token"), daemon=True)
    thread.start()
    try:
        yield str(folder / "models.sock")
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        thread.join(SAFETY_S)
        listener.close()
    assert not thread.is_alive()

    def answering() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name in SERVING_THREADS and t not in before]

    wait_until(lambda: not answering(), message=lambda: f"connections still answered: {answering()}")


def close(*clients: ModelClient) -> None:
    """End the clients' connections, as a worker's exit does."""
    for client in clients:
        client._socket.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def serving_here(tmp_path):
    with serving_loop(tmp_path / "socket") as address:
        client = ModelClient(address, "token")
        yield client
        close(client)


def _speech(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    clips = [(np.sin(np.arange(int(n)) * rng.uniform(0.01, 0.2)) * rng.uniform(0.1, 0.9)).astype(np.float32) for n in rng.integers(400, 16_000 * 7, size=count)]
    return clips + [np.zeros(3_000, np.float32), clips[0]]  # a silent clip (known without the model) and a repeat


def _backends(kind: str, root: Path) -> tuple[str, type, dict, object]:
    """(model spec, backend class, its arguments, what to compute) of one servable backend kind."""
    if kind == "whisper-hf":
        from mmverify.models.whisper import HFWhisper
        from tests.models.test_whisper import build_tiny_hf_whisper

        path = build_tiny_hf_whisper(root / "whisper", max_length=24)
        return f"transcriber=whisper-hf@{path}?batch_size=3", HFWhisper, {"source": str(path), "batch_size": 3}, lambda b: b.transcribe(_speech(5, 1))
    if kind == "whisper-openai":
        from mmverify.models.whisper_openai import OpenAIWhisper
        from tests.models.test_whisper import build_tiny_openai_whisper

        pytest.importorskip("whisper")
        path = build_tiny_openai_whisper(root / "whisper-openai" / "tiny.pt")
        arguments = {"source": str(path), "max_new_tokens": 3}
        return f"transcriber=whisper-openai@{path}?max_new_tokens=3", OpenAIWhisper, arguments, lambda b: b.transcribe(_speech(3, 7), language="en")
    if kind == "gender-w2v2":
        from mmverify.models.gender import Wav2Vec2Gender
        from tests.models.test_gender import build_tiny_gender

        path = build_tiny_gender(root / "gender")
        return f"gender=gender-w2v2@{path}?batch_size=3", Wav2Vec2Gender, {"source": str(path), "batch_size": 3}, lambda b: b.classify(_speech(6, 2))
    if kind == "wavlm-sv":
        from mmverify.models.speaker import WavLMSpeaker
        from mmverify.testing.speech_models import build_wavlm_xvector

        path = build_wavlm_xvector(root / "wavlm")
        return f"speaker=wavlm-sv@{path}?batch_size=3", WavLMSpeaker, {"source": str(path), "batch_size": 3}, lambda b: b.embed(_speech(6, 3)).tobytes()
    if kind == "ecapa":
        from mmverify.models.speaker import EcapaSpeaker
        from tests.models.test_speaker import build_tiny_ecapa

        path, _ = build_tiny_ecapa(root / "ecapa")
        return f"speaker=ecapa@{path}?batch_size=3", EcapaSpeaker, {"source": str(path), "batch_size": 3}, lambda b: b.embed(_speech(6, 5)).tobytes()
    if kind == "beat-this":
        from mmverify.models.beats import BeatThisTracker
        from tests.models.test_beats import build_tiny_beat_this, drum_track

        path = build_tiny_beat_this(root / "beat_this" / "tiny.ckpt")
        tracks = [drum_track(bpm, 3.0, sr=sr) for bpm, sr in ((90, 22050), (120, 16000), (150, 44100))]
        rates = (22050, 16000, 44100)
        return f"beat_tracker=beat-this@{path}", BeatThisTracker, {"source": str(path)}, lambda b: [b.beats(t, r).tolist() for t, r in zip(tracks, rates)]
    if kind == "resemblyzer":
        from mmverify.models.speaker import ResemblyzerSpeaker
        from mmverify.testing.speech_models import voiced_clips

        clips = voiced_clips(4, 2.5) + _speech(2, 6)  # voiced ones, and ones its voice detector may drop
        return "speaker=resemblyzer", ResemblyzerSpeaker, {}, lambda b: b.embed(clips).tobytes()
    from mmverify.models.dreamsim import DreamSimBackend
    from mmverify.testing.dreamsim_release import write_release

    path = write_release(root / "dreamsim", "open_clip_vitb32", 32)
    rng = np.random.default_rng(4)
    pictures = [rng.integers(0, 256, (40 + 9 * i, 50 + 5 * i, 3), dtype=np.uint8) for i in range(5)]
    pairs = [(pictures[i], pictures[(i * 2 + 1) % 5]) for i in range(5)] + [(pictures[0], pictures[0].copy())]
    source = f"open_clip_vitb32@{path}"
    return f"image_similarity=dreamsim@{source}?batch_size=4", DreamSimBackend, {"source": source, "batch_size": 4}, lambda b: b.similarity(pairs)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["whisper-hf", "whisper-openai", "gender-w2v2", "wavlm-sv", "ecapa", "resemblyzer", "beat-this", "dreamsim"])
def test_every_servable_backend_computes_the_bytes_of_a_local_one(kind, tmp_path, monkeypatch, serving_here):
    from contextlib import nullcontext

    from tests.tasks.speech_task_fixtures import use_models

    for package in {"ecapa": ("speechbrain",), "resemblyzer": ("resemblyzer", "webrtcvad"), "beat-this": ("beat_this",)}.get(kind, ()):
        pytest.importorskip(package)
    narrow = nullcontext()
    if kind == "dreamsim":
        pytest.importorskip("dreamsim")
        from mmverify.testing.dreamsim_release import narrow_backbones

        narrow = narrow_backbones(32)  # both copies build the narrow backbones the release was written with
    with narrow:
        spec, cls, arguments, compute = _backends(kind, tmp_path)
        use_models(monkeypatch, tmp_path / "cache", spec)  # what the serving loop answers with
        monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
        local, served = cls(**arguments), cls(**arguments)
        served.server = serving_here
        assert cls.servable and served.fingerprint == local.fingerprint
        expected = compute(local)
        launched = []
        original = serving_module._launch
        monkeypatch.setattr(serving_module, "_launch", lambda *args: launched.append(args[1].get("kind")) or original(*args))
        assert compute(served) == expected
        assert any(kind is not None for kind in launched)  # the batches were computed by the serving loop
        weights = ("_model", "model", "_encoder", "_net")
        assert any(getattr(local, name, None) is not None for name in weights)
        assert not any(getattr(served, name, None) is not None for name in weights)  # only settings were loaded here


@pytest.mark.slow
def test_a_served_local_judge_replies_as_a_local_one(tmp_path, monkeypatch, serving_here):
    """A judge of ``--vlm-model transformers:PATH`` generates in the model process, which finds its
    copy by the judge's role: the same replies and counts as a local copy, no weights here."""
    from mmverify.models.judge_local import TransformersVLMJudge
    from tests.models.test_judge import IMAGE_A, IMAGE_B, build_tiny_qwen25_vl, use_local_judge

    path = build_tiny_qwen25_vl(tmp_path / "qwen")
    use_local_judge(monkeypatch, path)  # what the serving loop answers with
    questions = [("Is there a cat? Answer Yes or No.", [IMAGE_A]), ("Text only?", []), ("Which is larger?", [IMAGE_A, IMAGE_B])]
    local = TransformersVLMJudge(str(path))
    counts = local.usage  # one set of counters per judge identity, in this process
    before = counts.counts()
    expected = [local.ask(prompt, images, max_tokens=6) for prompt, images in questions]
    asked_locally = {name: n - before[name] for name, n in counts.counts().items()}
    served = TransformersVLMJudge(str(path))
    served.server, served.role = serving_here, "ocr"  # a role without its own judge: the default's
    assert served.fingerprint == local.fingerprint and served.usage is counts
    before = counts.counts()
    assert [served.ask(prompt, images, max_tokens=6) for prompt, images in questions] == expected
    assert {name: n - before[name] for name, n in counts.counts().items()} == asked_locally
    assert asked_locally["requests"] == 3 and asked_locally["completion_tokens"] > 0
    assert served._model is None and local._model is not None  # only the model process loaded it
    other = TransformersVLMJudge(str(build_tiny_qwen25_vl(tmp_path / "other", seed=1)))
    other.server, other.role = serving_here, "default"
    with pytest.raises(ModelUnavailable, match="not with"):  # the model process's judge is another checkpoint
        other.ask("Text only?", max_tokens=6)


def test_a_hub_in_a_served_worker_has_its_local_judges_generate_there(tmp_path, monkeypatch):
    from mmverify.models import hub
    from tests.models.test_judge import use_local_judge

    clients = {"batches": object(), "judge": object()}
    monkeypatch.setattr(hub, "model_client", lambda channel="batches": clients[channel])
    use_local_judge(monkeypatch, tmp_path / "judge")
    monkeypatch.setenv("MMVERIFY_VLM_LLM_MODEL", "gpt-4o")
    monkeypatch.setenv("MMVERIFY_VLM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    judge = hub.ModelHub().judge("spatial")
    assert judge.server is clients["judge"] and judge.role == "spatial"  # never queued behind batches
    endpoint = hub.ModelHub().judge("llm")  # an endpoint judge is asked from the worker itself
    assert getattr(endpoint, "server", None) is None


def test_a_judges_questions_never_hold_a_workers_batches(tmp_path, monkeypatch):
    """A judge's questions go over a connection of their own: while the model process generates a
    reply (seconds for a VLM), the same worker's batches and questions are still answered, and a
    worker that gave up on the question is not waiting on a batch (so it is not taken for stuck)."""
    release = threading.Event()
    original = serving_module._answer_question

    def held_reply(backends, header, payload):  # type: ignore[no-untyped-def]
        if header["ask"] != "generate slowly":
            return original(backends, header, payload)
        assert release.wait(SAFETY_S)
        return "a reply"

    monkeypatch.setattr(serving_module, "_answer_question", held_reply)
    monkeypatch.setattr(served_module, "_CLIENTS", {})
    with serving_loop(tmp_path / "socket") as address:
        monkeypatch.setattr(served_module, "_ADDRESS", (address, "token"))
        batches, judge = served_module.model_client(), served_module.model_client("judge")
        for client in (batches, judge):
            client._on_lost = None  # a worker ends when its connection does: not this test process
        assert batches is not judge and served_module.model_client("batches") is batches
        with pytest.raises(ValueError, match="no model process channel"):
            served_module.model_client("other")
        reply = []
        asking = threading.Thread(target=lambda: reply.append(judge.ask("generate slowly")))
        asking.start()
        try:
            assert wait_until(judge.waiting)
            assert batches.ask("device", "cpu") == "cpu"  # not queued behind the judge's question
            assert not served_module.waiting_on_model_process()
        finally:
            release.set()
            asking.join(SAFETY_S)
        assert reply == ["a reply"]
        close(batches, judge)


class _ServingHere:
    """Stands in for a model process: the serving loop of ``serving_here``'s kind, in this process."""

    def __init__(self, address: str, token: str) -> None:
        self.address, self.token, self.process = address, token, types.SimpleNamespace(exitcode=None)

    def preload(self, capabilities: list[str]) -> None:
        serving_module.preload(capabilities)

    def ended(self, wait_s: float = 0.0) -> bool:
        return False

    def stop(self) -> None:
        pass


@pytest.mark.slow
def test_a_batch_stuck_in_the_model_process_ends_the_run(clap_run, tmp_path, monkeypatch, tiny_clap):  # noqa: F811
    from mmverify.pipelines import process_executor as executor_module
    from tests.tasks.speech_task_fixtures import use_models

    use_models(monkeypatch, tmp_path / "cache", f"audio_text=clap-hf@{tiny_clap}?batch_size=4")  # the serving loop's hub
    run_score(clap_run(tmp_path / "warm"))  # the reference index, built once in this process and cached for the workers
    release, stuck = threading.Event(), threading.Event()
    launch = HFClap._launch_audio

    def hangs_on_the_marked_clip(self, clips, padding):
        if any(clip.size == MARKED_SIZE for clip in clips):  # one C call that does not return, as far as a worker can tell
            stuck.set()
            release.wait(SAFETY_S)
        return launch(self, clips, padding)

    monkeypatch.setattr(HFClap, "_launch_audio", hangs_on_the_marked_clip)
    config = clap_run(tmp_path / "served", workers=2, model_process=True, timeout=LIMIT_S, warmup_timeout=20 * LIMIT_S)
    # the last a_sound_cot item: not its task's first use in a worker's batch of 6, which would be scored alone
    entries = [json.loads(line) for line in config.manifest.read_text().splitlines()]
    index = max(i for i, entry in enumerate(entries) if entry["task"] == "a_sound_cot")
    assert index % 6 and entries[index - 1]["task"] == "a_sound_cot"
    write(Path(entries[index]["parts"][0]["path"]), np.full(147 * 451, 0.1, np.float32))
    with serving_loop(tmp_path / "socket") as address:
        monkeypatch.setattr(executor_module, "ModelProcess", lambda context: _ServingHere(address, "token"))
        try:
            with pytest.raises(ModelProcessEnded, match="outlived its items' time limit"):
                run_score(config)
            assert stuck.is_set()
        finally:
            release.set()


@pytest.mark.slow
def test_error_rows_through_a_model_process_are_the_bytes_of_one_process(clap_run, tmp_path, monkeypatch, tiny_clap):  # noqa: F811
    """The served CLAP fails on one marked clip with an error type of this module's: the batch
    holding it is run again one input at a time, as in one process, and the one error row (its type,
    text and where it was raised) is the same bytes as one process's."""
    from mmverify.pipelines import process_executor as executor_module
    from tests.tasks.speech_task_fixtures import use_models

    use_models(monkeypatch, tmp_path / "cache", f"audio_text=clap-hf@{tiny_clap}?batch_size=4")  # the serving loop's hub
    config = clap_run(tmp_path / "one")
    entries = [json.loads(line) for line in config.manifest.read_text().splitlines()]
    marked = max(i for i, entry in enumerate(entries) if entry["task"] == "a_sound_cot")
    write(Path(entries[marked]["parts"][0]["path"]), np.full(147 * 451, 0.1, np.float32))
    launch = HFClap._launch_audio

    def refuses_the_marked_clip(self, clips, padding):
        if any(clip.size == MARKED_SIZE for clip in clips):
            raise BadClip("a clip this model cannot take")
        return launch(self, clips, padding)

    monkeypatch.setattr(HFClap, "_launch_audio", refuses_the_marked_clip)
    one = run_score(config)
    rows = [json.loads(line) for line in (tmp_path / "one" / "results.jsonl").read_text().splitlines()]
    line = refuses_the_marked_clip.__code__.co_firstlineno + 2
    assert [row["line"] for row in rows if row["status"] == "error"] == [marked + 1] and one.errors == 1
    assert rows[marked]["error"]["message"] == f"BadClip: a clip this model cannot take (at test_model_process.py:{line})"
    with serving_loop(tmp_path / "socket") as address:
        monkeypatch.setattr(executor_module, "ModelProcess", lambda context: _ServingHere(address, "token"))
        run_score(clap_run(tmp_path / "served", workers=2, model_process=True))
    assert (tmp_path / "served" / "results.jsonl").read_bytes() == (tmp_path / "one" / "results.jsonl").read_bytes()


@pytest.mark.slow
def test_the_model_process_keeps_two_batches_of_a_backend_on_the_device_and_answers_what_it_cannot_send(
    tmp_path, monkeypatch, tiny_clap  # noqa: F811
):
    from mmverify.models.batching import MAX_STARTED
    from tests.tasks.speech_task_fixtures import use_models

    use_models(monkeypatch, tmp_path / "cache", f"audio_text=clap-hf@{tiny_clap}?batch_size=2")
    launch, changed = HFClap._launch_audio, threading.Condition()
    outstanding, most = [0], [0]

    class Counted:
        """A batch on the device until its result is taken; taking it waits a little for more
        launches, which only a missing limit lets happen (the limit kept, it always waits it out)."""

        def __init__(self, handle):
            self.handle = handle

        def ready(self):
            return self.handle.ready()

        def result(self):
            with changed:
                changed.wait_for(lambda: outstanding[0] > MAX_STARTED, timeout=0.25)
                outstanding[0] -= 1
            return self.handle.result()

    def counted_launch(self, clips, padding):
        with changed:
            outstanding[0] += 1
            most[0] = max(most[0], outstanding[0])
            changed.notify_all()
        return Counted(launch(self, clips, padding))

    monkeypatch.setattr(HFClap, "_launch_audio", counted_launch)
    rng = np.random.default_rng(5)
    clips = [(rng.standard_normal(48_000) * 0.2).astype(np.float32) for _ in range(12)]
    expected = HFClap(source=str(tiny_clap), batch_size=2).embed_audio(clips).tobytes()
    results: list[bytes] = []
    with serving_loop(tmp_path / "socket") as address:
        clients = [ModelClient(address, "token") for _ in range(4)]

        def embed(client: ModelClient) -> None:
            served = HFClap(source=str(tiny_clap), batch_size=2)
            served.server = client
            results.append(served.embed_audio(clips).tobytes())

        threads = [threading.Thread(target=embed, args=(client,)) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY_S)
        assert MAX_STARTED == 2 and results == [expected] * 4 and most[0] == 2  # four workers' bulk calls, two at a time on the device

        monkeypatch.setattr(HFClap, "computation", lambda self, kind: lambda batch: {"a set": {1, 2}})
        identity = {"capability": "audio_text", "backend": "clap-hf", "fingerprint": HFClap(source=str(tiny_clap), batch_size=2).fingerprint}
        with pytest.raises(TypeError, match="cannot send a set"):  # an answer all the same: the worker does not wait for good
            clients[0].send(identity, "any", []).result()
        close(*clients)


def test_batches_of_a_worker_that_went_away_still_give_their_slots_back(tmp_path, monkeypatch):
    """A worker killed with two batches on the device: they are finished unsent, and the next
    workers' batches still launch (a slot kept for each would leave none after two such kills)."""
    from mmverify.models.rows import Staged

    device_done, launched, finished = threading.Event(), [], []

    def finish(batch):
        device_done.wait(SAFETY_S)
        finished.append(len(batch))
        return [np.ones(2)] * len(batch)

    class Device:
        name, capability, fingerprint = "fake", "fake_capability", "fake:1"

        def computation(self, kind):
            return Staged(lambda batch: launched.append(len(batch)) or batch, finish)

    device = Device()
    monkeypatch.setattr(serving_module, "get_hub", lambda: types.SimpleNamespace(backend=lambda capability: device))
    identity = {"capability": "fake_capability", "backend": "fake", "fingerprint": "fake:1"}
    with serving_loop(tmp_path / "socket") as address:
        for killed in range(2):
            worker = ModelClient(address, "token")
            worker.send(identity, "compute", [np.zeros(4)])
            worker.send(identity, "compute", [np.zeros(4)])
            wait_until(lambda: len(launched) == 2 * (killed + 1))  # both on the device
            worker._socket.shutdown(socket.SHUT_RDWR)  # as a kill would: its replies cannot be sent
            device_done.set()
            wait_until(lambda: len(finished) == 2 * (killed + 1))  # both finished, neither sent
            device_done.clear()
        device_done.set()
        client = ModelClient(address, "token")
        healthy = client.send(identity, "compute", [np.zeros(4)])
        assert healthy.arrived.wait(SAFETY_S) and healthy.result()[0].tolist() == [1.0, 1.0]
        close(client)
