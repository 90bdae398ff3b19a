"""Reference index: layouts, top-k scoring against brute force, rebuilds only when something changed."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.core.registry import UnknownIdError
from mmverify.references import ReferenceIndex, scan

ESC50_CSV = Path(__file__).resolve().parents[2].parent / "shared" / "mmmg" / "references" / "dataset.csv"
SR = 16_000
CATEGORIES = {"dog": 300.0, "rain": 1200.0, "church bells": 700.0}


class SpectrumEmbedder:
    """A deterministic stand-in for CLAP: band energies of the spectrum through a fixed projection."""

    sample_rate = SR
    crop_policy = "none"

    def __init__(self, fingerprint: str = "spectrum:1", dim: int = 12) -> None:
        self.fingerprint = fingerprint
        self.projection = np.random.default_rng(0).standard_normal((24, dim))
        self.clips_embedded = 0

    def embed_audio(self, clips):
        self.clips_embedded += len(clips)
        rows = []
        for clip in clips:
            spectrum = np.abs(np.fft.rfft(clip, n=4096))
            bands = np.log1p(np.array([band.sum() for band in np.array_split(spectrum, 24)]))
            rows.append(bands @ self.projection)
        rows = np.asarray(rows, dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def sound(freq: float, seed: int, seconds: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    pitch = freq * (1 + 0.1 * rng.standard_normal())
    return (0.4 * np.sin(2 * np.pi * pitch * t) + 0.1 * rng.standard_normal(t.size)).astype(np.float32)


def real_esc50_rows(per_class: int = 4) -> list[dict[str, str]]:
    """Rows of the published ESC-50 metadata for a few categories."""
    if not ESC50_CSV.is_file():
        pytest.skip(f"ESC-50 metadata not found at {ESC50_CSV}")
    with open(ESC50_CSV, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames
        rows = [row for row in reader if row["category"] in CATEGORIES]
    assert header[:4] == ["filename", "fold", "target", "category"]
    picked: list[dict[str, str]] = []
    for category in CATEGORIES:
        picked += [row for row in rows if row["category"] == category][:per_class]
    return picked


@pytest.fixture
def esc50(tmp_path) -> Path:
    """A tiny ESC-50 tree: real metadata rows (real column format), synthetic audio at 44.1 kHz."""
    root = tmp_path / "ESC-50"
    (root / "audio").mkdir(parents=True)
    (root / "meta").mkdir()
    rows = real_esc50_rows()
    with open(ESC50_CSV, newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    with open(root / "meta" / "esc50.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    for i, row in enumerate(rows):
        clip = sound(CATEGORIES[row["category"]], seed=i)
        sf.write(root / "audio" / row["filename"], np.interp(np.arange(0, clip.size, SR / 44_100), np.arange(clip.size), clip), 44_100)
    return root


def brute_force(query: np.ndarray, refs: np.ndarray, k: int) -> float:
    q = query.astype(np.float64) / np.linalg.norm(query)
    r = refs.astype(np.float64) / np.linalg.norm(refs, axis=1, keepdims=True)
    sims = np.sort(r @ q)[::-1]
    return float(sims[: min(k, len(sims))].mean())


def test_esc50_layout_uses_the_metadata_categories(esc50, tmp_path):
    files = scan("esc50", esc50)
    assert {f.label for f in files} == set(CATEGORIES) and len(files) == 12
    assert all(f.name.startswith("audio/") for f in files)
    index = ReferenceIndex.build("esc50", esc50, SpectrumEmbedder(), tmp_path / "index")
    assert index.classes() == sorted(CATEGORIES) and len(index) == 12
    stored = tmp_path / "index" / "spectrum_1" / "esc50"
    meta = json.loads((stored / "meta.json").read_text())
    assert meta["fingerprint"] == "spectrum:1" and meta["crop_policy"] == "none" and meta["dim"] == 12
    assert {row["class"] for row in meta["rows"]} == set(CATEGORIES)
    assert all(len(row["sha256"]) == 64 for row in meta["rows"])
    matrix = np.load(stored / "embeddings.npy", allow_pickle=False)
    assert matrix.shape == (12, 12) and matrix.dtype == np.float32


def test_topk_mean_matches_brute_force(esc50, tmp_path):
    embedder = SpectrumEmbedder()
    index = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index")
    rng = np.random.default_rng(3)
    queries = np.vstack([embedder.embed_audio([sound(f, 100 + i) for i, f in enumerate([300.0, 1200.0, 500.0])]),
                         rng.standard_normal((3, 12))])  # unnormalised queries too
    for cls in index.classes():
        refs = index.rows(cls)
        for k in (1, 2, 3, 4, 10):
            expected = [brute_force(q, refs, k) for q in queries]
            np.testing.assert_allclose([index.topk_mean(q, cls, k) for q in queries], expected, atol=1e-6)
            np.testing.assert_allclose(index.topk_mean_batch(queries, cls, k), expected, atol=1e-6)
    # A dog-like sound is closest to the dog references.
    scores = {cls: index.topk_mean(queries[0], cls, k=3) for cls in index.classes()}
    assert max(scores, key=scores.get) == "dog"


def test_bad_queries_and_classes_fail_clearly(esc50, tmp_path):
    index = ReferenceIndex.build("esc50", esc50, SpectrumEmbedder(), tmp_path / "index")
    with pytest.raises(UnknownIdError, match="Did you mean 'dog'"):
        index.topk_mean(np.ones(12), "dgo")
    with pytest.raises(ValueError, match="k must be"):
        index.topk_mean(np.ones(12), "dog", k=0)
    with pytest.raises(ValueError, match="zero embedding"):
        index.topk_mean(np.zeros(12), "dog")
    with pytest.raises(UnknownIdError):
        scan("audioset", esc50)


def test_rebuilds_only_when_files_or_backend_change(esc50, tmp_path):
    embedder = SpectrumEmbedder()
    first = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index")
    assert embedder.clips_embedded == 12 and first.embedded == 12

    again = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index")
    assert embedder.clips_embedded == 12 and again.embedded == 0
    assert again.embeddings.tobytes() == first.embeddings.tobytes()

    # Touching a file without changing it re-hashes it but embeds nothing.
    target = next(p for p in sorted((esc50 / "audio").iterdir()))
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))
    assert ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index").embedded == 0

    # Changing one file re-embeds only that file.
    sf.write(target, sound(2000.0, seed=99), SR)
    changed = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index")
    assert changed.embedded == 1 and embedder.clips_embedded == 13
    row = [r["file"] for r in changed.meta["rows"]].index(f"audio/{target.name}")
    assert not np.allclose(changed.embeddings[row], first.embeddings[row])
    fresh = ReferenceIndex.build("esc50", esc50, SpectrumEmbedder(), tmp_path / "fresh")
    np.testing.assert_allclose(changed.embeddings, fresh.embeddings, atol=1e-6)

    # A different checkpoint gets its own index.
    other = SpectrumEmbedder(fingerprint="spectrum:2")
    ReferenceIndex.build("esc50", esc50, other, tmp_path / "index")
    assert other.clips_embedded == 12
    assert (tmp_path / "index" / "spectrum_2" / "esc50" / "embeddings.npy").is_file()


def test_folder_layouts(tmp_path):
    for layout, suffix, classes in (("gtzan", ".wav", ["blues", "jazz"]), ("openmic", ".ogg", ["piano", "violin"])):
        root = tmp_path / layout
        for c, name in enumerate(classes):
            (root / name).mkdir(parents=True)
            for i in range(3):
                sf.write(root / name / f"{name}.{i:05d}{suffix}", sound(200.0 * (c + 1), seed=i), SR)
        (root / classes[0] / "notes.txt").write_text("not audio")
        index = ReferenceIndex.build(layout, root, SpectrumEmbedder(), tmp_path / "index")
        assert index.classes() == classes and len(index) == 6
        assert index.rows(classes[1]).shape == (3, 12)


def test_loaded_index_equals_built_one(esc50, tmp_path):
    built = ReferenceIndex.build("esc50", esc50, SpectrumEmbedder(), tmp_path / "index")
    loaded = ReferenceIndex.load(ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "esc50"))
    assert loaded.labels == built.labels and loaded.embeddings.tobytes() == built.embeddings.tobytes()


def test_with_a_tiny_clap_checkpoint(esc50, tmp_path):
    """The real backend end to end: load from a local folder, index at 48 kHz, score a clip."""
    from mmverify.models.clap import HFClap
    from tests.models.test_clap import build_tiny_clap

    clap = HFClap(source=str(build_tiny_clap(tmp_path / "clap")))
    index = ReferenceIndex.build("esc50", esc50, clap, tmp_path / "index")
    assert index.meta["sample_rate"] == 48_000 and index.meta["crop_policy"] == clap.crop_policy
    query = clap.embed_audio([np.resize(sound(300.0, 5), 48_000)])[0]
    assert brute_force(query, index.rows("dog"), 10) == pytest.approx(index.topk_mean(query, "dog"), abs=1e-6)


def test_gtzan_thirds_indexes_three_windows_per_file(tmp_path):
    """The published genre references: each clip's first 10 s, 10-20 s and last 10 s are rows of their own."""
    from mmverify.references.index import cut_window

    root = tmp_path / "GTZAN"
    (root / "jazz").mkdir(parents=True)
    clip = sound(500.0, seed=1, seconds=25.0)
    sf.write(root / "jazz" / "jazz.00000.wav", clip, SR, subtype="FLOAT")
    embedder = SpectrumEmbedder()
    index = ReferenceIndex.build("gtzan-thirds", root, embedder, tmp_path / "index")
    assert [row["file"] for row in index.meta["rows"]] == [
        "jazz/jazz.00000.wav#0s-10s", "jazz/jazz.00000.wav#10s-20s", "jazz/jazz.00000.wav#last10s",
    ]  # fmt: skip
    windows = [clip[: 10 * SR], clip[10 * SR : 20 * SR], clip[-10 * SR :]]
    np.testing.assert_allclose(index.rows("jazz"), SpectrumEmbedder().embed_audio(windows), atol=1e-6)
    assert len(ReferenceIndex.build("gtzan", root, embedder, tmp_path / "index")) == 1  # whole files
    assert ReferenceIndex.build("gtzan-thirds", root, embedder, tmp_path / "index").embedded == 0

    sf.write(root / "jazz" / "jazz.00001.wav", sound(500.0, seed=2, seconds=15.0), SR)
    with pytest.raises(ValueError, match="too short for the window 10s-20s"):
        ReferenceIndex.build("gtzan-thirds", root, embedder, tmp_path / "index")
    with pytest.raises(ValueError, match="too short"):
        cut_window(np.zeros(5 * SR, dtype=np.float32), SR, (-10.0, None))
    (root / "jazz" / "jazz.00001.wav").write_bytes(b"RIFF....WAVE corrupt")  # GTZAN ships one such file
    with pytest.raises(ValueError, match="cannot decode reference .*jazz.00001.wav"):
        ReferenceIndex.build("gtzan-thirds", root, embedder, tmp_path / "index")
