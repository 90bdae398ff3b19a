"""Whisper backends on tiny random-init checkpoints saved locally and loaded the way users load one.

Random weights transcribe gibberish; what is checked is the plumbing: one string per clip, forced
language/task prompts, batching, determinism, long-clip chunking, caching and error reporting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmverify.core.media import load_audio
from mmverify.models.base import ModelUnavailable
from mmverify.models.cache import OutputCache
from mmverify.models.catalog import BACKEND_REGISTRY
from mmverify.models.hub import ModelHub, parse_specs
from mmverify.models.protocols import Transcriber
from mmverify.testing.tiny_models import build_tiny_hf_whisper  # noqa: F401  (imported from here by other tests)
from mmverify.models.whisper import (
    DECODE_POLICY,
    DETECT,
    HFWhisper,
    HFWhisperChinese,
    split_long_clip,
)
from mmverify.models.whisper_openai import OpenAIWhisper

pytest.importorskip("torch")
pytest.importorskip("transformers")

SR = 16_000


def build_tiny_openai_whisper(path: Path, seed: int = 0) -> Path:
    """A random-init openai-whisper model with the multilingual vocabulary, saved as its .pt format."""
    import torch
    from whisper.model import ModelDimensions, Whisper

    dims = ModelDimensions(
        n_mels=80, n_audio_ctx=1500, n_audio_state=64, n_audio_head=2, n_audio_layer=1,
        n_vocab=51865, n_text_ctx=448, n_text_state=64, n_text_head=2, n_text_layer=1,
    )
    torch.manual_seed(seed)
    model = Whisper(dims)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"dims": dims.__dict__, "model_state_dict": model.state_dict()}, path)
    return path


def espeak(text: str, folder: Path, name: str, seconds: float | None = None) -> np.ndarray:
    """Real synthetic speech at 16 kHz, optionally padded/cut to ``seconds``."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed")
    wav = folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    audio, _ = load_audio(wav, SR)
    if seconds is not None:
        n = int(seconds * SR)
        audio = np.pad(audio, (0, max(0, n - audio.size)))[:n]
    return audio


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory) -> Path:
    return build_tiny_hf_whisper(tmp_path_factory.mktemp("tiny-whisper-hf"))


@pytest.fixture(scope="module")
def tiny_openai(tmp_path_factory) -> Path:
    pytest.importorskip("whisper")
    return build_tiny_openai_whisper(tmp_path_factory.mktemp("tiny-whisper-openai") / "tiny-random.pt")


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    return espeak("The quick brown fox jumps over the lazy dog.", tmp_path_factory.mktemp("speech"), "fox", 5.0)


@pytest.fixture(scope="module")
def clips(speech) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    t = np.arange(2 * SR) / SR
    return [speech, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rng.normal(0, 0.1, SR).astype(np.float32)]


class Recorder:
    """Wraps a loaded model's ``generate``/``transcribe`` to count calls and keep their arguments."""

    def __init__(self, backend: Any, method: str) -> None:
        self.calls: list[dict[str, Any]] = []
        self.outputs: list[Any] = []
        original = getattr(backend.model, method)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(kwargs)
            out = original(*args, **kwargs)
            self.outputs.append(out)
            return out

        setattr(backend.model, method, wrapped)


# -- chunking ----------------------------------------------------------------------------------
def test_split_long_clip_cuts_at_quiet_points():
    rng = np.random.default_rng(1)
    clip = rng.normal(0, 0.2, 70 * SR).astype(np.float32)
    clip[int(27.0 * SR) : int(27.4 * SR)] = 0.0  # a pause inside the search region of the first window
    pieces = split_long_clip(clip, SR)
    assert np.array_equal(np.concatenate(pieces), clip)
    assert all(p.size <= 30 * SR for p in pieces)
    assert 27.0 * SR <= pieces[0].size <= 27.4 * SR
    assert len(pieces) == 3
    assert [p.size for p in split_long_clip(clip, SR)] == [p.size for p in pieces]
    short = clip[: 30 * SR]
    assert len(split_long_clip(short, SR)) == 1
    with pytest.raises(ValueError):
        split_long_clip(clip, SR, window_s=30, search_s=40)


# -- transformers backend ----------------------------------------------------------------------
def test_hf_whisper_transcribes_batched_like_unbatched(tiny_hf, clips):
    batched = HFWhisper(source=str(tiny_hf), batch_size=3, max_new_tokens=8)
    single = HFWhisper(source=str(tiny_hf), batch_size=1, max_new_tokens=8)
    assert isinstance(batched, Transcriber)
    out = batched.transcribe(clips, language="english")
    assert len(out) == len(clips) and all(isinstance(text, str) for text in out)
    assert out == [text.strip() for text in out]
    assert single.transcribe(clips, language="english") == out  # deterministic across loads and batches
    assert batched.transcribe([clips[1]], language="en") == [out[1]]
    assert batched.model.training is False


def test_a_fixed_decode_length_does_not_repeat_transformers_length_notice(tiny_hf, clips):
    import logging

    class Recorder(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    logger = logging.getLogger("transformers.generation.utils")
    recorder = Recorder()
    logger.addHandler(recorder)
    try:
        backend = HFWhisper(source=str(tiny_hf), batch_size=2, max_new_tokens=4)
        backend.transcribe(clips[:2], language="english")
        backend.transcribe(clips[2:4], language="english")
        logger.warning("Both `max_new_tokens` (=5) and `max_length` (=9) ...")  # another caller's notice passes
    finally:
        logger.removeHandler(recorder)
    assert [text for text in recorder.messages if "max_new_tokens" in text] == ["Both `max_new_tokens` (=5) and `max_length` (=9) ..."]


def prompts(backend: HFWhisper) -> list[list[str]]:
    """Records the decoder prompt of every ``generate`` call (its first forward pass)."""
    seen: list[list[str]] = []
    forward = backend.model.forward

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("decoder_input_ids")
        if ids is not None and ids.shape[1] > 1:
            seen.append(backend.processor.tokenizer.convert_ids_to_tokens(ids[0].tolist()))
        return forward(*args, **kwargs)

    backend.model.forward = wrapped
    return seen


def test_hf_whisper_forces_language_and_greedy_transcription(tiny_hf, speech):
    backend = HFWhisper(source=str(tiny_hf), max_new_tokens=6)
    backend.ensure_loaded()
    recorder = Recorder(backend, "generate")
    seen = prompts(backend)
    backend.transcribe([speech], language="English")
    options = recorder.calls[-1]
    assert options["language"] == "en" and options["task"] == "transcribe"
    assert options["num_beams"] == 1 and options["do_sample"] is False and options["max_new_tokens"] == 6
    assert seen[-1] == ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]
    backend.transcribe([speech], language="chinese")
    assert seen[-1][1] == "<|zh|>"
    backend.transcribe([speech])  # no language: detected per clip
    assert "language" not in recorder.calls[-1]
    assert seen[-1][1] in ("<|en|>", "<|zh|>") and seen[-1][2] == "<|transcribe|>"
    with pytest.raises(ValueError):
        backend.transcribe([speech], language="klingon")


def test_hf_whisper_chinese_defaults_to_chinese(tiny_hf, speech):
    backend = HFWhisperChinese(source=str(tiny_hf), max_new_tokens=4)
    assert backend.name == "whisper-hf-zh" and backend.default_source == "BELLE-2/Belle-whisper-large-v3-zh"
    backend.ensure_loaded()
    recorder = Recorder(backend, "generate")
    text = backend.transcribe([speech])
    assert recorder.calls[-1]["language"] == "zh"
    english = HFWhisper(source=str(tiny_hf), max_new_tokens=4)
    assert english.transcribe([speech], language="zh") == text
    assert backend.fingerprint != english.fingerprint  # different backends never share cache entries


def test_hf_whisper_chunks_long_clips(tiny_hf, speech):
    backend = HFWhisper(source=str(tiny_hf), max_new_tokens=3, rows="packed")  # rows by content may collide
    backend.ensure_loaded()
    recorder = Recorder(backend, "generate")
    long_clip = np.concatenate([speech] * 7)  # 35 s -> two pieces
    text = backend.transcribe([long_clip, speech], language="en")
    assert len(text) == 2 and text[0] != ""
    # the three pieces of both clips in one batch, filled to the fixed batch shape
    assert len(recorder.outputs) == 1 and len(recorder.outputs[0]) == backend.batch_size
    assert backend.transcribe([long_clip], language="en") == text[:1]


def test_max_seconds_transcribes_only_the_first_seconds(tiny_hf, speech, tmp_path):
    """A 35 s clip limited to 30 s is decoded exactly like its first 30 s (one piece, not two), and
    the limit is part of the cache key."""
    cache = OutputCache(tmp_path / "cache.sqlite")
    backend = HFWhisper(source=str(tiny_hf), max_new_tokens=3, cache=cache, batch_size=1)  # one piece per generate
    backend.ensure_loaded()
    recorder = Recorder(backend, "generate")
    long_clip = np.concatenate([speech] * 7)  # 35 s
    head = backend.transcribe([long_clip[: 30 * SR]], language="en")
    limited = backend.transcribe([long_clip], language="en", max_seconds=30)
    assert limited == head
    assert [len(out) for out in recorder.outputs] == [1, 1]  # one 30 s piece each time
    assert len(cache) == 2  # the 30 s clip and the 35 s clip limited to 30 s: two keys, one decode each
    assert backend.transcribe([long_clip], language="en", max_seconds=30.0) == head and len(recorder.outputs) == 2
    whole = backend.transcribe([long_clip], language="en")
    assert len(recorder.outputs) == 4  # the whole clip: two pieces
    assert len(cache) == 3 and isinstance(whole[0], str)
    for bad in (0, -1.0, "30"):
        with pytest.raises(ValueError):
            backend.transcribe([speech], max_seconds=bad)  # type: ignore[arg-type]


def test_detect_overrides_a_forced_default_language(tiny_hf, speech):
    backend = HFWhisperChinese(source=str(tiny_hf), max_new_tokens=3)
    backend.ensure_loaded()
    recorder = Recorder(backend, "generate")
    backend.transcribe([speech])
    assert recorder.calls[-1]["language"] == "zh"
    backend.transcribe([speech], language=DETECT)
    assert "language" not in recorder.calls[-1]


def test_hf_whisper_cache_hits_skip_the_model(tiny_hf, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    backend = HFWhisper(source=str(tiny_hf), max_new_tokens=5, cache=cache)
    first = backend.transcribe(clips, language="en")
    assert cache.misses == len(clips) and len(cache) == len(clips)
    recorder = Recorder(backend, "generate")
    assert backend.transcribe(clips, language="english") == first  # same language, other spelling
    assert cache.hits == len(clips) and recorder.calls == []
    backend.transcribe(clips[:1], language="zh")  # another language is another entry
    assert len(recorder.calls) == 1 and len(cache) == len(clips) + 1
    other = HFWhisper(source=str(tiny_hf), max_new_tokens=6, cache=cache)
    other.transcribe(clips[:1], language="en")  # other decoding settings: no stale reuse
    assert len(cache) == len(clips) + 2
    assert DECODE_POLICY


def test_empty_and_invalid_clips(tiny_hf):
    backend = HFWhisper(source=str(tiny_hf), max_new_tokens=4)
    assert backend.transcribe([]) == []
    assert backend.transcribe([np.zeros(0, dtype=np.float32)], language="en") == [""]
    with pytest.raises(ValueError):
        backend.transcribe([np.zeros((2, SR), dtype=np.float32)])
    with pytest.raises(ValueError):
        backend.transcribe([np.full(SR, np.nan, dtype=np.float32)])
    with pytest.raises(ValueError):
        HFWhisper(source=str(tiny_hf), max_new_tokens=0)


def test_hf_whisper_unavailable(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    missing = HFWhisper(source=str(tmp_path / "nowhere"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        missing.ensure_loaded()
    uncached = HFWhisper(source="mmverify-tests/no-such-whisper")
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        uncached.ensure_loaded()
    assert uncached.availability().ok is False
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelUnavailable, match="cannot load"):
        HFWhisper(source=str(empty)).ensure_loaded()
    stray = tmp_path / "weights.pt"
    stray.write_bytes(b"x")
    with pytest.raises(ModelUnavailable, match="not a transformers checkpoint folder"):
        HFWhisper(source=str(stray)).ensure_loaded()


def test_catalog_names_resolve_to_these_classes(tiny_hf):
    assert BACKEND_REGISTRY.get("whisper-hf") is HFWhisper
    assert BACKEND_REGISTRY.get("whisper-openai") is OpenAIWhisper
    assert issubclass(BACKEND_REGISTRY.get("whisper-hf-zh"), HFWhisper)
    hub = ModelHub(parse_specs(f"transcriber=whisper-hf@{tiny_hf}"))
    backend = hub.backend("transcriber")
    assert isinstance(backend, HFWhisper) and backend.source == str(tiny_hf)


# -- openai-whisper backend --------------------------------------------------------------------
def test_openai_whisper_transcribes_espeak_speech(tiny_openai, speech, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    backend = OpenAIWhisper(source=str(tiny_openai), max_new_tokens=8, cache=cache)
    assert isinstance(backend, Transcriber)
    first = backend.transcribe([speech], language="en")
    assert len(first) == 1 and isinstance(first[0], str)
    again = OpenAIWhisper(source=str(tiny_openai), max_new_tokens=8)
    out = again.transcribe(clips, language="english")  # deterministic across loads and batches
    assert out[0] == first[0] and len(out) == len(clips) and all(isinstance(text, str) for text in out)
    recorder = Recorder(backend, "transcribe")
    assert backend.transcribe([speech], language="en") == first and recorder.calls == []  # cache hit
    assert cache.hits == 1


def test_openai_whisper_decodes_at_temperature_zero_without_history(tiny_openai, speech):
    backend = OpenAIWhisper(source=str(tiny_openai), max_new_tokens=4)
    backend.ensure_loaded()
    recorder = Recorder(backend, "transcribe")
    backend.transcribe([np.concatenate([speech] * 7)], language="en")  # 35 s: two pieces
    assert len(recorder.calls) == 2
    options = recorder.calls[0]
    assert options["temperature"] == 0.0 and options["condition_on_previous_text"] is False
    assert options["fp16"] is False and options["language"] == "en" and options["sample_len"] == 4


def test_openai_whisper_refuses_pickled_code(tmp_path):
    import torch

    pytest.importorskip("whisper")
    bad = tmp_path / "bad.pt"
    torch.save({"dims": {}, "model_state_dict": {}, "payload": Path("/")}, bad)  # an arbitrary object
    with pytest.raises(ModelUnavailable, match="weights-only"):
        OpenAIWhisper(source=str(bad)).ensure_loaded()
    odd = tmp_path / "odd.pt"
    torch.save({"weights": torch.zeros(2)}, odd)
    with pytest.raises(ModelUnavailable, match="dims"):
        OpenAIWhisper(source=str(odd)).ensure_loaded()
    mismatched = tmp_path / "mismatched.pt"
    torch.save({"dims": {"n_mels": 80}, "model_state_dict": {}}, mismatched)
    with pytest.raises(ModelUnavailable, match="do not fit"):
        OpenAIWhisper(source=str(mismatched)).ensure_loaded()


def test_openai_whisper_model_names_resolve_in_the_cache(tiny_openai, tmp_path, monkeypatch):
    pytest.importorskip("whisper")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "whisper-cache"
    with pytest.raises(ModelUnavailable, match="models fetch whisper-openai"):
        OpenAIWhisper(source="large-v3", download_root=root).ensure_loaded()
    with pytest.raises(ModelUnavailable, match="unknown model"):
        OpenAIWhisper(source="no-such-size", download_root=root).local_path()
    with pytest.raises(ModelUnavailable, match="does not exist"):
        OpenAIWhisper(source=str(tmp_path / "missing.pt")).local_path()
    root.mkdir()
    shutil.copy(tiny_openai, root / "tiny.pt")
    named = OpenAIWhisper(source="tiny", download_root=root, max_new_tokens=2)
    assert named.local_path() == root / "tiny.pt"
    assert named.availability().ok
    named.ensure_loaded()
    # openai-whisper's own download folder is used when the file is already there
    package_root = tmp_path / "xdg" / "whisper"
    package_root.mkdir(parents=True)
    shutil.copy(tiny_openai, package_root / "base.pt")
    assert OpenAIWhisper(source="base", download_root=root).local_path() == package_root / "base.pt"
    # a name never reaches past the download folder, nor resolves there without being a known name
    (tmp_path / "outside.pt").write_bytes(b"")
    (root / "sub").mkdir()
    for odd in ("sub/../../outside", ".hidden", "a b"):
        with pytest.raises(ModelUnavailable, match="unknown model"):
            OpenAIWhisper(source=odd, download_root=root).local_path()


def test_openai_whisper_names_resolve_to_the_files_openai_whisper_downloads(tiny_openai, tmp_path, monkeypatch):
    """Each name's file is the one openai-whisper's own downloader writes (its URL's last part):
    ``large`` is found, and fetched, as ``large-v3.pt``."""
    whisper = pytest.importorskip("whisper")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "whisper-cache"
    for name, url in whisper._MODELS.items():
        with pytest.raises(ModelUnavailable, match="is not at"):
            OpenAIWhisper(source=name, download_root=root).local_path()
        root.mkdir(exist_ok=True)
        (root / url.rsplit("/", 1)[1]).write_bytes(b"")
        assert OpenAIWhisper(source=name, download_root=root).local_path() == root / url.rsplit("/", 1)[1]
        shutil.rmtree(root)

    def download(url: str, folder: str, in_memory: bool) -> str:  # what openai-whisper's downloader does, offline
        target = Path(folder) / url.rsplit("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tiny_openai, target)
        return str(target)

    monkeypatch.setattr(whisper, "_download", download)
    fetched = OpenAIWhisper(source="turbo", download_root=root).fetch()
    assert fetched == root / "large-v3-turbo.pt" and OpenAIWhisper(source="turbo", download_root=root).local_path() == fetched


def test_a_fetched_openai_whisper_resolves_without_importing_torch(tiny_openai, tmp_path):
    """A worker of a model process keys a named checkpoint by its file alone: finding it imports
    neither openai-whisper nor torch (a name not found still asks openai-whisper for its names)."""
    import sys

    root = tmp_path / "whisper-cache"
    root.mkdir()
    shutil.copy(tiny_openai, root / "tiny.pt")
    script = (
        "import sys\n"
        "from mmverify.models.whisper_openai import OpenAIWhisper\n"
        f"print(OpenAIWhisper(source='tiny', download_root={str(root)!r}).local_path())\n"
        "print(sorted(set(sys.modules) & {'torch', 'whisper'}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [str(root / "tiny.pt"), "[]"]


@pytest.mark.slow
def test_five_second_clips_in_a_batch_transcribe_like_one_alone(tiny_hf, tiny_openai, speech):
    """A full batch of 5 s clips gives every clip the transcript it gets alone, with both backends."""
    hf = HFWhisper(source=str(tiny_hf), batch_size=4)
    alone = hf.transcribe([speech], language="en")
    assert HFWhisper(source=str(tiny_hf), batch_size=4).transcribe([speech] * 4, language="en") == alone * 4
    ow = OpenAIWhisper(source=str(tiny_openai))
    alone = ow.transcribe([speech], language="en")
    assert OpenAIWhisper(source=str(tiny_openai)).transcribe([speech] * 2, language="en") == alone * 2


def test_an_optional_numeric_spec_option_is_typed_by_its_annotation():
    from mmverify.models.hub import backend_options

    assert backend_options("whisper-hf", {"max_new_tokens": "16"}) == {"max_new_tokens": 16}
    with pytest.raises(ValueError, match="max_new_tokens .* must be of type int"):
        backend_options("whisper-hf", {"max_new_tokens": "sixteen"})


def test_precision_reaches_the_transformers_whisper_model_its_inputs_and_its_fingerprint(tiny_hf, clips):
    import torch

    fp32, bf16 = (ModelHub(parse_specs(f"transcriber=whisper-hf@{tiny_hf}"), device="cpu", precision=p) for p in ("fp32", "bf16"))
    full, half = fp32.backend("transcriber"), bf16.backend("transcriber")
    assert next(full.model.parameters()).dtype == torch.float32 and next(half.model.parameters()).dtype == torch.bfloat16
    assert full._input_features([clips[0]]).dtype == torch.float32 and half._input_features([clips[0]]).dtype == torch.bfloat16
    assert half.fingerprint == f"{full.fingerprint};dtype=bfloat16"  # fp32's is what it always was
    texts = half.transcribe(clips[:2], language="en")
    assert len(texts) == 2 and all(isinstance(text, str) for text in texts)
    # a spec's own dtype wins over the run's precision
    spec = parse_specs(f"transcriber=whisper-hf@{tiny_hf}")
    own = ModelHub(spec, device="cpu", precision="bf16", options={"transcriber": {"dtype": "float16"}})
    assert own.instance("transcriber").dtype_name == "float16"
    with pytest.raises(ModelUnavailable, match="fp16 is not supported on the CPU"):  # as for the other backends
        own.backend("transcriber")
    with pytest.raises(ValueError, match="precision must be one of"):
        HFWhisper(source=str(tiny_hf), precision="fp8")
    with pytest.raises(ValueError, match="dtype of backend .whisper-hf. must be one of float32, bfloat16, float16"):  # refused
        parse_specs(f"transcriber=whisper-hf@{tiny_hf}?dtype=bf16")
