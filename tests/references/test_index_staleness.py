"""A reference index never serves another folder's embeddings, nor a replaced clip's.

Stored file hashes are trusted only for the folder the index was built from and an unchanged size,
mtime, inode and ctime; a file changed within the racy window of being hashed is hashed again.
Archive extraction, ``cp -p`` and ``rsync -a`` give every clip one size and the same mtime (ESC-50
clips all have one size), so neither tells files apart.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.references import ReferenceIndex
from mmverify.core import hashing
from mmverify.references import index as index_module
from tests.references.test_index import SR, SpectrumEmbedder, sound

MTIME_NS = 1_700_000_000_000_000_000
FAR_FUTURE_NS = 2**62  # a clock far past every file's ctime: no file is racy


def write_clip(path: Path, freq: float, seed: int) -> None:
    sf.write(path, sound(freq, seed), SR, subtype="PCM_16")  # one length, one size
    os.utime(path, ns=(MTIME_NS, MTIME_NS))  # the same mtime for all, as an extracted archive has


def genre_root(folder: Path, seed: int) -> Path:
    for g, genre in enumerate(("blues", "rock")):
        (folder / genre).mkdir(parents=True)
        for k in range(2):
            write_clip(folder / genre / f"{genre}.{k:05d}.wav", 300.0 * (g + 1) + 50 * k, seed + 10 * g + k)
    return folder


def test_another_folder_in_the_same_index_dir_is_hashed_and_embedded(tmp_path, monkeypatch):
    monkeypatch.setattr(hashing, "_now_ns", lambda: FAR_FUTURE_NS)  # stats alone would be trusted
    a, b = genre_root(tmp_path / "A", seed=1), genre_root(tmp_path / "B", seed=2)
    sizes = {p.stat().st_size for p in [*a.rglob("*.wav"), *b.rglob("*.wav")]}
    assert len(sizes) == 1  # same names, sizes and mtimes: only the content differs

    built_a = ReferenceIndex.build("gtzan", a, SpectrumEmbedder(), tmp_path / "index")
    built_b = ReferenceIndex.build("gtzan", b, SpectrumEmbedder(), tmp_path / "index")
    fresh_b = ReferenceIndex.build("gtzan", b, SpectrumEmbedder(), tmp_path / "fresh")
    assert built_b.embedded == 4 and built_b.meta["root"] == str(b.resolve())
    assert np.array_equal(built_b.embeddings, fresh_b.embeddings)
    assert not np.array_equal(built_b.embeddings, built_a.embeddings)

    # A copy of A elsewhere: every file hashed again, nothing embedded again (same content)
    copy = tmp_path / "A-copy"
    ReferenceIndex.build("gtzan", a, SpectrumEmbedder(), tmp_path / "index")
    for path in a.rglob("*.wav"):
        (copy / path.relative_to(a)).parent.mkdir(parents=True, exist_ok=True)
        (copy / path.relative_to(a)).write_bytes(path.read_bytes())
    assert ReferenceIndex.build("gtzan", copy, SpectrumEmbedder(), tmp_path / "index").embedded == 0


def test_a_replaced_clip_with_its_mtime_kept_is_embedded_again(tmp_path, monkeypatch):
    monkeypatch.setattr(hashing, "_now_ns", lambda: FAR_FUTURE_NS)
    root = genre_root(tmp_path / "A", seed=1)
    embedder = SpectrumEmbedder()
    first = ReferenceIndex.build("gtzan", root, embedder, tmp_path / "index")
    target = root / "rock" / "rock.00001.wav"
    size = target.stat().st_size
    replacement = tmp_path / "incoming.wav"  # rsync -a / tar x: a new file renamed over the old one
    write_clip(replacement, 2000.0, seed=99)
    os.replace(replacement, target)
    assert target.stat().st_size == size and target.stat().st_mtime_ns == MTIME_NS

    changed = ReferenceIndex.build("gtzan", root, embedder, tmp_path / "index")
    assert changed.embedded == 1
    fresh = ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "fresh")
    assert np.array_equal(changed.embeddings, fresh.embeddings)
    assert not np.array_equal(changed.embeddings, first.embeddings)


def test_a_clip_rewritten_in_place_just_after_it_was_hashed_is_hashed_again(tmp_path):
    # the real clock: every file here was written just now, so no stored stat is trusted yet
    root = genre_root(tmp_path / "A", seed=1)
    ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index")
    target = root / "blues" / "blues.00000.wav"
    inode = target.stat().st_ino
    write_clip(target, 2500.0, seed=77)  # same inode, size and mtime; ctime maybe within the same tick
    assert target.stat().st_ino == inode
    assert ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index").embedded == 1


def test_nothing_changed_leaves_the_index_files_untouched(tmp_path, monkeypatch):
    monkeypatch.setattr(hashing, "_now_ns", lambda: FAR_FUTURE_NS)
    root = genre_root(tmp_path / "A", seed=1)
    first = ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index")
    directory = ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "gtzan")
    before = {name: ((directory / name).read_bytes(), (directory / name).stat().st_ino) for name in ("meta.json", "embeddings.npy")}
    hashed = []
    real = index_module.sha256_file
    monkeypatch.setattr(index_module, "sha256_file", lambda path: hashed.append(path) or real(path))
    again = ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index")
    assert again.embedded == 0 and hashed == []
    assert {name: ((directory / name).read_bytes(), (directory / name).stat().st_ino) for name in before} == before
    assert np.array_equal(again.embeddings, first.embeddings)


@pytest.mark.parametrize("field", ["inode", "ctime_ns"])
def test_rows_stored_without_inode_or_ctime_are_hashed_once_and_embed_nothing(tmp_path, monkeypatch, field):
    import json

    monkeypatch.setattr(hashing, "_now_ns", lambda: FAR_FUTURE_NS)
    root = genre_root(tmp_path / "A", seed=1)
    ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index")
    meta_path = ReferenceIndex.directory(tmp_path / "index", "spectrum:1", "gtzan") / "meta.json"
    meta = json.loads(meta_path.read_text())
    for row in meta["rows"]:
        del row[field]  # as an index of an earlier release stored them
    meta_path.write_text(json.dumps(meta))
    hashed = []
    real = index_module.sha256_file
    monkeypatch.setattr(index_module, "sha256_file", lambda path: hashed.append(path) or real(path))
    assert ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index").embedded == 0
    assert len(hashed) == 4
    assert ReferenceIndex.build("gtzan", root, SpectrumEmbedder(), tmp_path / "index").embedded == 0
    assert len(hashed) == 4  # trusted again from then on
