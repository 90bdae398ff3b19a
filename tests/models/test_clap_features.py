"""The torch CLAP front end against transformers' ``ClapFeatureExtractor`` and librosa.

Features are compared clip by clip with what the extractor computes from the same window (the
clip cropped at mmverify's content-seeded offset, then zero- or repeat-padded): the largest
difference must stay within 1e-4 of the clip's dynamic range in dB.  Downstream, embeddings of a
tiny random-init ClapModel and the verdicts of the sound tasks must not depend on the front end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmverify.models.clap_features import ClapMelFeatures, ClapMelSettings, deterministic_crop, waveform_batch
from mmverify.models.mel import hz_to_mel, last_sounding_sample, mel_filterbank, mel_to_hz, sounding_frames
from tests.models import audio_corpus
from tests.models.test_clap import build_tiny_clap

torch = pytest.importorskip("torch")

SR = 48_000
WINDOW = 10 * SR
REL_TOLERANCE = 1e-4  # of the clip's dynamic range in dB
# laion/clap-htsat-unfused's preprocessor settings, and the coarse ones of the tiny test checkpoints.
REAL = dict(feature_size=64, hop_length=480)
TINY = dict(feature_size=16, hop_length=4800)


def make_extractor(fusion: bool = False, **overrides: Any) -> Any:
    from transformers import ClapFeatureExtractor

    settings = dict(
        feature_size=64, sampling_rate=SR, hop_length=480, max_length_s=10, fft_window_size=1024,
        frequency_min=50, frequency_max=14_000, truncation="fusion" if fusion else "rand_trunc", padding="repeatpad",
    )  # fmt: skip
    settings.update(overrides)
    return ClapFeatureExtractor(**settings)


def extractor_features(extractor: Any, clip: np.ndarray, padding: str) -> np.ndarray:
    """The extractor's features of the window mmverify gives the model: the content-seeded crop,
    then silence (``"zero"``) or the extractor's own "repeatpad" (``"repeat"``)."""
    window = deterministic_crop(clip, WINDOW)
    if padding == "zero":
        window = np.concatenate([window, np.zeros(WINDOW - len(window), dtype=np.float32)])
    out = extractor(window.astype(np.float64), sampling_rate=SR, padding="repeatpad", return_tensors="np")
    return out["input_features"][0]


def sine(seconds: float, freq: float, amplitude: float = 1.0) -> np.ndarray:
    return audio_corpus.sine(seconds, freq, SR, amplitude)


def corpus(seed: int = 0) -> dict[str, np.ndarray]:
    """Edge lengths around the window and the frame reach, silence, full-scale noise and tones."""
    rng = np.random.default_rng(seed)
    clips = {
        **audio_corpus.short_clips(rng, SR, 480),
        "click": np.eye(1, 5 * SR, int(rng.integers(0, 5 * SR)), dtype=np.float32)[0],
        "window - 600": rng.uniform(-1, 1, WINDOW - 600).astype(np.float32),
        "window - 512": rng.uniform(-1, 1, WINDOW - 512).astype(np.float32),
        "window - 1": rng.uniform(-1, 1, WINDOW - 1).astype(np.float32),
        "window, full-scale noise": rng.uniform(-1, 1, WINDOW).astype(np.float32),
        "window silence": np.zeros(WINDOW, dtype=np.float32),
        "window + 1": rng.uniform(-1, 1, WINDOW + 1).astype(np.float32),
        "12.5 s full-scale tone": sine(12.5, 3_001.0),
        "15 s noise": (0.2 * rng.standard_normal(15 * SR)).astype(np.float32),
    }
    for i, length in enumerate(rng.integers(2, 14 * SR, 4)):
        clips[f"random {i}"] = (rng.uniform(0.01, 1.0) * rng.standard_normal(int(length))).astype(np.float32)
    return clips


def relative_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Largest |difference| over the clip's dynamic range (silence has none: it must match exactly)."""
    difference = float(np.abs(ours.astype(np.float64) - theirs).max())
    spread = float(theirs.max() - theirs.min())
    return difference / spread if spread > 0 else (0.0 if difference == 0 else np.inf)


# -- mel scale and filterbank ----------------------------------------------------------------------
@pytest.mark.parametrize("scale", ["htk", "slaney"])
def test_mel_scale_matches_librosa(scale):
    import librosa

    hz = torch.tensor([0.0, 20.0, 50.0, 700.0, 999.9, 1000.0, 1000.1, 4000.0, 14_000.0, 24_000.0], dtype=torch.float64)
    expected = librosa.hz_to_mel(hz.numpy(), htk=scale == "htk")
    np.testing.assert_allclose(hz_to_mel(hz, scale).numpy(), expected, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(mel_to_hz(hz_to_mel(hz, scale), scale).numpy(), hz.numpy(), rtol=1e-12, atol=1e-9)
    with pytest.raises(ValueError, match="mel scale"):
        hz_to_mel(hz, "kaldi")


@pytest.mark.parametrize("n_mels,f_min,f_max", [(64, 50.0, 14_000.0), (16, 50.0, 14_000.0), (32, 0.0, 24_000.0)])
def test_filterbanks_match_transformers_and_librosa(n_mels, f_min, f_max):
    import librosa
    from transformers.audio_utils import mel_filter_bank

    slaney = mel_filterbank(513, n_mels, f_min, f_max, SR, "slaney", slaney_norm=True).numpy()
    htk = mel_filterbank(513, n_mels, f_min, f_max, SR, "htk", slaney_norm=False).numpy()
    assert slaney.shape == htk.shape == (513, n_mels)
    theirs_slaney = mel_filter_bank(513, n_mels, f_min, f_max, SR, norm="slaney", mel_scale="slaney")
    theirs_htk = mel_filter_bank(513, n_mels, f_min, f_max, SR, norm=None, mel_scale="htk")
    np.testing.assert_allclose(slaney, theirs_slaney, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(htk, theirs_htk, rtol=1e-10, atol=1e-14)
    librosa_slaney = librosa.filters.mel(sr=SR, n_fft=1024, n_mels=n_mels, fmin=f_min, fmax=f_max, htk=False, norm="slaney", dtype=np.float64)
    np.testing.assert_allclose(slaney, librosa_slaney.T, rtol=1e-10, atol=1e-14)
    assert not np.allclose(slaney, htk)  # the two truncation modes really use different filters


def test_settings_are_read_from_the_extractor():
    settings = ClapMelSettings.from_extractor(make_extractor(feature_size=16, hop_length=4800, frequency_min=20))
    assert (settings.n_mels, settings.hop_length, settings.f_min, settings.f_max) == (16, 4800, 20.0, 14_000.0)
    assert (settings.sampling_rate, settings.n_fft, settings.max_samples, settings.n_frames) == (SR, 1024, WINDOW, 101)
    assert not settings.fusion and settings.channels == 1
    fused = ClapMelSettings.from_extractor(make_extractor(fusion=True))
    assert fused.fusion and fused.channels == 4
    assert not ClapMelSettings.from_extractor(make_extractor(fusion=True), fusion=False).fusion


# -- features against the extractor ---------------------------------------------------------------
@pytest.fixture(scope="module")
def clips() -> dict[str, np.ndarray]:
    return corpus()


@pytest.mark.parametrize("padding", ["zero", "repeat"])
@pytest.mark.parametrize(
    "fusion,overrides", [(False, REAL), (False, TINY), (True, REAL)], ids=["unfused", "unfused-coarse", "fused"]
)
def test_features_match_the_extractor(clips, padding, fusion, overrides):
    extractor = make_extractor(fusion=fusion, **overrides)
    front_end = ClapMelFeatures.from_extractor(extractor)
    named = {name: clip for name, clip in clips.items() if padding == "zero" or len(clip)}
    ours = front_end(list(named.values()), padding=padding).numpy()
    channels, frames = (4 if fusion else 1), 1 + WINDOW // overrides["hop_length"]
    assert ours.shape == (len(named), channels, frames, overrides["feature_size"]) and ours.dtype == np.float32
    errors = {}
    for (name, clip), features in zip(named.items(), ours):
        theirs = extractor_features(extractor, clip, padding)
        assert theirs.shape == features.shape, name
        errors[name] = relative_error(features, theirs)
    assert max(errors.values()) <= REL_TOLERANCE, {k: f"{v:.2e}" for k, v in errors.items() if v > REL_TOLERANCE}


def test_float32_transforms_miss_the_quiet_bands_of_a_full_scale_tone():
    """Why the STFT runs in float64: in float32 the rounding noise lifts bands far below a tone."""
    extractor = make_extractor()
    clip = sine(10, 997.0)
    theirs = extractor_features(extractor, clip, "zero")
    front_end = ClapMelFeatures.from_extractor(extractor)
    assert relative_error(front_end([clip], compute_dtype=torch.float64).numpy()[0], theirs) <= REL_TOLERANCE
    assert relative_error(front_end([clip], compute_dtype=torch.float32).numpy()[0], theirs) > REL_TOLERANCE


def test_a_batch_gives_each_clip_its_own_features(clips):
    front_end = ClapMelFeatures.from_extractor(make_extractor(**TINY))
    batch = list(clips.values())[:10]
    together = front_end(batch).numpy()
    for clip, features in zip(batch, together):
        np.testing.assert_allclose(front_end([clip]).numpy()[0], features, rtol=0, atol=1e-5)
    assert front_end([]).shape == (0, 1, 101, 16)


def test_silent_tails_are_not_transformed_but_read_minus_100_db():
    hop, n_fft = 480, 1024
    batch = torch.zeros((2, WINDOW), dtype=torch.float32)
    assert last_sounding_sample(batch) == -1 and sounding_frames(-1, WINDOW, n_fft, hop) == 0
    batch[0, 1000] = 1.0
    assert last_sounding_sample(batch) == 1000
    assert sounding_frames(1000, WINDOW, n_fft, hop) == (1000 + 512) // hop + 1
    assert sounding_frames(WINDOW - 600, WINDOW, n_fft, hop) == WINDOW // hop  # the last frame reaches back to WINDOW - 512
    assert sounding_frames(WINDOW - 500, WINDOW, n_fft, hop) == 1 + WINDOW // hop  # mirrored into the last frame

    front_end = ClapMelFeatures.from_extractor(make_extractor())
    assert torch.equal(front_end.from_waveforms(torch.zeros((1, WINDOW))), torch.full((1, 1, 1001, 64), -100.0))
    # Skipping the silent frames changes nothing: scanned, told, or every frame transformed.
    rng = np.random.default_rng(5)
    for length in (1, 5 * SR, WINDOW - 600, WINDOW - 500):
        batch = torch.zeros((2, WINDOW), dtype=torch.float32)
        batch[0, :length] = torch.from_numpy(rng.uniform(-1, 1, length).astype(np.float32))
        everything = front_end.from_waveforms(batch, sounding=WINDOW)
        assert torch.equal(front_end.from_waveforms(batch), everything), length
        assert torch.equal(front_end.from_waveforms(batch, sounding=length), everything), length
        assert (everything[1] == -100.0).all() and (everything[0, 0, -1] == -100.0).all() == (length < WINDOW - 512)


def test_blocks_of_rows_and_frames_give_the_features_of_the_whole_batch(clips, monkeypatch):
    import mmverify.models.clap_features as module

    front_end = ClapMelFeatures.from_extractor(make_extractor())
    batch = [clips["window, full-scale noise"], clips["6 s tone + noise"], clips["0.3 s noise"]]
    monkeypatch.setattr(module, "CPU_CHUNK_BYTES", 1 << 40)  # one block: every row, every frame
    whole = front_end(batch)
    for budget in (3 * 1024 * 8, 1024 * 8 * 1001 * 2):  # 3 frames per block; 2 rows per block
        monkeypatch.setattr(module, "CPU_CHUNK_BYTES", budget)
        np.testing.assert_allclose(front_end(batch).numpy(), whole.numpy(), rtol=0, atol=1e-5)


def test_waveform_batches_crop_and_pad_on_the_device():
    rng = np.random.default_rng(3)
    short, long = rng.standard_normal(7).astype(np.float32), rng.standard_normal(WINDOW + 999).astype(np.float32)
    zero = waveform_batch([short, long], WINDOW, "zero").numpy()
    assert zero.shape == (2, WINDOW) and zero.dtype == np.float32
    assert np.array_equal(zero[0, :7], short) and not zero[0, 7:].any()
    assert np.array_equal(zero[1], deterministic_crop(long, WINDOW))
    tiled = waveform_batch([short], WINDOW, "repeat", dtype=torch.float64).numpy()[0]
    copies = WINDOW // 7
    assert tiled.dtype == np.float64 and np.array_equal(tiled[: 7 * copies], np.tile(short, copies))
    assert not tiled[7 * copies :].any()
    assert not waveform_batch([np.zeros(0, dtype=np.float32)], WINDOW, "zero").any()
    with pytest.raises(ValueError, match="empty"):
        waveform_batch([np.zeros(0, dtype=np.float32)], WINDOW, "repeat")
    with pytest.raises(ValueError, match="padding"):
        waveform_batch([short], WINDOW, "reflect")


@pytest.mark.parametrize("padding", ["zero", "repeat"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rows_gathered_at_once_are_the_rows_filled_one_by_one(monkeypatch, padding, dtype):
    """An accelerator fills every row in a few gathers instead of launches per row: the same samples."""
    from mmverify.models import clap_features as module

    rng = np.random.default_rng(11)
    lengths = [1, 7, WINDOW - 1, WINDOW, WINDOW + 999, 2 * WINDOW, 3, WINDOW // 2 + 1, *rng.integers(1, 2 * WINDOW, 9)]
    if padding == "zero":
        lengths.insert(2, 0)  # an empty clip is all zeros (repeat-padding refuses it)
    clips = [rng.standard_normal(n).astype(np.float32) for n in lengths]
    by_rows = waveform_batch(clips, WINDOW, padding, dtype=dtype, gather=False)
    for budget in (1 << 25, 3 * WINDOW):  # all rows in one gather; three rows per gather
        monkeypatch.setattr(module, "_GATHER_ELEMENTS", budget)
        gathered = waveform_batch(clips, WINDOW, padding, dtype=dtype, gather=True)
        assert gathered.dtype == dtype and torch.equal(gathered, by_rows)
    assert torch.equal(waveform_batch([np.zeros(0, np.float32)] * 2, WINDOW, "zero", gather=True), torch.zeros(2, WINDOW))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_features_on_the_gpu_match_the_extractor(clips):
    extractor = make_extractor()
    front_end = ClapMelFeatures.from_extractor(extractor)
    named = {k: v for k, v in clips.items() if len(v)}
    for padding in ("zero", "repeat"):
        ours = front_end(list(named.values()), padding=padding, device="cuda")
        assert ours.device.type == "cuda"
        for (name, clip), features in zip(named.items(), ours.cpu().numpy()):
            assert relative_error(features, extractor_features(extractor, clip, padding)) <= REL_TOLERANCE, name


# -- embeddings and verdicts ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_front_end_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("clap-real-front-end"), real_front_end=True)


@pytest.mark.parametrize("padding", ["zero", "repeat"])
def test_embeddings_do_not_depend_on_the_front_end(real_front_end_clap, clips, padding):
    from mmverify.models.clap_hf import HFClap

    batch = [clip for clip in clips.values() if padding == "zero" or len(clip)]
    torch_rows = HFClap(source=str(real_front_end_clap), batch_size=6).embed_audio(batch, padding=padding)
    numpy_rows = HFClap(source=str(real_front_end_clap), batch_size=6, features="numpy").embed_audio(batch, padding=padding)
    cosines = np.sum(torch_rows * numpy_rows, axis=1)
    assert cosines.min() >= 0.9999, cosines


ESC50_CLASSES = ("dog", "rain", "cow", "church bells")


def _task_corpus(tmp_path: Path) -> tuple[dict[str, list[np.ndarray]], list[tuple[str, dict, Path]]]:
    """ESC-50 references and generated clips at 22050 Hz: some parts equal to a reference, the rest
    unrelated tones, sweeps and noise of 0.4-14 s."""
    from tests.tasks.test_sound import SR as RATE, noise, sweep, tone, write

    rng = np.random.default_rng(11)
    sounds = [tone(3, 440, 1), sweep(4, 300, 2000), noise(2.5, 5), tone(6, 180, 2), sweep(12, 2500, 200)]
    classes = {name: [sounds[i], *(tone(rng.uniform(1, 8), rng.uniform(100, 3000), 20 + 3 * i + j) for j in range(3))] for i, name in enumerate(ESC50_CLASSES)}
    items: list[tuple[str, dict, Path]] = []
    for i in range(10):
        seconds = 1.2 if i == 1 else float(rng.uniform(0.4, 14))  # under 2 s: an empty first edge
        kind = i % 3
        clip = tone(seconds, float(rng.uniform(100, 3000)), 40 + i) if kind == 0 else sweep(seconds, 200, float(rng.uniform(500, 5000))) if kind == 1 else noise(seconds, 60 + i)
        if i % 4 == 0:  # a part equal to a reference sound
            sound = sounds[i % len(sounds)]
            clip = np.concatenate([sound, clip])
        path = write(tmp_path / "generated" / f"{i}.wav", clip)
        a, b = ESC50_CLASSES[i % 4], ESC50_CLASSES[(i + 1) % 4]
        items += [("cot", {"target": a}, path), ("begin_end", {"start": a, "end": b}, path)]
    assert RATE == 22_050
    return classes, items


def _score_all(items: list[tuple[str, dict, Path]], profile: str) -> list[tuple[str, Any]]:
    from mmverify.core.errors import GenerationFault
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.tasks.sound import SoundBeginEnd
    from tests.tasks.test_sound import direct

    tasks = {"cot": TASK_REGISTRY.get("a_sound_cot").build(profile), "begin_end": SoundBeginEnd.build(profile)}
    outcomes: list[tuple[str, Any]] = []
    for task, data, path in items:
        try:
            check = direct(tasks[task], data, path)
        except GenerationFault as fault:
            outcomes.append(("fault", fault.reason))
            continue
        outcomes.append(("scored", (check.passed, check.score, dict(check.components))))
    return outcomes


def test_sound_task_verdicts_do_not_depend_on_the_front_end(tmp_path, monkeypatch):
    from mmverify.models import hub
    from mmverify.references import sets
    from tests.tasks.test_sound import esc50_tree

    tiny = build_tiny_clap(tmp_path / "tiny-clap")
    classes, items = _task_corpus(tmp_path)
    root = esc50_tree(tmp_path / "ESC-50", classes)
    monkeypatch.setenv(sets.ENV_VAR, f"esc50={root}")
    results: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for features in ("numpy", "torch"):
        monkeypatch.setenv(hub.ENV_VAR, f"audio_text=clap-hf@{tiny}?features={features}")
        monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / f"cache-{features}"))
        monkeypatch.setattr(hub, "_HUB", None)
        sets.clear_memo()
        assert hub.get_hub().backend("audio_text").features == features
        for profile in ("mmmg", "strict"):
            results[features, profile] = _score_all(items, profile)
    sets.clear_memo()

    thresholds = np.linspace(-1, 1, 401)
    for profile in ("mmmg", "strict"):
        reference, candidate = results["numpy", profile], results["torch", profile]
        assert [kind for kind, _ in reference] == [kind for kind, _ in candidate]
        scored = [(a, b) for (kind, a), (_, b) in zip(reference, candidate) if kind == "scored"]
        assert scored and any(kind == "fault" for kind, _ in reference) == (profile == "strict")
        for (passed_a, score_a, sims_a), (passed_b, score_b, sims_b) in scored:
            assert (passed_a, score_a) == (passed_b, score_b) and sims_a.keys() == sims_b.keys()
            for label, sim in sims_a.items():
                assert abs(sim - sims_b[label]) <= 1e-4, (label, sim, sims_b[label])
                # Any threshold on a 0.005 grid gives the same verdict under both front ends.
                assert np.array_equal(sim > thresholds, sims_b[label] > thresholds)
        assert len({passed for (passed, _, _), _ in scored}) == 2 or profile == "strict"
