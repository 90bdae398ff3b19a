"""Reference index: layouts, top-k scoring against brute force, rebuilds only when something changed,
one build at a time."""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import mmmg_data
import soundfile as sf

from mmverify.core import locks
from mmverify.core.registry import UnknownIdError
from mmverify.references import ReferenceIndex, scan

def esc50_csv() -> Path:
    """The published ESC-50 metadata, found (or, with CI=true, required) by the shared locator."""
    return mmmg_data("references/dataset.csv")
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
    with open(esc50_csv(), newline="", encoding="utf-8") as handle:
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
    with open(esc50_csv(), newline="", encoding="utf-8") as handle:
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
    stored = tmp_path / "index" / "spectrum_1" / "esc50" / "none_load-direct"
    assert ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "esc50", "none", None) == stored
    meta = json.loads((stored / "meta.json").read_text())
    assert meta["fingerprint"] == "spectrum:1" and meta["preprocessing"] == "none" and meta["load_rate"] is None
    assert meta["dim"] == 12
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

    # Touching a file without changing it re-hashes it but embeds nothing.  Its mtime goes back, not
    # forward: the rewrite below must leave an mtime other than the recorded one, and a file system
    # with coarse timestamps could stamp "now" equal to a second ahead of the first write.
    target = next(p for p in sorted((esc50 / "audio").iterdir()))
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns - 10 * 10**9))
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
    assert (ReferenceIndex.directory(tmp_path / "index", "spectrum:2", "esc50") / "embeddings.npy").is_file()


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
    from mmverify.models.clap_hf import HFClap
    from tests.models.test_clap import build_tiny_clap

    clap = HFClap(source=str(build_tiny_clap(tmp_path / "clap")))
    index = ReferenceIndex.build("esc50", esc50, clap, tmp_path / "index")
    assert index.meta["sample_rate"] == 48_000 and index.meta["preprocessing"] == clap.preprocessing
    query = clap.embed_audio([np.resize(sound(300.0, 5), 48_000)])[0]
    assert brute_force(query, index.rows("dog"), 10) == pytest.approx(index.topk_mean(query, "dog"), abs=1e-6)


def test_gtzan_thirds_indexes_three_windows_per_file(tmp_path):
    """The published genre references: each clip's first 10 s, 10-20 s and last 10 s are rows of their own."""
    from mmverify.references.layouts import cut_window

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


# -- the published front end: references decoded at 22050 Hz first -----------------------------------
class WideEmbedder(SpectrumEmbedder):
    """The spectrum stand-in at CLAP's 48 kHz."""

    sample_rate = 48_000


def two_tones(seconds: float = 1.0, rate: int = 44_100) -> np.ndarray:
    """1 kHz plus 15 kHz: the upper tone is above what 22050 Hz decoding keeps."""
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 1000 * t) + 0.3 * np.sin(2 * np.pi * 15_000 * t)).astype(np.float32)


def band_energy(clip: np.ndarray, rate: int, low: float, high: float) -> float:
    spectrum = np.abs(np.fft.rfft(clip)) ** 2
    freqs = np.fft.rfftfreq(clip.size, 1 / rate)
    return float(spectrum[(freqs >= low) & (freqs < high)].sum())


def test_references_decoded_at_22050_lose_what_lies_above_11025_hz(tmp_path):
    from mmverify.references.index import decode_reference

    path = tmp_path / "tones.wav"
    sf.write(path, two_tones(), 44_100, subtype="FLOAT")
    published = decode_reference(path, 48_000, load_rate=22_050)
    direct = decode_reference(path, 48_000, load_rate=None)
    assert abs(published.size - 48_000) <= 2 and abs(direct.size - 48_000) <= 2
    for clip in (published, direct):  # the 1 kHz tone survives both routes
        assert band_energy(clip, 48_000, 900, 1100) > 0.9 * band_energy(direct, 48_000, 0, 24_000) / 2
    assert band_energy(direct, 48_000, 14_000, 16_000) > 1e3
    assert band_energy(published, 48_000, 11_100, 24_000) < 1e-6 * band_energy(direct, 48_000, 14_000, 16_000)


def test_load_rate_is_part_of_the_index_key(esc50, tmp_path):
    embedder = WideEmbedder()
    published = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index", load_rate=22_050)
    direct = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index")
    assert published.embedded == direct.embedded == 12 and embedder.clips_embedded == 24  # nothing shared
    assert (published.meta["load_rate"], direct.meta["load_rate"]) == (22_050, None)
    assert not np.allclose(published.embeddings, direct.embeddings, atol=1e-3)
    home = ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "esc50", "none", 22_050)
    assert home != ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "esc50", "none", None)
    assert ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index", load_rate=22_050).embedded == 0

    # An index stored under the published key but built another way is rebuilt, not reused.
    for name in ("meta.json", "embeddings.npy"):
        (home / name).write_bytes((ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "esc50") / name).read_bytes())
    rebuilt = ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index", load_rate=22_050)
    assert rebuilt.embedded == 12 and rebuilt.embeddings.tobytes() == published.embeddings.tobytes()
    with pytest.raises(ValueError, match="load_rate"):
        ReferenceIndex.build("esc50", esc50, embedder, tmp_path / "index", load_rate=0)


def test_a_different_padding_rule_gets_its_own_index(esc50, tmp_path):
    zero, repeat = WideEmbedder(), WideEmbedder()
    zero.preprocessing, repeat.preprocessing = "crop;pad=zero", "crop;pad=repeat"
    ReferenceIndex.build("esc50", esc50, zero, tmp_path / "index", load_rate=22_050)
    again = ReferenceIndex.build("esc50", esc50, repeat, tmp_path / "index", load_rate=22_050)
    assert again.embedded == 12 and again.meta["preprocessing"] == "crop;pad=repeat"


# -- which files are references -----------------------------------------------------------------------
def touch(path: Path) -> Path:
    """An empty file: scanning never decodes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_openmic_uses_files_0_to_99_of_numbered_folders(tmp_path):
    root = tmp_path / "openmic"
    for k in range(130):
        touch(root / "saxophone" / f"{k}.mp3")
    for extra in ("notes.mp3", "007.mp3", "-1.mp3", "sub/3.mp3"):  # not among the names the published code loads
        touch(root / "saxophone" / extra)
    for i in range(120):  # a folder not numbered: the first 100 by name
        touch(root / "violin" / f"violin.{i:05d}.ogg")
    files = scan("openmic", root)
    sax = sorted(int(Path(f.name).stem) for f in files if f.label == "saxophone")
    assert sax == list(range(100))
    violin = sorted(f.name for f in files if f.label == "violin")
    assert violin == [f"violin/violin.{i:05d}.ogg" for i in range(100)]

    (root / "saxophone" / "120.mp3").unlink()
    touch(root / "saxophone" / "5.wav")
    with pytest.raises(ValueError, match="two files are number 5"):
        scan("openmic", root)


def test_openmic_folder_with_fewer_files_uses_all_of_them(tmp_path):
    root = tmp_path / "openmic"
    for k in (0, 1, 2, 40):
        touch(root / "banjo" / f"{k}.mp3")
    assert sorted(f.name for f in scan("openmic", root)) == ["banjo/0.mp3", "banjo/1.mp3", "banjo/2.mp3", "banjo/40.mp3"]


def write_labels(root: Path, rows: list[tuple[str, str, float]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "openmic-2018-aggregated-labels.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sample_key", "instrument", "relevance", "num_responses"])
        writer.writerows([key, instrument, relevance, 3] for key, instrument, relevance in rows)


def test_openmic_release_is_read_with_mmmgs_selection_rule(tmp_path):
    root = tmp_path / "openmic-2018"
    write_labels(root, [
        ("000100_0", "piano", 1.0), ("000100_0", "voice", 0.5),  # one fully agreed label: piano
        ("000200_0", "piano", 1.0), ("000200_0", "guitar", 1.0),  # two fully agreed labels: neither
        ("000300_0", "guitar", 1.0),
        ("000400_0", "piano", 0.9),  # not fully agreed
        ("000050_0", "piano", 1.0),  # rows keep their file order, not key order
    ])  # fmt: skip
    for key in ("000100_0", "000200_0", "000300_0", "000400_0", "000050_0"):
        touch(root / "audio" / key[:3] / f"{key}.ogg")
    files = scan("openmic", root)
    assert [(f.label, f.name) for f in files] == [
        ("guitar", "audio/000/000300_0.ogg"), ("piano", "audio/000/000050_0.ogg"), ("piano", "audio/000/000100_0.ogg"),
    ]  # fmt: skip

    many = [(f"{k:06d}_1", "cello", 1.0) for k in range(105, 0, -1)]  # descending keys: file order decides
    write_labels(root, many)
    for key, _, _ in many:
        touch(root / "audio" / key[:3] / f"{key}.ogg")
    chosen = {Path(f.name).stem for f in scan("openmic", root)}
    assert chosen == {key for key, _, _ in many[:100]}
    (root / "audio" / "000" / "000105_1.ogg").unlink()
    with pytest.raises(FileNotFoundError, match="000105_1"):
        scan("openmic", root)


def test_mmmgs_own_esc50_copy_is_an_esc50_layout(tmp_path):
    """MMMG's datasets/ESC-50: dataset.csv beside audio/, categories spelled with spaces."""
    rows = real_esc50_rows()
    mmmg = tmp_path / "ESC-50"
    with open(esc50_csv(), newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    mmmg.mkdir()
    with open(mmmg / "dataset.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        touch(mmmg / "audio" / row["filename"])
    files = scan("esc50", mmmg)
    assert {f.label for f in files} == set(CATEGORIES) and len(files) == len(rows)
    assert sorted(f.name for f in files) == sorted(f"audio/{row['filename']}" for row in rows)

    # Beside the release's own metadata, the release's file is read.
    (mmmg / "meta").mkdir()
    with open(mmmg / "meta" / "esc50.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows({**row, "category": row["category"].replace(" ", "_")} for row in rows)
    assert "church_bells" in {f.label for f in scan("esc50", mmmg)}
    (mmmg / "meta" / "esc50.csv").unlink()
    (mmmg / "dataset.csv").unlink()
    with pytest.raises(FileNotFoundError, match="dataset.csv"):
        scan("esc50", mmmg)


# -- builds that overlap (worker processes starting together) embed the set once ------------------------
SAFETY_S = 60.0  # how long the test waits for what should come: a failing test cannot hang


def test_a_build_waits_for_the_one_under_way_and_reuses_its_rows(esc50, tmp_path, monkeypatch):
    # the later build waits for the earlier one and then finds its rows stored
    index_dir = tmp_path / "index"
    inside, release, refused = threading.Event(), threading.Event(), threading.Event()

    def pause(seconds: float) -> None:  # between two tries of a lock held elsewhere
        refused.set()
        time.sleep(seconds)

    monkeypatch.setattr(locks, "_pause", pause)

    class Holding(SpectrumEmbedder):
        """The first build's embedder: it stays in its first embedding until released."""

        def embed_audio(self, clips):
            inside.set()
            assert release.wait(SAFETY_S)
            return super().embed_audio(clips)

    # flock locks belong to open file descriptions: two threads that each open the folder exclude
    # each other as two processes do
    first, second = Holding(), SpectrumEmbedder()
    built: dict[str, ReferenceIndex] = {}

    def build(name: str, embedder: SpectrumEmbedder) -> None:
        built[name] = ReferenceIndex.build("esc50", esc50, embedder, index_dir)

    threads = [threading.Thread(target=build, args=("first", first)), threading.Thread(target=build, args=("second", second))]
    threads[0].start()
    try:
        assert inside.wait(SAFETY_S)
        threads[1].start()
        deadline = time.monotonic() + SAFETY_S
        while not (second.clips_embedded or refused.is_set()) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        release.set()
    for thread in threads:
        thread.join(SAFETY_S)
    assert first.clips_embedded == 12 and built["first"].embedded == 12
    assert second.clips_embedded == 0 and built["second"].embedded == 0
    assert built["second"].embeddings.tobytes() == built["first"].embeddings.tobytes()
    assert built["second"].labels == built["first"].labels
