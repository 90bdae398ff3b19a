"""wav2vec2 gender classifier on a tiny random-init checkpoint saved locally and loaded the way users
load the MMMG one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.models.speech_fixtures import save_audio_model

from mmverify.models.base import ModelUnavailable
from mmverify.models.cache import OutputCache
from mmverify.models.catalog import BACKEND_REGISTRY
from mmverify.models.gender import Wav2Vec2Gender, normalise_label
from mmverify.models.hub import ModelHub
from mmverify.models.protocols import GenderClassifier

from .speech_fixtures import SR, chirp, noise


def build_tiny_gender(folder: Path, norm: str = "layer", labels: tuple[str, str] = ("female", "male"), seed: int = 0) -> Path:
    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForSequenceClassification

    config = Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16, 16, 16), conv_kernel=(10, 4, 4, 2), conv_stride=(5, 4, 4, 2), conv_bias=True,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, classifier_proj_size=16,
        feat_extract_norm=norm, do_stable_layer_norm=norm == "layer",
        num_labels=2, id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(seed)
    return save_audio_model(Wav2Vec2ForSequenceClassification(config).eval(), folder, SR)


@pytest.fixture(scope="module")
def tiny_gender(tmp_path_factory) -> Path:
    return build_tiny_gender(tmp_path_factory.mktemp("tiny-gender"))


@pytest.fixture(scope="module")
def tiny_gender_group(tmp_path_factory) -> Path:
    return build_tiny_gender(tmp_path_factory.mktemp("tiny-gender-group"), norm="group", labels=("Female", "MALE"), seed=1)


@pytest.fixture
def clips() -> list[np.ndarray]:
    return [chirp(1.0, 120, 300, 1), noise(0.7, 2), chirp(2.0, 220, 90, 3), chirp(1.0, 400, 150, 4)]


class CountingGender(Wav2Vec2Gender):
    computed = 0

    def _compute(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        type(self).computed += len(clips)
        return super()._compute(clips)


def as_matrix(results: list[dict[str, float]]) -> np.ndarray:
    return np.array([[r["female"], r["male"]] for r in results])


def test_probabilities_per_clip(tiny_gender, clips):
    backend = Wav2Vec2Gender(source=str(tiny_gender), device="cpu")
    assert isinstance(backend, GenderClassifier) and backend.sample_rate == SR
    results = backend.classify(clips)
    assert len(results) == 4 and all(set(r) == {"female", "male"} for r in results)
    np.testing.assert_allclose(as_matrix(results).sum(axis=1), 1.0, atol=1e-6)
    assert backend.classify([]) == []


def _forward(folder: Path, clip: np.ndarray) -> np.ndarray:
    import torch
    from transformers import AutoFeatureExtractor, Wav2Vec2ForSequenceClassification

    model = Wav2Vec2ForSequenceClassification.from_pretrained(folder).eval()
    extractor = AutoFeatureExtractor.from_pretrained(folder)
    with torch.no_grad():
        logits = model(**extractor(clip, sampling_rate=SR, return_tensors="pt")).logits
    return torch.softmax(logits, dim=-1).numpy()


@pytest.mark.parametrize("fixture", ["tiny_gender", "tiny_gender_group"])
def test_short_clips_are_zero_padded_to_five_seconds_before_the_extractor(request, fixture, clips):
    """As published: a 2 s clip is classified as 2 s of speech followed by 3 s of zeros, which the
    extractor's normalisation and the model both see; that is not the unpadded clip's answer."""
    folder = request.getfixturevalue(fixture)
    padded = np.concatenate([clips[2], np.zeros(5 * SR - clips[2].size, np.float32)])
    result = as_matrix(Wav2Vec2Gender(source=str(folder), device="cpu").classify([clips[2]]))
    np.testing.assert_allclose(result, _forward(folder, padded), atol=1e-5)
    assert np.abs(result - _forward(folder, clips[2])).max() > 1e-4


def test_matches_the_model_forward_on_five_second_clips(tiny_gender):
    clip = chirp(5.0, 150, 250, 21)
    np.testing.assert_allclose(as_matrix(Wav2Vec2Gender(source=str(tiny_gender), device="cpu").classify([clip])), _forward(tiny_gender, clip), atol=1e-5)


def test_only_the_first_five_seconds_count(tiny_gender):
    head = chirp(5.0, 150, 250, 11)
    a = np.concatenate([head, chirp(5.0, 300, 80, 12)])
    b = np.concatenate([head, noise(5.0, 13, 0.3)])
    backend = Wav2Vec2Gender(source=str(tiny_gender), device="cpu")
    ra, rb, rh, other = backend.classify([a, b, head, chirp(10.0, 300, 80, 12)])
    assert ra == rb == rh
    assert ra != other


@pytest.mark.parametrize("fixture", ["tiny_gender", "tiny_gender_group"])
def test_batched_equals_unbatched(request, fixture, clips):
    path = request.getfixturevalue(fixture)
    batched = as_matrix(Wav2Vec2Gender(source=str(path), device="cpu", batch_size=8).classify(clips))
    single = as_matrix(Wav2Vec2Gender(source=str(path), device="cpu", batch_size=1).classify(clips))
    np.testing.assert_allclose(batched, single, atol=1e-5)
    again = as_matrix(Wav2Vec2Gender(source=str(path), device="cpu", batch_size=8).classify(clips))
    assert np.array_equal(batched, again)


def test_labels_are_normalised(tiny_gender_group, clips):
    assert [normalise_label(x) for x in ("Female", " MALE ", "other")] == ["female", "male", "other"]
    results = Wav2Vec2Gender(source=str(tiny_gender_group), device="cpu").classify(clips[:1])
    assert set(results[0]) == {"female", "male"}


def test_silence_is_uniform_and_short_clips_work(tiny_gender):
    backend = Wav2Vec2Gender(source=str(tiny_gender), device="cpu")
    silent, short = backend.classify([np.zeros(SR, np.float32), noise(0.01, 3)])
    assert silent == {"female": 0.5, "male": 0.5}
    assert abs(sum(short.values()) - 1.0) < 1e-6


def test_cache_hits_skip_the_model(tiny_gender, clips, tmp_path):
    cache = OutputCache(tmp_path / "cache.sqlite")
    CountingGender.computed = 0
    first = CountingGender(source=str(tiny_gender), device="cpu", cache=cache, batch_size=1).classify(clips)  # rows = clips
    assert CountingGender.computed == 4 and len(cache) == 4
    # A clip that differs only after 5 s is the same input as far as the classifier is concerned.
    long_a = np.concatenate([chirp(5.0, 150, 250, 11), noise(1.0, 1)])
    long_b = np.concatenate([chirp(5.0, 150, 250, 11), noise(2.0, 2)])
    second = CountingGender(source=str(tiny_gender), device="cpu", cache=cache, batch_size=1).classify(clips + [long_a, long_b])
    assert CountingGender.computed == 5
    assert second[:4] == first and second[4] == second[5]


def test_unavailable_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        Wav2Vec2Gender(source=str(tmp_path / "nowhere")).classify([noise(1.0, 0)])
    uncached = Wav2Vec2Gender(source="mmverify-tests/not-a-cached-classifier")
    assert not uncached.availability().ok
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        uncached.ensure_loaded()


def test_through_registry_and_hub(tiny_gender, clips):
    assert BACKEND_REGISTRY.get("gender-w2v2") is Wav2Vec2Gender
    backend = ModelHub({"gender": ("gender-w2v2", str(tiny_gender))}, device="cpu").backend("gender")
    assert backend.classify(clips[:1]) == Wav2Vec2Gender(source=str(tiny_gender), device="cpu").classify(clips[:1])


def test_precision_reaches_the_gender_classifier_and_its_fingerprint(tiny_gender, clips):
    import torch

    full, half = (ModelHub({"gender": ("gender-w2v2", str(tiny_gender))}, device="cpu", precision=p).backend("gender") for p in ("fp32", "bf16"))
    assert next(full._model.parameters()).dtype == torch.float32 and next(half._model.parameters()).dtype == torch.bfloat16
    assert half.fingerprint == f"{full.fingerprint};precision=bf16"
    a, b = as_matrix(full.classify(clips)), as_matrix(half.classify(clips))
    np.testing.assert_allclose(b.sum(axis=1), 1.0, atol=1e-6)
    assert np.abs(a - b).max() < 0.01  # bf16 rounding, not another answer
