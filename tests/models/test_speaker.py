"""Speaker-embedding backends: tiny random-init WavLM x-vector and ECAPA checkpoints saved locally and
loaded the way users load them, and resemblyzer's real bundled GE2E weights on espeak-ng speech."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.models.speech_fixtures import save_audio_model

from mmverify.models.base import ModelUnavailable
from mmverify.models.cache import OutputCache
from mmverify.models.catalog import BACKEND_REGISTRY
from mmverify.models.clips import conv_min_samples, length_groups
from mmverify.models.hub import ModelHub
from mmverify.models.protocols import SpeakerEmbedder
from mmverify.models.speaker import EcapaSpeaker, ResemblyzerSpeaker, WavLMSpeaker

from .speech_fixtures import SENTENCES, SR, VOICES, chirp, noise, requires_espeak, speak

HAS_SPEECHBRAIN = importlib.util.find_spec("speechbrain") is not None
HAS_RESEMBLYZER = importlib.util.find_spec("resemblyzer") is not None and importlib.util.find_spec("webrtcvad") is not None


def build_tiny_wavlm(folder: Path, norm: str = "layer", seed: int = 0) -> Path:
    """A random-init WavLMForXVector with the real architecture's parts, a few thousand weights."""
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from transformers import WavLMConfig, WavLMForXVector

    config = WavLMConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16, 16), conv_kernel=(10, 4, 4), conv_stride=(5, 4, 4),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, num_buckets=32, max_bucket_distance=64,
        tdnn_dim=(16, 16, 32), tdnn_kernel=(3, 3, 1), tdnn_dilation=(1, 2, 1), xvector_output_dim=8,
        feat_extract_norm=norm, do_stable_layer_norm=norm == "layer", num_labels=4,
    )
    torch.manual_seed(seed)
    return save_audio_model(WavLMForXVector(config).eval(), folder, SR)


@pytest.fixture(scope="module")
def tiny_wavlm(tmp_path_factory) -> Path:
    return build_tiny_wavlm(tmp_path_factory.mktemp("tiny-wavlm"))


@pytest.fixture(scope="module")
def tiny_wavlm_group(tmp_path_factory) -> Path:
    return build_tiny_wavlm(tmp_path_factory.mktemp("tiny-wavlm-group"), norm="group", seed=1)


@pytest.fixture
def clips() -> list[np.ndarray]:
    return [chirp(0.9, 120, 300, 1), noise(0.6, 2), chirp(1.5, 200, 90, 3), chirp(0.9, 400, 150, 4), noise(1.2, 5)]


class CountingWavLM(WavLMSpeaker):
    computed = 0

    def _embed_voiced(self, clips: list[np.ndarray]) -> np.ndarray:
        type(self).computed += len(clips)
        return super()._embed_voiced(clips)


def unit_rows(matrix: np.ndarray) -> None:
    assert matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


# -- helpers ---------------------------------------------------------------------------------------


def test_length_groups_never_mix_lengths_unless_padding_is_harmless():
    lengths = [5, 3, 5, 3, 7, 5]
    strict = length_groups(lengths, batch_size=2, pad_ok=False)
    assert sorted(i for g in strict for i in g) == list(range(6))
    assert all(len({lengths[i] for i in g}) == 1 and len(g) <= 2 for g in strict)
    padded = length_groups(lengths, batch_size=4, pad_ok=True)
    assert [len(g) for g in padded] == [4, 2] and sorted(i for g in padded for i in g) == list(range(6))


def test_conv_min_samples_inverts_the_output_length_formula():
    kernels, strides = (10, 3, 3), (5, 2, 2)
    for frames in (1, 2, 7):
        n = conv_min_samples(kernels, strides, frames)
        out = n
        for k, s in zip(kernels, strides):
            out = (out - k) // s + 1
        assert out == frames


# -- WavLM ------------------------------------------------------------------------------------------


def test_wavlm_shapes_unit_norm_and_protocol(tiny_wavlm, clips):
    backend = WavLMSpeaker(source=str(tiny_wavlm), device="cpu")
    assert isinstance(backend, SpeakerEmbedder) and backend.sample_rate == SR
    embeddings = backend.embed(clips)
    assert embeddings.shape == (5, 8)
    unit_rows(embeddings)
    assert backend.embed([]).shape == (0, 8)


@pytest.mark.parametrize("fixture", ["tiny_wavlm", "tiny_wavlm_group"])
def test_wavlm_batched_equals_unbatched(request, fixture, clips):
    path = request.getfixturevalue(fixture)
    batched = WavLMSpeaker(source=str(path), device="cpu", batch_size=8).embed(clips)
    single = WavLMSpeaker(source=str(path), device="cpu", batch_size=1).embed(clips)
    np.testing.assert_allclose(batched, single, atol=1e-4)
    # Order and companions do not matter either.
    reordered = WavLMSpeaker(source=str(path), device="cpu").embed(clips[::-1])[::-1]
    np.testing.assert_allclose(reordered, single, atol=1e-4)


def test_wavlm_single_clip_matches_the_model_forward(tiny_wavlm, clips):
    import torch
    from transformers import AutoFeatureExtractor, WavLMForXVector

    model = WavLMForXVector.from_pretrained(tiny_wavlm).eval()
    extractor = AutoFeatureExtractor.from_pretrained(tiny_wavlm)
    with torch.no_grad():
        reference = model(**extractor(clips[2], sampling_rate=SR, return_tensors="pt")).embeddings
    reference = torch.nn.functional.normalize(reference, dim=-1).numpy()
    np.testing.assert_allclose(WavLMSpeaker(source=str(tiny_wavlm), device="cpu").embed([clips[2]]), reference, atol=1e-5)


def test_wavlm_is_deterministic_and_tells_clips_apart(tiny_wavlm, clips):
    first = WavLMSpeaker(source=str(tiny_wavlm), device="cpu").embed(clips)
    second = WavLMSpeaker(source=str(tiny_wavlm), device="cpu").embed(clips)
    assert np.array_equal(first, second)
    assert np.abs(first[0] - first[2]).max() > 1e-3


def test_wavlm_silent_and_very_short_clips(tiny_wavlm):
    backend = WavLMSpeaker(source=str(tiny_wavlm), device="cpu")
    out = backend.embed([np.zeros(SR, np.float32), noise(0.005, 7), chirp(1.0, 100, 200)])
    assert not out[0].any()  # silence: cosine 0 with everything
    unit_rows(out[1:])
    with pytest.raises(ValueError):
        backend.embed([np.array([0.1, np.nan], np.float32)])
    with pytest.raises(ValueError):
        backend.embed([np.zeros((2, 100), np.float32)])


def test_wavlm_cache_hits_skip_the_model(tiny_wavlm, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    CountingWavLM.computed = 0
    backend = CountingWavLM(source=str(tiny_wavlm), device="cpu", cache=cache, batch_size=1)  # rows = clips
    first = backend.embed(clips)
    assert CountingWavLM.computed == 5 and len(cache) == 5
    again = CountingWavLM(source=str(tiny_wavlm), device="cpu", cache=cache, batch_size=1).embed(clips[:2] + [chirp(0.8, 90, 90, 9)])
    assert CountingWavLM.computed == 6 and cache.hits >= 2
    np.testing.assert_array_equal(again[:2], first[:2])


def test_wavlm_cache_is_keyed_by_checkpoint(tiny_wavlm, tiny_wavlm_group, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    a = WavLMSpeaker(source=str(tiny_wavlm), device="cpu", cache=cache).embed(clips[:1])
    b = WavLMSpeaker(source=str(tiny_wavlm_group), device="cpu", cache=cache).embed(clips[:1])
    assert len(cache) == 2 and not np.allclose(a, b)


def test_wavlm_unavailable_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    missing = WavLMSpeaker(source=str(tmp_path / "nowhere"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        missing.ensure_loaded()
    assert not missing.availability().ok
    uncached = WavLMSpeaker(source="mmverify-tests/not-a-cached-model")
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        uncached.embed([noise(1.0, 0)])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="cannot load"):
        WavLMSpeaker(source=str(tmp_path / "empty")).ensure_loaded()


def test_wavlm_through_registry_and_hub(tiny_wavlm, clips):
    assert BACKEND_REGISTRY.get("wavlm-sv") is WavLMSpeaker
    hub = ModelHub({"speaker": ("wavlm-sv", str(tiny_wavlm))}, device="cpu")
    embeddings = hub.backend("speaker").embed(clips[:2])
    np.testing.assert_allclose(embeddings, WavLMSpeaker(source=str(tiny_wavlm), device="cpu").embed(clips[:2]), atol=1e-6)


# -- ECAPA (speechbrain) ----------------------------------------------------------------------------

_ECAPA = dict(channels=[16, 16, 16, 16, 48], attention_channels=8, res2net_scale=4, se_channels=8, lin_neurons=12)

_HPARAMS = """\
pretrained_path: speechbrain/spkrec-ecapa-voxceleb
n_mels: 24
compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>
mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False
embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [16, 16, 16, 16, 48]
    kernel_sizes: [5, 3, 3, 3, 1]
    dilations: [1, 2, 3, 4, 1]
    attention_channels: 8
    res2net_scale: 4
    se_channels: 8
    lin_neurons: 12
classifier: !new:speechbrain.lobes.models.ECAPA_TDNN.Classifier
    input_size: 12
    out_neurons: 3
modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    classifier: !ref <classifier>
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
    paths:
        embedding_model: !ref <pretrained_path>/embedding_model.ckpt
"""


def build_tiny_ecapa(folder: Path, seed: int = 0) -> tuple[Path, object]:
    """The layout of ``speechbrain/spkrec-ecapa-voxceleb`` (its checkpoint paths point at the hub id,
    so loading only works if files are found in place) with a tiny ECAPA-TDNN."""
    import torch
    from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(_HPARAMS)
    torch.manual_seed(seed)
    model = ECAPA_TDNN(24, **_ECAPA).eval()
    torch.save(model.state_dict(), folder / "embedding_model.ckpt")
    return folder, model


@pytest.fixture(scope="module")
def tiny_ecapa(tmp_path_factory):
    if not HAS_SPEECHBRAIN:
        pytest.skip("speechbrain is not installed")
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    return build_tiny_ecapa(tmp_path_factory.mktemp("tiny-ecapa"))


def test_ecapa_loads_the_saved_weights_and_embeds(tiny_ecapa, clips, monkeypatch):
    import torch
    from speechbrain.lobes.features import Fbank

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder, model = tiny_ecapa
    before = sorted(p.name for p in folder.iterdir())
    backend = EcapaSpeaker(source=str(folder), device="cpu")
    embeddings = backend.embed(clips)
    assert embeddings.shape == (5, 12)
    unit_rows(embeddings)
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written next to the checkpoint
    # Same numbers as the saved network run by hand: the checkpoint's weights were loaded.
    with torch.no_grad():
        feats = Fbank(n_mels=24)(torch.from_numpy(clips[0])[None])
        feats = feats - feats.mean(dim=1, keepdim=True)
        reference = torch.nn.functional.normalize(model(feats).reshape(1, -1), dim=-1).numpy()
    np.testing.assert_allclose(embeddings[:1], reference, atol=1e-5)


def test_ecapa_batched_equals_unbatched_and_is_deterministic(tiny_ecapa, clips):
    folder, _ = tiny_ecapa
    batch = clips + [chirp(0.9, 300, 100, 8)]  # three 0.9 s clips share a batch
    batched = EcapaSpeaker(source=str(folder), device="cpu", batch_size=4).embed(batch)
    single = EcapaSpeaker(source=str(folder), device="cpu", batch_size=1).embed(batch)
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert np.array_equal(batched, EcapaSpeaker(source=str(folder), device="cpu", batch_size=4).embed(batch))


def test_ecapa_refuses_folders_without_hparams_and_pickled_code(tiny_ecapa, tmp_path):
    import torch

    with pytest.raises(ModelUnavailable, match="hyperparams.yaml"):
        EcapaSpeaker(source=str(tmp_path)).ensure_loaded()

    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "hyperparams.yaml").write_text(_HPARAMS)
    torch.save({"payload": Payload()}, evil / "embedding_model.ckpt")
    with pytest.raises(ModelUnavailable, match="cannot load"):
        EcapaSpeaker(source=str(evil), device="cpu").ensure_loaded()
    assert not marker.exists()


# -- resemblyzer (real bundled weights) -------------------------------------------------------------

needs_resemblyzer = pytest.mark.skipif(not HAS_RESEMBLYZER, reason="resemblyzer/webrtcvad not installed")


@needs_resemblyzer
def test_resemblyzer_bundled_weights_are_found_without_download():
    backend = ResemblyzerSpeaker(device="cpu")
    path = backend.local_path()
    assert path.name == "pretrained.pt" and path.parent.name == "resemblyzer"
    assert backend.availability().ok
    assert backend.fingerprint.startswith("resemblyzer:")
    assert BACKEND_REGISTRY.get("resemblyzer") is ResemblyzerSpeaker
    with pytest.raises(ModelUnavailable):
        ResemblyzerSpeaker(source="/nonexistent/pretrained.pt").ensure_loaded()


@pytest.fixture(scope="module")
def espeak_clips(tmp_path_factory) -> dict[tuple[int, str], np.ndarray]:
    folder = tmp_path_factory.mktemp("espeak")
    return {(s, v): speak(text, v, folder) for s, text in enumerate(SENTENCES) for v in VOICES}


@needs_resemblyzer
@requires_espeak
def test_resemblyzer_same_voice_beats_different_voice(espeak_clips):
    keys = list(espeak_clips)
    embeddings = ResemblyzerSpeaker(device="cpu").embed([espeak_clips[k] for k in keys])
    unit_rows(embeddings)
    cos = {(a, b): float(embeddings[i] @ embeddings[j]) for (i, a), (j, b) in itertools.combinations(enumerate(keys), 2)}
    same = {pair: c for pair, c in cos.items() if pair[0][1] == pair[1][1]}
    cross = {pair: c for pair, c in cos.items() if pair[0][1] != pair[1][1]}
    # Different sentences in one voice are closer than the same sentence in another voice.
    for voice in VOICES:
        other_voices = [v for v in VOICES if v != voice]
        for s in range(len(SENTENCES)):
            same_voice = cos[((0, voice), (1, voice))]
            for other in other_voices:
                pair = ((s, voice), (s, other)) if ((s, voice), (s, other)) in cos else ((s, other), (s, voice))
                assert same_voice > cos[pair], (voice, other, same_voice, cos[pair])
    assert min(same.values()) > max(cross.values()), (same, cross)


@needs_resemblyzer
@requires_espeak
def test_resemblyzer_matches_the_library_and_batching(espeak_clips, tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import resemblyzer

    clips = [espeak_clips[(0, VOICES[0])], espeak_clips[(1, VOICES[1])]]
    encoder = resemblyzer.VoiceEncoder("cpu", verbose=False)
    reference = encoder.embed_utterance(resemblyzer.preprocess_wav(clips[0]))
    cache = OutputCache(tmp_path / "cache.sqlite")
    batched = ResemblyzerSpeaker(device="cpu", batch_size=2, cache=cache).embed(clips)
    np.testing.assert_allclose(batched[0], reference, atol=1e-5)
    single = ResemblyzerSpeaker(device="cpu", batch_size=1).embed(clips)
    np.testing.assert_allclose(single, batched, atol=1e-5)
    again = ResemblyzerSpeaker(device="cpu", cache=cache).embed(clips)
    np.testing.assert_array_equal(again, batched)
    assert cache.hits == 2 and len(cache) == 2


@needs_resemblyzer
def test_resemblyzer_silence_gets_a_zero_row():
    out = ResemblyzerSpeaker(device="cpu").embed([np.zeros(SR, np.float32), np.full(SR, 1e-5, np.float32)])
    assert out.shape == (2, 256) and not out.any()


def test_precision_reaches_the_wavlm_model_its_inputs_and_its_fingerprint(tiny_wavlm, clips, monkeypatch):
    import torch

    hubs = {p: ModelHub({"speaker": ("wavlm-sv", str(tiny_wavlm))}, device="cpu", precision=p) for p in ("fp32", "bf16", "fp16")}
    full, half = hubs["fp32"].backend("speaker"), hubs["bf16"].backend("speaker")
    assert next(full._model.parameters()).dtype == torch.float32 and next(half._model.parameters()).dtype == torch.bfloat16
    assert half._inputs([clips[0]])[0].dtype == torch.bfloat16
    assert half.fingerprint == f"{full.fingerprint};precision=bf16"  # fp32's is what it always was
    a, b = full.embed(clips), half.embed(clips)
    assert b.dtype == np.float32 and b.shape == a.shape
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)  # still unit rows
    assert (a * b).sum(axis=1).min() > 0.999  # bf16 keeps 8 bits of mantissa: rounding, not another embedding
    import transformers

    def no_load(*args, **kwargs):
        raise AssertionError("weights loaded before the precision was refused")

    monkeypatch.setattr(transformers.AutoModelForAudioXVector, "from_pretrained", no_load)
    for _ in range(2):  # refused at once on every call, with nothing loaded
        with pytest.raises(ModelUnavailable, match="fp16 is not supported on the CPU"):
            hubs["fp16"].backend("speaker")
