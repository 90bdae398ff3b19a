"""The torch Whisper front end against transformers' ``WhisperFeatureExtractor``.

Features of every clip are compared with what the extractor computes from the same clip (its own
30 s truncation and zero padding): the largest difference must stay within 1e-4 of the clip's
feature range.  The extractor's numpy path (float64 spectrogram) is a second reference.
Downstream, a tiny random-init Whisper must transcribe a seeded corpus identically through both
front ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmverify.models.base import ModelUnavailable
from mmverify.models.digests import checkpoint_digest
from mmverify.models.cache import OutputCache
from mmverify.models.whisper import HFWhisper, split_long_clip
from mmverify.models.whisper_features import WhisperMelFeatures, WhisperMelSettings, scale_log_mel, waveform_batch
from tests.models import audio_corpus
from tests.models.test_whisper import build_tiny_hf_whisper

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SR = 16_000
WINDOW = 30 * SR
REL_TOLERANCE = 1e-4  # of the clip's feature range (max - min)


def make_extractor(feature_size: int = 80, **overrides: Any) -> Any:
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=feature_size, **overrides)


def extractor_features(extractor: Any, clip: np.ndarray) -> np.ndarray:
    """The extractor's features of one clip, as ``HFWhisper(features="numpy")`` calls it."""
    return extractor([clip], sampling_rate=SR, return_tensors="np")["input_features"][0]


def numpy_path_features(extractor: Any, clip: np.ndarray) -> np.ndarray:
    """The extractor's numpy fallback (float64 spectrogram) on the clip truncated and zero-padded."""
    window = np.zeros(WINDOW, dtype=np.float32)
    kept = np.asarray(clip, dtype=np.float32)[:WINDOW]
    window[: kept.size] = kept
    return extractor._np_extract_fbank_features(window[None], "cpu")[0]


def sine(seconds: float, freq: float, amplitude: float = 1.0) -> np.ndarray:
    return audio_corpus.sine(seconds, freq, SR, amplitude)


def corpus(seed: int = 0) -> dict[str, np.ndarray]:
    """Edge lengths around the frame and the 30 s window, silence, full-scale noise and tones."""
    rng = np.random.default_rng(seed)
    clips = {
        **audio_corpus.short_clips(rng, SR, 400),
        "7.3 s chord": sine(7.3, 300.0, 0.3) + sine(7.3, 2_950.0, 0.2) + sine(7.3, 7_600.0, 0.1),
        "click": np.eye(1, 5 * SR, int(rng.integers(0, 5 * SR)), dtype=np.float32)[0],
        "window - 150": rng.uniform(-1, 1, WINDOW - 150).astype(np.float32),  # sound in the end reflection
        "exactly 30 s full-scale noise": rng.uniform(-1, 1, WINDOW).astype(np.float32),
        "31.5 s noise (truncated)": (0.5 * rng.standard_normal(int(31.5 * SR))).astype(np.float32),
        "45 s tone (truncated)": sine(45, 1_234.5, 0.8),
        "30 s silence": np.zeros(WINDOW, dtype=np.float32),
    }
    return clips


CORPUS = corpus()


def relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    """Largest difference as a fraction of the reference's range (silence: the difference itself)."""
    spread = float(reference.max() - reference.min())
    worst = float(np.abs(ours - reference).max())
    return worst / spread if spread > 0 else worst


@pytest.fixture(scope="module", params=[80, 128], ids=["80 mels", "128 mels (large-v3)"])
def front_end(request) -> tuple[Any, WhisperMelFeatures]:
    extractor = make_extractor(request.param)
    return extractor, WhisperMelFeatures.from_extractor(extractor)


# -- settings and filterbank -----------------------------------------------------------------------
def test_settings_follow_the_extractor(front_end):
    extractor, mel = front_end
    settings = mel.settings
    assert (settings.sampling_rate, settings.n_fft, settings.hop_length) == (SR, 400, 160)
    assert settings.n_mels == extractor.feature_size and settings.n_samples == WINDOW
    assert settings.n_frames == extractor.nb_max_frames == 3000


def test_filterbank_matches_the_extractor(front_end):
    extractor, mel = front_end
    np.testing.assert_allclose(mel.settings.filterbank().numpy(), extractor.mel_filters, rtol=1e-10, atol=1e-12)


def test_dithering_extractors_are_refused():
    with pytest.raises(ValueError, match="dither"):
        WhisperMelSettings.from_extractor(make_extractor(dither=1e-4))


# -- features ------------------------------------------------------------------------------------
def test_batched_features_match_the_extractor_clip_by_clip(front_end):
    extractor, mel = front_end
    features = mel(list(CORPUS.values()))
    assert features.dtype == torch.float32 and features.shape == (len(CORPUS), mel.settings.n_mels, 3000)
    errors = {}
    for row, (name, clip) in zip(features.numpy(), CORPUS.items()):
        reference = extractor_features(extractor, clip)
        assert reference.shape == row.shape, name
        errors[name] = relative_error(row, reference)
    assert max(errors.values()) <= REL_TOLERANCE, errors


@pytest.mark.parametrize("name", list(CORPUS))
def test_single_clips_match_both_extractor_paths(front_end, name):
    extractor, mel = front_end
    clip = CORPUS[name]
    ours = mel([clip])[0].numpy()
    assert relative_error(ours, extractor_features(extractor, clip)) <= REL_TOLERANCE
    assert relative_error(ours, numpy_path_features(extractor, clip)) <= REL_TOLERANCE


def test_silence_is_the_extractor_floor_exactly(front_end):
    extractor, mel = front_end
    ours = mel([CORPUS["empty"], CORPUS["3 s silence"], CORPUS["30 s silence"]]).numpy()
    reference = extractor_features(extractor, CORPUS["30 s silence"])
    assert np.array_equal(ours, np.broadcast_to(reference, ours.shape))
    assert np.all(reference == (-10.0 + 4.0) / 4.0)


def test_full_window_transform_matches_the_extractor(front_end):
    """Without a sounding length every frame is transformed; the result is the extractor's still."""
    extractor, mel = front_end
    clips = [CORPUS["6 s tone + noise"], CORPUS["0.3 s noise"]]
    features = mel.from_waveforms(waveform_batch(clips, WINDOW, "cpu")).numpy()
    for row, clip in zip(features, clips):
        assert relative_error(row, extractor_features(extractor, clip)) <= REL_TOLERANCE


def test_waveform_batch_truncates_and_zero_pads():
    clips = [np.arange(5, dtype=np.float64), np.ones(WINDOW + 7, dtype=np.float32), np.zeros(0, dtype=np.float32)]
    batch = waveform_batch(clips, WINDOW, "cpu")
    assert batch.dtype == torch.float32 and batch.shape == (3, WINDOW)
    assert batch[0, :5].tolist() == [0, 1, 2, 3, 4] and not batch[0, 5:].any()
    assert bool((batch[1] == 1).all()) and not batch[2].any()


def test_scaling_clamps_each_clip_to_its_own_range():
    log_mel = torch.tensor([[[-10.0, 1.0], [-3.0, -6.5]], [[-10.0, -10.0], [-9.0, -10.0]]])
    expected = torch.tensor([[[-7.0, 1.0], [-3.0, -6.5]], [[-10.0, -10.0], [-9.0, -10.0]]])
    assert torch.equal(scale_log_mel(log_mel), (expected + 4.0) / 4.0)


def test_wrong_waveform_shapes_are_refused(front_end):
    _, mel = front_end
    with pytest.raises(ValueError, match="waveforms"):
        mel.from_waveforms(torch.zeros(2, WINDOW - 1))


# -- the backend ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory) -> Path:
    return build_tiny_hf_whisper(tmp_path_factory.mktemp("tiny-whisper-features"))


def speechlike_corpus(seed: int = 1) -> list[np.ndarray]:
    """Seeded clips of varied lengths (one over 30 s, split before decoding): tones, noise, chirps."""
    rng = np.random.default_rng(seed)
    clips = []
    for seconds in (0.5, 2.0, 4.0, 7.5, 12.0, 33.0):
        t = np.arange(int(seconds * SR)) / SR
        pitch = rng.uniform(100, 400) * (1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t))
        voiced = np.sin(2 * np.pi * np.cumsum(pitch) / SR) * np.abs(np.sin(np.pi * t * rng.uniform(1, 4)))
        clips.append((0.3 * voiced + 0.02 * rng.standard_normal(t.size)).astype(np.float32))
    clips.append(rng.uniform(-1, 1, 3 * SR).astype(np.float32))
    return clips


def test_both_front_ends_transcribe_identically(tiny_hf):
    clips = speechlike_corpus()
    via_torch = HFWhisper(source=str(tiny_hf), batch_size=4, max_new_tokens=8)
    via_numpy = HFWhisper(source=str(tiny_hf), batch_size=4, max_new_tokens=8, features="numpy")
    texts = via_torch.transcribe(clips, language="en")
    assert texts == via_numpy.transcribe(clips, language="en")
    assert len(set(texts)) > 1  # the random model's output depends on the input
    # The model sees the extractor's features from either front end.
    pieces = [piece for clip in clips for piece in split_long_clip(clip, SR)]
    torch_input = via_torch._input_features(pieces)
    assert torch_input.device == via_torch.model.device
    np.testing.assert_allclose(torch_input.numpy(), via_numpy._input_features(pieces).numpy(), rtol=0, atol=2e-4)


def test_front_end_is_part_of_the_fingerprint(tiny_hf, tmp_path):
    via_numpy = HFWhisper(source=str(tiny_hf), features="numpy")
    # checkpoint, batch shape and device type
    assert via_numpy.fingerprint == f"whisper-hf:{checkpoint_digest(tiny_hf)};rows=8;row=content;device={via_numpy.device_type}"
    assert HFWhisper(source=str(tiny_hf)).fingerprint == f"{via_numpy.fingerprint};features=torch-log-mel/1"
    cache = OutputCache(tmp_path / "cache.sqlite")
    clip = speechlike_corpus()[1]
    for features in ("numpy", "torch"):
        HFWhisper(source=str(tiny_hf), features=features, cache=cache, max_new_tokens=4).transcribe([clip])
    assert cache.hits == 0
    with pytest.raises(ValueError, match="features"):
        HFWhisper(source=str(tiny_hf), features="librosa")


def test_spec_option_selects_the_front_end(tiny_hf, monkeypatch):
    from mmverify.models import hub

    spec = f"transcriber=whisper-hf@{tiny_hf}?features=numpy"
    assert hub.parse_spec_options(spec) == {"transcriber": {"features": "numpy"}}
    monkeypatch.setenv(hub.ENV_VAR, spec)
    monkeypatch.setenv("MMVERIFY_NO_OUTPUT_CACHE", "1")
    assert hub.ModelHub.from_env().backend("transcriber").features == "numpy"


def test_mel_count_must_fit_the_model(tiny_hf, tmp_path):
    import json
    import shutil

    folder = tmp_path / "mismatch"
    shutil.copytree(tiny_hf, folder)
    config_path = folder / "processor_config.json"
    config = json.loads(config_path.read_text())
    config["feature_extractor"]["feature_size"] = 128  # the model takes 80
    config_path.write_text(json.dumps(config))
    (folder / "preprocessor_config.json").unlink(missing_ok=True)
    with pytest.raises(ModelUnavailable, match="128 mel bins"):
        HFWhisper(source=str(folder)).ensure_loaded()
