"""CLAP backends on a tiny random-init checkpoint saved locally and loaded the way users load one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mmverify.models.base import ModelUnavailable
from mmverify.models.digests import checkpoint_digest
from mmverify.models.cache import OutputCache, array_digest
from mmverify.models.catalog import BACKEND_REGISTRY
from mmverify.models.clap import CROP_POLICY, crop_offset, deterministic_crop
from mmverify.models.clap_hf import HFClap
from mmverify.models.clap_laion import LaionClap
from mmverify.models.hub import ModelHub
from mmverify.models.protocols import AudioTextEmbedder
from mmverify.testing.tiny_models import build_tiny_clap  # noqa: F401  (imported from here by other tests)

SR = 48_000


def tone(seconds: float, freq: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    # A slow amplitude sweep makes every 10 s window of a long clip sound different.
    envelope = 0.2 + 0.8 * (t / max(t[-1], 1e-9))
    return (0.5 * envelope * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.fixture(autouse=True)
def _keep_global_numpy_state():
    """Tests below reseed numpy's global generator; put it back for everyone else."""
    state = np.random.get_state()
    yield
    np.random.set_state(state)


@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("tiny-clap"))


@pytest.fixture
def clips() -> list[np.ndarray]:
    return [tone(0.5, 440, 1), tone(3.0, 220, 2), tone(10.0, 880, 3), tone(12.5, 330, 4), tone(15.0, 660, 5)]


class CountingClap(HFClap):
    """Counts how many clips and texts reach the model."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.audio_calls: list[int] = []
        self.text_calls: list[int] = []

    def _launch_audio(self, clips, padding):
        self.audio_calls.append(len(clips))
        return super()._launch_audio(clips, padding)

    def _compute_text(self, texts):
        self.text_calls.append(len(texts))
        return super()._compute_text(texts)


def test_loads_local_checkpoint_and_embeds(tiny_clap, clips):
    clap = HFClap(source=str(tiny_clap), device="cpu")
    assert isinstance(clap, AudioTextEmbedder)
    audio = clap.embed_audio(clips)
    text = clap.embed_text(["a dog barking", "rain on a tin roof", ""])
    assert audio.shape == (len(clips), 16) and audio.dtype == np.float32
    assert text.shape == (3, 16) and text.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(audio, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(text, axis=1), 1.0, atol=1e-6)
    assert clap.embed_audio([]).shape == (0, 16)
    assert clap.sample_rate == SR and clap.fingerprint.startswith("clap-hf:")


def test_batched_equals_unbatched(tiny_clap, clips):
    batched = HFClap(source=str(tiny_clap), batch_size=4)
    single = HFClap(source=str(tiny_clap), batch_size=1)
    np.testing.assert_allclose(batched.embed_audio(clips), single.embed_audio(clips), atol=1e-5)
    texts = ["a cat", "an orchestra tuning up before a concert", "wind"]
    np.testing.assert_allclose(batched.embed_text(texts), single.embed_text(texts), atol=1e-5)


def test_same_clip_gives_identical_bytes_even_when_longer_than_the_window(tiny_clap, clips):
    long_clip = clips[-1]  # 15 s: the published preprocessing would crop it at random
    first = HFClap(source=str(tiny_clap)).embed_audio([long_clip])
    np.random.seed(1)  # the global numpy state must not matter
    second = HFClap(source=str(tiny_clap)).embed_audio([long_clip])
    assert first.tobytes() == second.tobytes()
    clap = HFClap(source=str(tiny_clap))
    assert clap.embed_audio(clips).tobytes() == clap.embed_audio(clips).tobytes()


def test_the_checkpoints_own_preprocessing_is_random_on_long_clips(tiny_clap, clips):
    """Why the crop exists: the saved extractor crops > 10 s clips at random, shorter ones never."""
    from transformers import ClapFeatureExtractor

    extractor = ClapFeatureExtractor.from_pretrained(tiny_clap, local_files_only=True)
    assert extractor.truncation == "rand_trunc"

    def features(clip: np.ndarray, seed: int) -> np.ndarray:
        np.random.seed(seed)
        return extractor(clip, sampling_rate=SR, return_tensors="np")["input_features"]

    long_clip, short_clip = clips[-1], clips[1]
    assert not np.array_equal(features(long_clip, 0), features(long_clip, 1))
    assert np.array_equal(features(short_clip, 0), features(short_clip, 1))  # repeat-pad: no randomness
    window = int(extractor.nb_max_samples)
    cropped = deterministic_crop(long_clip, window)
    assert np.array_equal(features(cropped, 0), features(cropped, 1))


def test_crop_offsets_are_content_seeded_and_uniform():
    clip = tone(15.0, 500)
    window = 10 * SR
    a, b = deterministic_crop(clip, window), deterministic_crop(clip.copy(), window)
    assert a.shape == (window,) and np.array_equal(a, b)
    short = tone(4.0, 500)
    assert deterministic_crop(short, window) is short
    overflow = 5 * SR
    offsets = np.array([crop_offset(array_digest(np.array([i], dtype=np.float32)), overflow) for i in range(2000)])
    assert offsets.min() >= 0 and offsets.max() <= overflow
    # Uniform over [0, overflow]: each fifth of the range gets about a fifth of the clips.
    counts = np.histogram(offsets, bins=5, range=(0, overflow + 1))[0]
    assert np.all(np.abs(counts - 400) < 80), counts


def test_cache_serves_repeated_clips_and_texts(tiny_clap, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    clap = CountingClap(source=str(tiny_clap), batch_size=2, cache=cache)
    first = clap.embed_audio(clips)
    # every forward runs on the fixed batch shape: 5 clips take at least 3 batches of 2 rows (more
    # where two want one row, see models/rows.py)
    calls = list(clap.audio_calls)
    assert set(calls) == {2} and len(calls) >= 3 and cache.hits == 0
    again = clap.embed_audio(clips)
    assert clap.audio_calls == calls and cache.hits == len(clips)
    assert first.tobytes() == again.tobytes()
    # Another process (a fresh backend on the same cache file) reuses the entries; only the new clip runs.
    other = CountingClap(source=str(tiny_clap), batch_size=2, cache=OutputCache(tmp_path / "cache.sqlite"))
    mixed = other.embed_audio([clips[0], tone(2.0, 100, 9), clips[2]])
    assert other.audio_calls == [2] and other.cache.hits == 2
    # another batch shape computes other bytes, so it does not share the entries
    wider = CountingClap(source=str(tiny_clap), batch_size=4, cache=OutputCache(tmp_path / "cache.sqlite"))
    wider.embed_audio([clips[0]])
    assert wider.audio_calls == [4] and wider.cache.hits == 0
    assert mixed[0].tobytes() == first[0].tobytes() and mixed[2].tobytes() == first[2].tobytes()
    texts = ["a bell", "a bell", "a drum"]
    clap.embed_text(texts)
    text_calls = list(clap.text_calls)
    assert set(text_calls) == {2} and len(text_calls) in (1, 2)  # two texts: one batch, or two if they want one row
    clap.embed_text(texts)
    assert clap.text_calls == text_calls and cache.hits == len(clips) + 3


def test_clips_are_hashed_only_where_a_crop_or_the_cache_needs_it(tiny_clap, clips):
    """Without an output cache only clips longer than the window (their crop is content-seeded) are
    hashed; what the model is given is the same either way."""
    from mmverify.models.cache import array_digest

    clap = HFClap(source=str(tiny_clap))
    clap.ensure_loaded()
    window = 10 * SR
    assert any(len(c) > window for c in clips) and any(len(c) <= window for c in clips)
    hashed, all_digests = clap.prepare(clips, "zero")
    lazily, some_digests = clap.prepare(clips, "zero", digests=False)
    assert all(np.array_equal(a, b) for a, b in zip(hashed, lazily))
    assert all_digests == [array_digest(c) for c in clips]
    assert some_digests == [d if len(c) > window else None for c, d in zip(clips, all_digests)]


def test_preparing_clips_loads_the_window_first(tiny_clap, clips):
    """The window is the checkpoint's: a backend not yet loaded loads it before cutting a clip."""
    prepared, _ = HFClap(source=str(tiny_clap)).prepare(clips, "repeat")
    assert [len(c) for c in prepared] == [min(len(c), 10 * SR) for c in clips]


def test_zero_padding_fills_the_window_with_silence(tiny_clap, clips):
    from transformers import ClapFeatureExtractor

    clap = HFClap(source=str(tiny_clap))
    clap.ensure_loaded()
    window = 10 * SR
    prepared, _ = clap.prepare(clips, "zero")
    for clip, ready in zip(clips, prepared):
        assert ready.shape == (window,)
        if len(clip) <= window:
            assert np.array_equal(ready[: len(clip)], clip) and not ready[len(clip) :].any()
    repeat, _ = clap.prepare(clips, "repeat")
    assert [len(r) for r in repeat] == [min(len(c), window) for c in clips]  # the extractor pads these

    # The model is given the features of the clip followed by silence, whatever the extractor's own mode:
    # exactly the extractor's through the numpy front end, to float rounding through the torch one.
    extractor = ClapFeatureExtractor.from_pretrained(tiny_clap, local_files_only=True)
    padded = [np.concatenate([c, np.zeros(window - len(c), dtype=np.float32)]).astype(np.float64) for c in clips[:2]]
    expected = extractor(padded, sampling_rate=SR, return_tensors="np")["input_features"]
    numpy_clap = HFClap(source=str(tiny_clap), features="numpy")
    numpy_clap.ensure_loaded()
    np.testing.assert_array_equal(numpy_clap.input_features(prepared[:2]), expected)
    np.testing.assert_allclose(clap.input_features(prepared[:2]), expected, rtol=0, atol=1e-4)
    assert not np.allclose(clap.input_features(repeat[:2]), expected, atol=1.0)

    zero, tiled = clap.embed_audio(clips[:2]), clap.embed_audio(clips[:2], padding="repeat")
    assert not np.allclose(zero, tiled, atol=1e-3)
    # A clip that fills the window is padded by neither rule.
    np.testing.assert_array_equal(clap.embed_audio([clips[2]]), clap.embed_audio([clips[2]], padding="repeat"))


def test_an_empty_clip_is_ten_seconds_of_silence_when_zero_padding(tiny_clap):
    clap = HFClap(source=str(tiny_clap))
    silent = clap.embed_audio([np.zeros(0, dtype=np.float32), np.zeros(10 * SR, dtype=np.float32), np.zeros(1, dtype=np.float32)])
    np.testing.assert_allclose(silent[0], silent[1], atol=1e-6)
    np.testing.assert_allclose(silent[2], silent[1], atol=1e-6)
    assert not np.allclose(silent[0], clap.embed_audio([tone(3.0, 440)])[0], atol=1e-3)
    with pytest.raises(ValueError, match="empty"):
        clap.embed_audio([np.zeros(0, dtype=np.float32)], padding="repeat")  # repeating nothing is undefined
    with pytest.raises(ValueError, match="padding"):
        clap.embed_audio([tone(1.0, 440)], padding="reflect")


def test_padding_rule_keys_the_cache_and_the_front_end(tiny_clap, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    clap = CountingClap(source=str(tiny_clap), batch_size=2, cache=cache)
    zero = clap.embed_audio(clips[:2])
    zero_calls = len(clap.audio_calls)
    tiled = clap.embed_audio(clips[:2], padding="repeat")
    assert len(clap.audio_calls) > zero_calls and cache.hits == 0  # no entry is served across padding rules
    view = clap.front_end("repeat")
    assert view.embed_audio(clips[:2]).tobytes() == tiled.tobytes() and cache.hits == 2
    assert clap.front_end().embed_audio(clips[:2]).tobytes() == zero.tobytes() and cache.hits == 4
    assert view.fingerprint == clap.fingerprint and view.sample_rate == SR
    assert view.preprocessing == f"{CROP_POLICY};pad=repeat"
    assert clap.front_end("zero").preprocessing == clap.preprocessing == f"{CROP_POLICY};pad=zero"
    assert view.embed_text(["a bell"]).tobytes() == clap.embed_text(["a bell"]).tobytes()
    with pytest.raises(ValueError, match="padding"):
        clap.front_end("none")


def test_unavailable_checkpoints_raise_model_unavailable(tmp_path, monkeypatch):
    missing = HFClap(source=str(tmp_path / "absent"))
    with pytest.raises(ModelUnavailable, match="does not exist") as info:
        missing.ensure_loaded()
    assert info.value.code == "model_unavailable"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="cannot load a CLAP checkpoint"):
        HFClap(source=str(tmp_path / "empty")).ensure_loaded()

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    uncached = HFClap(source="mmverify-tests/clap-not-downloaded")
    state = uncached.availability()
    assert not state.ok and "download it into the local Hugging Face cache" in state.reason  # not the default checkpoint
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        uncached.ensure_loaded()


def test_selectable_by_name_through_the_hub(tiny_clap, clips):
    assert BACKEND_REGISTRY.get("clap-hf") is HFClap and BACKEND_REGISTRY.get("laion-clap") is LaionClap
    backend = ModelHub({"audio_text": ("clap-hf", str(tiny_clap))}).backend("audio_text")
    assert isinstance(backend, HFClap)
    reference = HFClap(source=str(tiny_clap)).embed_audio(clips[:2])
    assert backend.embed_audio(clips[:2]).tobytes() == reference.tobytes()
    assert backend.crop_policy == CROP_POLICY


def test_fused_checkpoints_are_deterministic_too(tmp_path, clips):
    folder = build_tiny_clap(tmp_path / "fused", fusion=True)
    batched = HFClap(source=str(folder), batch_size=4)
    first = batched.embed_audio(clips)
    np.random.seed(7)
    assert first.tobytes() == batched.embed_audio(clips).tobytes()
    np.testing.assert_allclose(first, HFClap(source=str(folder), batch_size=1).embed_audio(clips), atol=1e-5)
    # Both front ends give the fused model four copies of the HTK-scale mel of the window.
    through_numpy = HFClap(source=str(folder), features="numpy")
    through_numpy.ensure_loaded()
    prepared, _ = batched.prepare(clips)
    expected = through_numpy.input_features(prepared)
    assert expected.shape[1] == 4
    np.testing.assert_allclose(batched.input_features(prepared), expected, rtol=0, atol=1e-4)
    np.testing.assert_allclose(first, through_numpy.embed_audio(clips), atol=1e-5)


def test_front_end_and_precision_are_part_of_the_fingerprint(tiny_clap, clips, tmp_path):
    base = HFClap(source=str(tiny_clap), features="numpy")
    # the checkpoint, the fixed batch shape that outputs depend on (models/batching.py) and the device type
    assert base.fingerprint == f"clap-hf:{checkpoint_digest(tiny_clap)};rows=8;row=content;device={base.device_type}"
    assert HFClap(source=str(tiny_clap), features="numpy", batch_size=32).fingerprint.endswith(f";rows=32;row=content;device={base.device_type}")
    variants = {
        (features, precision): HFClap(source=str(tiny_clap), features=features, precision=precision)
        for features in ("numpy", "torch") for precision in ("fp32", "bf16")
    }  # fmt: skip
    assert len({backend.fingerprint for backend in variants.values()}) == 4
    assert variants["torch", "fp32"].fingerprint == f"{base.fingerprint};features=torch-mel/1"
    assert HFClap(source=str(tiny_clap)).fingerprint == variants["torch", "fp32"].fingerprint  # the default
    assert variants["numpy", "bf16"].fingerprint == f"{base.fingerprint};precision=bf16"

    # No cached embedding is served across front ends or precisions.
    cache = OutputCache(tmp_path / "cache.sqlite")
    for features, precision in variants:
        backend = CountingClap(source=str(tiny_clap), features=features, precision=precision, cache=cache, batch_size=2)
        backend.embed_audio(clips[:2])
        backend.embed_text(["a bell"])
        assert set(backend.audio_calls) == {2} and backend.text_calls == [2]  # one text, padded to the batch shape
    assert cache.hits == 0


def test_bf16_runs_on_the_cpu_close_to_fp32_and_fp16_is_refused(tiny_clap, clips):
    fp32 = HFClap(source=str(tiny_clap), device="cpu")
    bf16 = HFClap(source=str(tiny_clap), device="cpu", precision="bf16")
    audio32, audio16 = fp32.embed_audio(clips), bf16.embed_audio(clips)
    assert audio16.dtype == np.float32 and str(bf16._model.dtype) == "torch.bfloat16"
    cosines = np.sum(audio32 * audio16, axis=1)
    assert cosines.min() > 0.999 and not np.array_equal(audio32, audio16), cosines
    texts = ["a dog barking", "rain"]
    assert np.sum(fp32.embed_text(texts) * bf16.embed_text(texts), axis=1).min() > 0.999
    with pytest.raises(ModelUnavailable, match="fp16 is not supported on the CPU; use bf16"):
        HFClap(source=str(tiny_clap), device="cpu", precision="fp16").ensure_loaded()
    with pytest.raises(ValueError, match="precision"):
        HFClap(source=str(tiny_clap), precision="fp8")
    with pytest.raises(ValueError, match="features"):
        HFClap(source=str(tiny_clap), features="librosa")


def test_spec_options_and_the_process_precision_reach_the_backend(tiny_clap, monkeypatch):
    from mmverify.models import hub

    spec = f"audio_text=clap-hf@{tiny_clap}?precision=bf16&batch_size=3&features=numpy"
    assert hub.parse_spec(spec) == ("audio_text", "clap-hf", str(tiny_clap))
    assert hub.parse_spec_options(spec) == {"audio_text": {"precision": "bf16", "batch_size": 3, "features": "numpy"}}
    monkeypatch.setenv(hub.ENV_VAR, spec)
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    backend = hub.ModelHub.from_env().backend("audio_text")
    assert (backend.precision, backend.batch_size, backend.features) == ("bf16", 3, "numpy")
    assert backend.source == str(tiny_clap)

    # A process-wide precision reaches every backend that has one; a spec's own option wins.
    monkeypatch.setenv(hub.PRECISION_ENV_VAR, "bf16")
    monkeypatch.setenv(hub.ENV_VAR, f"audio_text=clap-hf@{tiny_clap}")
    assert hub.ModelHub.from_env().backend("audio_text").precision == "bf16"
    monkeypatch.setenv(hub.ENV_VAR, f"audio_text=clap-hf@{tiny_clap}?precision=fp32")
    assert hub.ModelHub.from_env().backend("audio_text").precision == "fp32"
    monkeypatch.setenv(hub.PRECISION_ENV_VAR, "fp64")  # each backend's error, naming the variable
    with pytest.raises(ModelUnavailable, match="MMVERIFY_PRECISION: precision must be one of fp32, bf16, fp16"):
        hub.ModelHub.from_env().backend("audio_text")

    bad = {
        "?precision=int8": "precision must be one of", "?batch_size=0": "integer >= 1", "?features=cuda": "one of torch, numpy",
        "?colour=red": "has no option 'colour'", "?device=cuda": "has no option 'device'", "?batch_size": "name=value",
        "?features=numpy&features=torch": "twice",
    }  # fmt: skip
    for suffix, message in bad.items():
        with pytest.raises(ValueError, match=message):
            hub.parse_specs(f"audio_text=clap-hf@{tiny_clap}{suffix}")


@pytest.mark.skipif(importlib.util.find_spec("laion_clap") is not None, reason="laion_clap is installed here")
def test_laion_clap_reports_the_missing_package(tmp_path):
    checkpoint = tmp_path / "630k-audioset-best.pt"
    checkpoint.write_bytes(b"not really a checkpoint")
    backend = LaionClap(source=str(checkpoint))
    state = backend.availability()
    assert not state.ok and "laion_clap" in state.reason and 'pip install "mmverify[laion-clap]"' in state.reason
    with pytest.raises(ModelUnavailable, match=r'pip install "mmverify\[laion-clap\]"'):
        backend.ensure_loaded()


def test_laion_clap_without_a_checkpoint_says_how_to_configure_one(monkeypatch):
    monkeypatch.delenv("MMVERIFY_LAION_CLAP_SOURCE", raising=False)
    with pytest.raises(ModelUnavailable, match="MMVERIFY_LAION_CLAP_SOURCE"):
        LaionClap().local_path()


@pytest.fixture
def fake_laion_clap(monkeypatch):
    """A stand-in ``laion_clap`` module: records what the backend does around import and construction."""
    import importlib.machinery
    import os
    import sys
    import types

    import torch

    seen: dict[str, list] = {"offline": [], "lengths": []}

    class CLAP_Module:  # noqa: N801 - the package's own name
        def __init__(self, enable_fusion: bool = False, device: str | None = None, amodel: str = "HTSAT-tiny") -> None:
            seen["offline"].append(os.environ.get("HF_HUB_OFFLINE"))
            self.model = torch.nn.Linear(4, 3)
            self.model_cfg = {"embed_dim": 3}

        def get_audio_embedding_from_data(self, x, use_tensor=False):
            seen["lengths"].append([len(a) for a in x])
            weight = self.model.weight.detach().numpy()
            return np.stack([weight @ np.array([len(a), float(np.sum(a)), 1.0, 2.0]) for a in x])

        def get_text_embedding(self, texts):
            assert len(texts) > 1, "laion_clap mishandles a single text"
            return np.array([[len(t), 1.0, 0.5] for t in texts], dtype=np.float32)

    module = types.ModuleType("laion_clap")
    module.__spec__ = importlib.machinery.ModuleSpec("laion_clap", None)
    module.CLAP_Module = CLAP_Module
    monkeypatch.setitem(sys.modules, "laion_clap", module)
    return seen


def fake_laion_checkpoint(folder: Path) -> tuple[Path, dict]:
    """A ``.pt`` file as laion_clap saves them (a DataParallel state dict), for the stand-in's model."""
    import torch

    weights = {"module.weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) / 10, "module.bias": torch.zeros(3)}
    checkpoint = folder / "630k-audioset-best.pt"
    torch.save({"state_dict": weights, "epoch": 45}, checkpoint)
    return checkpoint, weights


def test_laion_clap_loads_weights_safely_offline_and_crops(fake_laion_clap, tmp_path, monkeypatch):
    import os

    import torch

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    checkpoint, weights = fake_laion_checkpoint(tmp_path)
    backend = LaionClap(source=str(tmp_path))  # a folder holding one .pt
    backend.ensure_loaded()
    assert fake_laion_clap["offline"] == ["1"] and "HF_HUB_OFFLINE" not in os.environ
    assert torch.equal(backend._module.model.weight, weights["module.weight"])

    audio = backend.embed_audio([tone(15.0, 300), tone(2.0, 300)])
    # cropped; zero-padded by default; the batch filled to its fixed shape with copies of its first clip
    assert fake_laion_clap["lengths"] == [[10 * SR] * backend.batch_size]
    backend.embed_audio([tone(2.0, 300)], padding="repeat")
    assert fake_laion_clap["lengths"][-1] == [2 * SR] * backend.batch_size  # laion_clap repeat-pads it itself
    np.testing.assert_allclose(np.linalg.norm(audio, axis=1), 1.0, atol=1e-6)
    assert backend.embed_text(["one text"]).shape == (1, 3)

    import argparse

    torch.save({"state_dict": weights, "args": argparse.Namespace(lr=0.1)}, checkpoint)  # needs unpickling code
    with pytest.raises(ModelUnavailable, match="cannot load checkpoint"):
        LaionClap(source=str(checkpoint)).ensure_loaded()


def test_a_served_laion_clap_embeds_what_a_local_one_does(fake_laion_clap, tmp_path, monkeypatch):
    """Under ``--model-process`` the stand-in package embeds in the model process: the worker's
    copy checks, crops and pads as a local one does, and learns the embedding size from there.
    (The real package needs numpy<2 and tokenizers from the hub; the stand-in records what it is given.)"""
    from tests.pipelines.test_model_process import close, serving_loop
    from tests.tasks.speech_task_fixtures import use_models
    from mmverify.models.served import ModelClient

    checkpoint, _ = fake_laion_checkpoint(tmp_path)
    use_models(monkeypatch, tmp_path / "cache", f"audio_text=laion-clap@{checkpoint}?batch_size=2")  # what the loop serves
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    clips = [tone(15.0, 300), tone(2.0, 300), tone(0.5, 440, seed=1), tone(10.0, 200)]
    texts = ["one text", "a second, longer text", "three"]
    local = LaionClap(source=str(checkpoint), batch_size=2)
    expected = [local.embed_audio(clips, padding).tobytes() for padding in ("zero", "repeat")]
    expected += [local.embed_text(texts[:1]).tobytes(), local.embed_text(texts).tobytes()]
    given_locally = list(fake_laion_clap["lengths"])
    with serving_loop(tmp_path / "socket") as address:
        served = LaionClap(source=str(checkpoint), batch_size=2)
        served.server = ModelClient(address, "token")
        try:
            assert LaionClap.servable and served.fingerprint == local.fingerprint
            assert served.embedding_dim() == 3  # told by the model process
            computed = [served.embed_audio(clips, padding).tobytes() for padding in ("zero", "repeat")]
            computed += [served.embed_text(texts[:1]).tobytes(), served.embed_text(texts).tobytes()]
        finally:
            close(served.server)
    assert computed == expected
    assert fake_laion_clap["lengths"][len(given_locally):] == given_locally  # the same clips reached the package
    assert served._module is None and local._module is not None  # only the model process loaded it
