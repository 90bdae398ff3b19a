"""Beat trackers: librosa on synthetic click tracks; beat_this through its real loader with a tiny
random-init model saved as a checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmverify.models.base import ModelUnavailable
from mmverify.models.beats import BeatThisTracker, LibrosaBeatTracker
from mmverify.models.protocols import BeatTracker

SR = 22050


class Payload:
    """An arbitrary Python object: a safe loader must refuse to unpickle it."""


def click_track(bpm: float, seconds: float = 20.0, sr: int = SR, offset: float = 0.0) -> np.ndarray:
    """Decaying 1 kHz clicks (20 ms) on every beat, plus faint noise so the signal is never flat."""
    audio = np.random.default_rng(0).normal(0.0, 1e-4, int(seconds * sr))
    t = np.arange(int(0.02 * sr)) / sr
    click = np.sin(2 * np.pi * 1000.0 * t) * np.exp(-t / 0.004)
    for start in np.arange(offset, seconds - 0.02, 60.0 / bpm):
        i = int(round(start * sr))
        audio[i : i + click.size] += click
    return audio.astype(np.float32)


# -- librosa ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bpm", [90, 120, 140])
def test_librosa_click_tracks(bpm: int) -> None:
    tracker = LibrosaBeatTracker()
    audio = click_track(bpm)
    beats = tracker.beats(audio, SR)
    assert beats.dtype == np.float64 and np.all(np.diff(beats) > 0)
    period = 60.0 / bpm
    assert abs(np.median(np.diff(beats)) - period) / period < 0.02
    clicks = len(np.arange(0.0, 20.0 - 0.02, period))
    assert abs(len(beats) - clicks) <= 2
    # detected beats sit on clicks (within 50 ms; the tracker may drift on the very last one)
    phase = np.abs((beats + period / 2) % period - period / 2)
    assert np.sum(phase >= 0.05) <= 1


def drum_track(bpm: float, seconds: float, sr: int = SR) -> np.ndarray:
    """Kick on odd beats, snare on even beats, closed hi-hat on every beat (seeded noise)."""
    rng = np.random.default_rng(int(bpm))
    n = int(seconds * sr)
    out = np.zeros(n)
    t = np.arange(int(0.25 * sr)) / sr
    kick = np.sin(2 * np.pi * (50 + 80 * np.exp(-t * 30)) * t) * np.exp(-t * 12)
    snare = 0.5 * rng.normal(0, 1, t.size) * np.exp(-t * 25)
    hat = 0.2 * rng.normal(0, 1, int(0.05 * sr)) * np.exp(-t[: int(0.05 * sr)] * 80)
    for k, start in enumerate(np.arange(0.0, seconds, 60.0 / bpm)):
        i = int(round(start * sr))
        for sound in (kick if k % 2 == 0 else snare, hat):
            end = min(n, i + sound.size)
            out[i:end] += sound[: end - i]
    return out.astype(np.float32)


@pytest.mark.parametrize("kind", ["clicks", "drums"])
def test_librosa_tempo_is_within_two_bpm_from_60_to_180(kind: str) -> None:
    """The beat period fitted to the tracker's beats (the estimator it declares) is within 2 BPM of
    the constructed tempo on 15 s tracks; the published count formula is not."""
    from mmverify.verifiers.audio.tempo import bpm_from_beat_count, estimate_bpm

    tracker = LibrosaBeatTracker()
    errors, count_errors = {}, {}
    for bpm in range(60, 181, 10):
        audio = click_track(bpm, 15.0) if kind == "clicks" else drum_track(bpm, 15.0)
        beats = tracker.beats(audio, SR)
        errors[bpm] = abs(estimate_bpm(tracker.bpm_estimator, beats, 15.0) - bpm)
        count_errors[bpm] = abs(bpm_from_beat_count(beats, 15.0) - bpm)
    assert tracker.bpm_estimator == "intervals"
    assert max(errors.values()) <= 2.0, errors
    assert max(count_errors.values()) > 2.0, count_errors


def test_refine_tempo_finds_the_autocorrelation_peak_between_frames() -> None:
    from mmverify.models.beats import refine_tempo

    frame_rate = 100.0
    frames = np.arange(3000)
    onsets = np.arange(0, 3000, 100 / 3.0)  # every 33.3 frames: 180 BPM
    envelope = np.exp(-0.5 * ((frames[:, None] - onsets[None, :]) / 2.0) ** 2).sum(axis=1)
    assert 60 * frame_rate / 33 - 180 > 1.5  # the nearest whole-frame lag is 1.8 BPM off
    assert refine_tempo(envelope, frame_rate, 175.0) == pytest.approx(180.0, abs=0.3)
    assert refine_tempo(envelope, frame_rate, 0.0) == 0.0
    assert refine_tempo(np.ones(2), frame_rate, 120.0) == 120.0


def test_librosa_is_rate_independent_and_deterministic() -> None:
    tracker = LibrosaBeatTracker()
    audio = click_track(120, seconds=10.0, sr=44100)
    first = tracker.beats(audio, 44100)
    np.testing.assert_array_equal(first, tracker.beats(audio, 44100))
    at_22k = tracker.beats(click_track(120, seconds=10.0), SR)
    assert len(first) == len(at_22k)
    np.testing.assert_allclose(first, at_22k, atol=0.025)


def test_librosa_edge_cases_and_metadata() -> None:
    tracker = LibrosaBeatTracker()
    assert isinstance(tracker, BeatTracker) and tracker.name == "librosa-beats"
    assert tracker.beats(np.zeros(SR * 3, np.float32), SR).size == 0
    assert tracker.beats(np.zeros(10, np.float32), SR).size == 0
    with pytest.raises(ValueError):
        tracker.beats(np.zeros((2, 100), np.float32), SR)
    with pytest.raises(ValueError):
        tracker.beats(np.full(SR, np.nan, np.float32), SR)
    with pytest.raises(ValueError):
        tracker.beats(np.zeros(SR, np.float32), 0)
    available = tracker.availability()
    assert available.ok and "librosa" in available.location
    assert tracker.fingerprint.startswith("librosa-beats:librosa-")
    assert tracker.fetch().is_dir()


# -- beat_this --------------------------------------------------------------------------------------

TINY_HPARAMS = {
    "spect_dim": 128,
    "transformer_dim": 32,
    "ff_mult": 2,
    "n_layers": 1,
    "head_dim": 8,
    "stem_dim": 8,
    "dropout": {"frontend": 0.1, "transformer": 0.2},
    "sum_head": True,
    "partial_transformers": True,
}


def build_tiny_beat_this(path: Path) -> Path:
    """A beat_this checkpoint at ``path`` in the published layout: Lightning-style ``state_dict``
    with a ``model.`` prefix plus ``hyper_parameters``; weights are random, with a head scaled so
    the logits cross zero and peaks (beats) come out."""
    pytest.importorskip("beat_this")
    import torch

    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()
    from beat_this.model.beat_tracker import BeatThis

    torch.manual_seed(0)
    model = BeatThis(**TINY_HPARAMS)
    with torch.no_grad():
        head = model.task_heads.beat_downbeat_lin
        head.weight.normal_(0.0, 1.0)
        head.bias.fill_(0.5)
    state = {f"model.{key}": value for key, value in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": state, "hyper_parameters": dict(TINY_HPARAMS), "epoch": 0}, path)
    return path


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_beat_this(tmp_path_factory.mktemp("beat_this") / "tiny.ckpt")


def test_beat_this_tiny_checkpoint(tiny_checkpoint: Path) -> None:
    tracker = BeatThisTracker(source=str(tiny_checkpoint), device="cpu")
    assert isinstance(tracker, BeatTracker) and tracker.name == "beat-this"
    assert tracker.availability().ok
    audio = click_track(120, seconds=3.0)
    beats = tracker.beats(audio, SR)
    assert beats.dtype == np.float64 and beats.ndim == 1 and beats.size > 0
    assert np.all(np.diff(beats) > 0) and beats[0] >= 0.0 and beats[-1] <= 3.0
    np.testing.assert_array_equal(beats, tracker.beats(audio, SR))
    # a second backend loading the same file gives the same beats (no unseeded state)
    np.testing.assert_array_equal(beats, BeatThisTracker(source=str(tiny_checkpoint), device="cpu").beats(audio, SR))
    # other input rates go through beat_this's own resampling
    assert tracker.beats(click_track(120, seconds=1.0, sr=16000), 16000).dtype == np.float64
    assert tracker.beats(np.zeros(100, np.float32), SR).size == 0
    assert tracker.fingerprint.startswith("beat-this:")


@pytest.mark.parametrize("sr", [SR, 16000, 44100])
def test_beat_this_beats_are_beat_thiss_own_at_any_rate(tiny_checkpoint: Path, sr: int) -> None:
    """The tracker resamples before the model is reached (so that a worker does it where a model
    process tracks): its beats equal those of beat_this's own entry point, which resamples itself."""
    from beat_this.inference import Audio2Beats

    audio = click_track(96, seconds=4.0, sr=sr) + drum_track(96, 4.0, sr=sr)
    published = Audio2Beats(checkpoint_path=str(tiny_checkpoint), device="cpu", float16=False, dbn=False)
    expected = np.sort(np.asarray(published(audio, sr)[0], dtype=np.float64))
    beats = BeatThisTracker(source=str(tiny_checkpoint), device="cpu").beats(audio, sr)
    assert expected.size > 0
    np.testing.assert_array_equal(beats, expected)


def test_beat_this_keys_no_batch_shape(tiny_checkpoint: Path) -> None:
    """One clip per forward: a batch size changes nothing its beats depend on, nor its cache keys."""
    small, large = (BeatThisTracker(source=str(tiny_checkpoint), device="cpu", batch_size=n) for n in (1, 32))
    assert small.rows_per_forward is None and ";rows=" not in small.fingerprint
    assert small.fingerprint == large.fingerprint and small.fingerprint.endswith(";device=cpu")


def test_beat_this_rejects_pickled_objects(tmp_path: Path) -> None:
    """beat_this loads local checkpoints with weights_only=True: arbitrary pickles are refused."""
    pytest.importorskip("beat_this")
    import torch

    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "x": Payload()}, path)
    with pytest.raises(ModelUnavailable, match="not a usable beat_this checkpoint"):
        BeatThisTracker(source=str(path), device="cpu").ensure_loaded()


def test_beat_this_named_checkpoint_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv("MMVERIFY_BEAT_THIS_SOURCE", raising=False)
    tracker = BeatThisTracker()
    assert tracker.source == "final0"
    available = tracker.availability()
    assert not available.ok
    assert "mmverify models fetch beat-this" in available.reason and "MMVERIFY_BEAT_THIS_SOURCE" in available.reason
    with pytest.raises(ModelUnavailable):
        tracker.local_path()
    # a checkpoint beat_this itself downloaded earlier is found in torch.hub's folder
    legacy = tmp_path / "torch" / "hub" / "checkpoints" / "beat_this-final0.ckpt"
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"x")
    assert tracker.local_path() == legacy
    # ... and the mmverify cache takes precedence
    own = tmp_path / "cache" / "beat_this" / "final0.ckpt"
    own.parent.mkdir(parents=True)
    own.write_bytes(b"x")
    assert tracker.local_path() == own
    monkeypatch.setenv("MMVERIFY_BEAT_THIS_SOURCE", str(tmp_path / "missing.ckpt"))
    assert not BeatThisTracker().availability().ok
    assert not BeatThisTracker(source="../x/y").availability().ok
