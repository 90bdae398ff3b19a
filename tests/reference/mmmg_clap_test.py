"""mmverify's CLAP tasks against the published front end re-derived in ``mmmg_clap.py``.

Seeded random cases: clip lengths around every boundary (empty, one sample, under 2 s, the 10 s
window, longer), random ranges, sound/silence patterns, OpenMIC folders and label files.  The
one deliberate difference, the crop offset of clips longer than 10 s (content-seeded here, random
when published), is handed to the reference.  The resampler is the other known difference (scipy's
polyphase filter here, librosa's soxr there); where a comparison must be exact the reference is
given mmverify's resampler, and one test bounds the difference on band-limited audio.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.core.errors import GenerationFault
from mmverify.core.media import resample
from mmverify.core.types import Instance
from mmverify.models.cache import array_digest
from mmverify.models.clap import crop_offset
from mmverify.models.clap_hf import HFClap
from mmverify.references.index import decode_reference
from mmverify.references.layouts import openmic_release_pool, scan
from mmverify.tasks.response import ResolvedPart, Response
from tests.models.test_clap import build_tiny_clap
from tests.reference import mmmg_clap as published

SR = published.PUBLISHED_RATE
WINDOW = 10 * published.CLAP_RATE


def crop_start(clip: np.ndarray) -> int:
    """mmverify's crop offset for a clip at 48 kHz (0 when it fits the window)."""
    return crop_offset(array_digest(np.ascontiguousarray(clip, dtype=np.float32)), len(clip) - WINDOW) if len(clip) > WINDOW else 0


@pytest.fixture(scope="module")
def real_clap(tmp_path_factory) -> HFClap:
    """A tiny random CLAP whose feature extractor has laion/clap-htsat-unfused's settings."""
    clap = HFClap(source=str(build_tiny_clap(tmp_path_factory.mktemp("real-front-end"), real_front_end=True)))
    clap.ensure_loaded()
    return clap


# -- padding: what padding=True meant ----------------------------------------------------------------
def test_padding_true_zero_padded_under_4x_and_repeat_pads_now(real_clap):
    from transformers import ClapFeatureExtractor

    assert published.padding_mode_4x(True) is True  # neither "repeat" nor "repeatpad"
    assert published.padding_mode_current(True) == "repeatpad"
    extractor = ClapFeatureExtractor.from_pretrained(real_clap.local_path(), local_files_only=True)
    clip = (0.3 * np.random.default_rng(0).standard_normal(3 * published.CLAP_RATE)).astype(np.float32)
    installed = extractor(clip.astype(np.float64), sampling_rate=published.CLAP_RATE, padding=True, return_tensors="np")
    as_now = published.log_mel(published.fit_window(clip, WINDOW, published.padding_mode_current(True)))
    as_4x = published.log_mel(published.fit_window(clip, WINDOW, published.padding_mode_4x(True)))
    np.testing.assert_allclose(installed["input_features"][0, 0], as_now, atol=1e-4)
    assert np.abs(as_4x - as_now).max() > 10.0  # dB: the two rules are far apart
    mmmg = real_clap.input_features(real_clap.prepare([clip], "zero")[0])[0, 0]
    np.testing.assert_allclose(mmmg, as_4x, atol=1e-4)


def test_features_match_the_published_front_end_on_random_clips(real_clap):
    rng = np.random.default_rng(1)
    lengths = [0, 1, 2, 479, WINDOW - 1, WINDOW, WINDOW + 1] + [int(n) for n in rng.integers(2, 14 * published.CLAP_RATE, 5)]
    for length in lengths:
        clip = (rng.uniform(0.01, 0.9) * rng.standard_normal(length)).astype(np.float32)
        ours = real_clap.input_features(real_clap.prepare([clip], "zero")[0])[0, 0]
        theirs = published.log_mel(published.fit_window(clip, WINDOW, published.padding_mode_4x(True), crop_start(clip)))
        assert ours.shape == theirs.shape == (1001, 64), length
        np.testing.assert_allclose(ours, theirs, atol=1e-4, err_msg=f"{length} samples")
        tiled = real_clap.input_features(real_clap.prepare([clip], "repeat")[0])[0, 0] if length else None
        if tiled is not None:
            expected = published.log_mel(published.fit_window(clip, WINDOW, "repeatpad", crop_start(clip)))
            np.testing.assert_allclose(tiled, expected, atol=1e-4, err_msg=f"{length} samples, repeat")


# -- references: 22050 Hz first -------------------------------------------------------------------
def band_limited_noise(seconds: float, rate: int, cutoff: float, seed: int) -> np.ndarray:
    from scipy.signal import firwin, lfilter

    noise = np.random.default_rng(seed).standard_normal(int(seconds * rate))
    return (0.3 * lfilter(firwin(511, cutoff, fs=rate), 1.0, noise)).astype(np.float32)


@pytest.mark.parametrize("rate", [44_100, 48_000, 16_000, 22_050])
def test_reference_route_is_the_published_one(tmp_path, rate):
    rng = np.random.default_rng(rate)
    for i in range(3):
        path = tmp_path / f"ref{i}.wav"
        stereo = rng.standard_normal((int(rng.uniform(0.5, 6) * rate), 2)).astype(np.float32) * 0.2
        sf.write(path, stereo if i else stereo[:, 0], rate, subtype="FLOAT")
        ours = decode_reference(path, published.CLAP_RATE, load_rate=SR)
        np.testing.assert_array_equal(ours, published.load_reference(str(path), resampler=resample))


def test_mmverifys_resampler_is_close_to_librosas_on_band_limited_audio(tmp_path):
    """The published route through librosa (soxr) and through mmverify's polyphase filter differ by
    under 1% RMS on content below 8 kHz (the filters differ in their transition band)."""
    path = tmp_path / "noise.wav"
    sf.write(path, band_limited_noise(5.0, 44_100, 8_000, seed=3), 44_100, subtype="FLOAT")
    ours = decode_reference(path, published.CLAP_RATE, load_rate=SR)
    theirs = published.load_reference(str(path))
    assert abs(len(ours) - len(theirs)) <= 1
    n = min(len(ours), len(theirs))
    assert np.sqrt(np.mean((ours[:n] - theirs[:n]) ** 2)) < 0.01 * np.sqrt(np.mean(theirs[:n] ** 2))


# -- parts of the clip ---------------------------------------------------------------------------
def random_lengths(rng: np.random.Generator, count: int) -> list[int]:
    edges = [1, SR - 1, 2 * SR - 1, 2 * SR, 2 * SR + 1, 4 * SR, 8 * SR - 1, 8 * SR, 8 * SR + 1, 9 * SR]
    return edges + [int(n) for n in rng.integers(1, 14 * SR, count)]


def test_edges_match_the_published_slices():
    from mmverify.tasks.sound import SoundBeginEnd

    rng = np.random.default_rng(4)
    task = SoundBeginEnd.build("mmmg")
    for length in random_lengths(rng, 150):
        audio = np.arange(length, dtype=np.float32)  # distinct samples: equal slices mean equal positions
        labels = [["start"], ["end"], ["start", "end"]][int(rng.integers(3))]
        spans = task.spans(Instance("t/0", {}), audio, SR, labels)
        expected = published.edge_parts(audio, SR, "start" in labels, "end" in labels)
        assert [audio[a:b].tolist() for a, b in spans.values()] == [part.tolist() for part in expected], length


def test_ranges_match_the_published_slices():
    from mmverify.tasks.sound import SoundInclude

    rng = np.random.default_rng(5)
    task = SoundInclude.build("mmmg")
    for length in random_lengths(rng, 150):
        audio = np.arange(length, dtype=np.float32)
        a = round(float(rng.uniform(0, 0.9)), int(rng.integers(1, 4)))
        b = min(1.0, round(a + float(rng.uniform(0.01, 1 - a)), 2))
        if b <= a:
            continue
        data = {"target": "dog", "range": [a, b]}
        [(lo, hi)] = task.spans(Instance("t/0", data), audio, SR, ["target"]).values()
        assert audio[lo:hi].tolist() == published.range_part(audio, [a, b]).tolist(), (length, a, b)


def sound_and_silence(rng: np.random.Generator) -> np.ndarray:
    """Tones separated by silences of random length (some under, some over 1 s), random edges."""
    pieces = [np.zeros(int(rng.uniform(0, 0.5) * SR), dtype=np.float32)]
    for _ in range(int(rng.integers(1, 4))):
        seconds = rng.uniform(0.3, 2.0)
        t = np.arange(int(seconds * SR)) / SR
        pieces.append((rng.uniform(0.05, 0.8) * np.sin(2 * np.pi * rng.uniform(100, 3000) * t)).astype(np.float32))
        pieces.append(np.zeros(int(rng.uniform(0.2, 2.0) * SR), dtype=np.float32))
    return np.concatenate(pieces)


def test_silence_split_matches_the_published_segmentation():
    from mmverify.tasks.sound import SoundSilence

    rng = np.random.default_rng(6)
    task = SoundSilence.build("mmmg")
    counts = set()
    for _ in range(40):
        audio = sound_and_silence(rng)
        expected = published.silence_parts(audio, SR)
        counts.add(len(expected))
        try:
            spans = task.spans(Instance("t/0", {}), audio, SR, ["start", "end"])
        except GenerationFault as fault:
            assert fault.reason == "wrong_segment_count" and fault.evidence["segment_count"] == len(expected) != 2
            continue
        assert [audio[a:b].tolist() for a, b in spans.values()] == [part.tolist() for part in expected]
    assert {1, 2, 3} <= counts  # the cases cover every outcome
    # Digital silence: one segment when published (the split is relative to a zero peak), none here;
    # either way not the two sounds the task needs.
    silent = np.zeros(3 * SR, dtype=np.float32)
    assert len(published.silence_parts(silent, SR)) == 1
    with pytest.raises(GenerationFault, match="found 0"):
        task.spans(Instance("t/0", {}), silent, SR, ["start", "end"])


# -- OpenMIC pool ----------------------------------------------------------------------------------
def test_openmic_numbered_folders_match_the_published_names(tmp_path):
    rng = np.random.default_rng(7)
    for trial in range(6):
        root = tmp_path / f"openmic{trial}"
        present = sorted(int(k) for k in rng.choice(170, size=int(rng.integers(100, 170)), replace=False))
        folder = root / "saxophone"
        folder.mkdir(parents=True)
        for k in present:
            (folder / f"{k}.mp3").write_bytes(b"")
        for junk in rng.choice(["notes.mp3", "00.mp3", "1e3.mp3", "x1.mp3", "7 .mp3"], size=2, replace=False):
            (folder / str(junk)).write_bytes(b"")
        chosen = sorted(Path(f.name).name for f in scan("openmic", root))
        assert chosen == sorted(name for name in published.openmic_numbered_names() if (folder / name).is_file())


def test_openmic_release_selection_matches_mmmgs_rule():
    rng = np.random.default_rng(8)
    instruments = ["piano", "voice", "guitar", "cello"]
    for _ in range(10):
        keys = [f"{int(k):06d}_{int(rng.integers(10))}" for k in rng.integers(0, 400, 600)]
        rows = [
            {
                "sample_key": key,
                "instrument": str(rng.choice(instruments)),
                "relevance": str(rng.choice(["1.0", "1", "0.5", "0.9", "0.0"])),
            }
            for key in keys
        ]
        for size in (3, 100):
            assert openmic_release_pool(rows, size) == published.openmic_selection(rows, size)


# -- end to end: task similarities ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_clap_folder(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("tiny-clap"))


@pytest.fixture
def esc50_published(tmp_path, monkeypatch, tiny_clap_folder, esc50_metadata):
    """MMMG's ESC-50 copy (dataset.csv + audio/ at 44.1 kHz) for two classes, and the hub on the tiny CLAP."""
    from mmverify.models import hub
    from mmverify.references import sets

    with open(esc50_metadata, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, every = reader.fieldnames, list(reader)
    rows = [row for c in ("dog", "rain") for row in [r for r in every if r["category"] == c][:12]]
    root = tmp_path / "ESC-50"
    (root / "audio").mkdir(parents=True)
    rng = np.random.default_rng(9)
    for i, row in enumerate(rows):
        seconds = 5.0 if i % 3 else float(rng.uniform(1.0, 5.0))
        clip = band_limited_noise(seconds, 44_100, float(rng.uniform(500, 15_000)), seed=i)
        sf.write(root / "audio" / row["filename"], clip, 44_100, subtype="FLOAT")
    with open(root / "dataset.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    monkeypatch.setenv(hub.ENV_VAR, f"audio_text=clap-hf@{tiny_clap_folder}")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(sets.ENV_VAR, f"esc50={root}")
    monkeypatch.setattr(hub, "_HUB", None)
    sets.clear_memo()
    yield {row["category"]: [root / "audio" / r["filename"] for r in rows if r["category"] == row["category"]] for row in rows}
    sets.clear_memo()


class PublishedScorer:
    """Similarities the published way: reference front end, the tiny model run directly."""

    def __init__(self, folder: Path) -> None:
        from transformers import ClapFeatureExtractor, ClapModel

        self.model = ClapModel.from_pretrained(folder, local_files_only=True).eval()
        extractor = ClapFeatureExtractor.from_pretrained(folder, local_files_only=True)
        self.mel = dict(n_fft=extractor.fft_window_size, hop_length=extractor.hop_length, n_mels=extractor.feature_size,
                        fmin=extractor.frequency_min, fmax=extractor.frequency_max)  # fmt: skip

    def embed(self, clips_48k: list[np.ndarray]) -> np.ndarray:
        import torch

        windows = [published.fit_window(c, WINDOW, published.padding_mode_4x(True), crop_start(c)) for c in clips_48k]
        features = np.stack([published.log_mel(w, **self.mel) for w in windows])[:, None].astype(np.float32)
        with torch.inference_mode():
            output = self.model.get_audio_features(input_features=torch.from_numpy(features))
        return getattr(output, "pooler_output", output).numpy()

    def similarities(self, parts_22k: list[np.ndarray], references: list[Path]) -> list[float]:
        refs = self.embed([published.load_reference(str(p), resampler=resample) for p in references])
        queries = self.embed([resample(p, SR, published.CLAP_RATE) if len(p) else p for p in parts_22k])
        return [published.top_k_mean(q, refs) for q in queries]


def test_task_similarities_match_the_published_pipeline(tmp_path, esc50_published, tiny_clap_folder):
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.tasks.sound import SoundBeginEnd, SoundInclude

    reference = PublishedScorer(tiny_clap_folder)
    rng = np.random.default_rng(10)
    cases = []
    for i, seconds in enumerate([1.3, 2.0, 3.7, 8.6, 11.5]):
        audio = band_limited_noise(seconds, SR, float(rng.uniform(800, 10_000)), seed=100 + i)
        path = tmp_path / f"gen{i}.wav"
        sf.write(path, audio, SR, subtype="FLOAT")
        a = round(float(rng.uniform(0, 0.6)), 2)
        b = round(a + float(rng.uniform(0.05, 0.4)), 2)
        cases += [
            (SoundBeginEnd, {"start": "dog", "end": "rain"}, path, published.edge_parts(audio, SR, True, True), ["dog", "rain"]),
            (SoundInclude, {"target": "rain", "range": [a, b]}, path, [published.range_part(audio, [a, b])], ["rain"]),
            (TASK_REGISTRY.get("a_sound_cot"), {"target": "dog"}, path, [audio], ["dog"]),
        ]
    sims_ours, sims_theirs = [], []
    for cls, data, path, parts, classes in cases:
        check = cls.build("mmmg").score(Instance("t/0", data), Response([ResolvedPart("audio", media=path, label=path.name)]))
        theirs = [reference.similarities([part], esc50_published[c])[0] for part, c in zip(parts, classes)]
        ours = list(check.components.values())
        np.testing.assert_allclose(ours, theirs, atol=2e-5, err_msg=f"{cls.id} {data} {path.name}")
        sims_ours += ours
        sims_theirs += theirs
    # The verdicts at a threshold inside the observed range agree too.
    threshold = float(np.median(sims_theirs))
    close = np.abs(np.array(sims_theirs) - threshold) < 1e-4
    assert [s > threshold for s, c in zip(sims_ours, close) if not c] == [s > threshold for s, c in zip(sims_theirs, close) if not c]
