"""Reference clips per class, embedded once into an on-disk matrix.

MMMG scores a generated sound by its CLAP cosine similarity to every reference clip of the target
class (mean of the top 10).  The references never change between generated clips, so they are
embedded once per backend checkpoint and front end, and stored as::

    <index_dir>/<fingerprint>/<layout>/<front end>/embeddings.npy   float32 (rows, dim), grouped by class
    <index_dir>/<fingerprint>/<layout>/<front end>/meta.json        class, file, content hash per row; settings

The front end is how a file becomes the backend's input: the backend's crop and padding rules
(its ``preprocessing``) and the rate files are first decoded at (``load_rate``).  The published
evaluator decodes every reference at 22050 Hz (librosa's default) and resamples that to CLAP's
48 kHz, which removes everything above 11.025 kHz; ``load_rate=None`` decodes straight at the
backend's rate instead.

The layouts (which files of a set are references, of which class) are in :mod:`.layouts`.

Scoring a clip is then one embedding and one matrix product.  A build reuses the stored matrix
when the files, the backend fingerprint (checkpoint, batch shape, device type) and the front end
are unchanged, and re-embeds only the files that are new or changed otherwise.  A file's stored
hash is reused only for the same reference folder (``root``) and an unchanged size, mtime, inode
and ctime, and not for a file that had changed within 2 s of being hashed (timestamps come from a
coarse clock); otherwise the file is read and hashed again.  Rows are reused by content hash, so an
index built from another folder contributes only the rows whose files hold the same bytes.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..core.hashing import changed_recently, sha256_file
from ..core.locks import folder_lock
from ..core.media import MediaError, load_audio, resample
from ..core.registry import UnknownIdError
from .layouts import ReferenceFile, cut_window, scan

FORMAT_VERSION = 2
PUBLISHED_LOAD_RATE = 22_050  # the published evaluator decodes references at librosa's default rate
_EMBED_CHUNK = 32  # clips decoded and embedded at a time: bounds memory on large sets


class ReferenceEmbedder(Protocol):
    """What indexing needs from a backend: a sample rate, an audio embedding, a fingerprint.

    An optional ``preprocessing`` string (crop and padding rules; else ``crop_policy``) is part of
    the index key.
    """

    sample_rate: int

    @property
    def fingerprint(self) -> str: ...

    def embed_audio(self, clips: Sequence[np.ndarray]) -> np.ndarray: ...


def _safe_dirname(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _atomic_write(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    """Write through a temporary file and rename, so readers never see a half-written file."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, mode, encoding=None if "b" in mode else "utf-8") as stream:
            write(stream)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def decode_reference(path: Path, sample_rate: int, load_rate: int | None = PUBLISHED_LOAD_RATE) -> np.ndarray:
    """A reference file as mono float32 at ``sample_rate``: decoded at ``load_rate`` first and then
    resampled (the published route), or decoded straight at ``sample_rate`` when it is None."""
    if load_rate is None:
        return load_audio(path, sample_rate=sample_rate)[0]
    return resample(load_audio(path, sample_rate=load_rate)[0], load_rate, sample_rate)


def _decode(refs: Sequence[ReferenceFile], sample_rate: int, load_rate: int | None) -> list[np.ndarray]:
    """Each reference's samples (its window, for windowed layouts); a file is decoded once per call."""
    decoded: dict[Path, np.ndarray] = {}
    clips = []
    for ref in refs:
        if ref.path not in decoded:
            try:
                decoded[ref.path] = decode_reference(ref.path, sample_rate, load_rate)
            except MediaError as exc:  # name the file: sets hold thousands (GTZAN ships one corrupt clip)
                raise ValueError(f"cannot decode reference {ref.path}: {exc}") from None
        clip = decoded[ref.path]
        clips.append(clip if ref.window is None else cut_window(clip, sample_rate, ref.window, ref.name))
    return clips


def preprocessing_of(embedder: ReferenceEmbedder) -> str:
    """The embedder's crop and padding rules as recorded in the index key."""
    policy = getattr(embedder, "preprocessing", None)
    return str(policy if policy is not None else getattr(embedder, "crop_policy", "none"))


def front_end_name(preprocessing: str, load_rate: int | None) -> str:
    """The folder of one front end's index (a readable, path-safe name)."""
    return _safe_dirname(f"{preprocessing}~load-{load_rate or 'direct'}")


def _file_identity(stat: os.stat_result) -> dict[str, int | None]:
    """What a stored file hash is trusted by: size, mtime, inode and ctime (which only the kernel
    sets).  ``ctime_ns`` is null for a file changed within :data:`~mmverify.core.hashing.RACY_WINDOW_NS` of being hashed,
    so that the next build hashes it again."""
    racy = changed_recently(stat)
    return {
        "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino,
        "ctime_ns": None if racy else stat.st_ctime_ns,
    }  # fmt: skip


def _content(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(row["file"], row["class"], row["sha256"]) for row in rows]


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("zero embedding: cosine similarity is undefined")
    return rows / norms


class ReferenceIndex:
    """An embedding matrix with rows grouped by class; top-k cosine scoring against one class."""

    def __init__(self, embeddings: np.ndarray, labels: Sequence[str], meta: dict[str, Any], embedded: int = 0) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(labels):
            raise ValueError(f"embeddings {embeddings.shape} do not match {len(labels)} labels")
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.labels = list(labels)
        self.meta = meta
        self.embedded = embedded  # how many clips the last build had to embed (0 = reused as stored)
        self._spans: dict[str, slice] = {}
        start = 0
        for i in range(1, len(self.labels) + 1):
            if i == len(self.labels) or self.labels[i] != self.labels[start]:
                if self.labels[start] in self._spans:
                    raise ValueError(f"rows of class {self.labels[start]!r} are not contiguous")
                self._spans[self.labels[start]] = slice(start, i)
                start = i

    # -- building and loading -----------------------------------------------------------------------
    @staticmethod
    def directory(
        index_dir: str | Path, fingerprint: str, layout: str, preprocessing: str = "none", load_rate: int | None = None
    ) -> Path:
        return Path(index_dir).expanduser() / _safe_dirname(fingerprint) / layout / front_end_name(preprocessing, load_rate)

    @classmethod
    def load(cls, directory: str | Path) -> "ReferenceIndex":
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{directory} holds index format {meta.get('format')!r}, expected {FORMAT_VERSION}")
        embeddings = np.load(directory / "embeddings.npy", allow_pickle=False)
        return cls(embeddings, [row["class"] for row in meta["rows"]], meta)

    @classmethod
    def build(
        cls,
        layout: str,
        root: str | Path,
        embedder: ReferenceEmbedder,
        index_dir: str | Path,
        progress: Callable[[int, int], None] | None = None,
        load_rate: int | None = None,
    ) -> "ReferenceIndex":
        """Index the set at ``root``, reusing stored rows whose file content is unchanged.

        ``load_rate``: decode files at this rate and resample to the embedder's (the published
        evaluator used 22050); None decodes straight at the embedder's rate.
        """
        if load_rate is not None and (isinstance(load_rate, bool) or not isinstance(load_rate, int) or load_rate <= 0):
            raise ValueError(f"load_rate must be a positive integer or None, got {load_rate!r}")
        files = scan(layout, root)
        root_name = str(Path(root).expanduser().resolve())
        fingerprint = embedder.fingerprint
        preprocessing = preprocessing_of(embedder)
        sample_rate = int(embedder.sample_rate)
        directory = cls.directory(index_dir, fingerprint, layout, preprocessing, load_rate)
        settings = {"fingerprint": fingerprint, "preprocessing": preprocessing, "sample_rate": sample_rate, "load_rate": load_rate}

        # Workers that start together would each embed the whole set: one process builds while
        # the others wait, and they then find its index stored.
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # nowhere to store it: built unlocked, and refused where it is written, as before
        with folder_lock(directory):
            return cls._build_in(directory, layout, files, root_name, settings, embedder, progress)

    @classmethod
    def _build_in(
        cls,
        directory: Path,
        layout: str,
        files: Sequence[ReferenceFile],
        root_name: str,
        settings: dict[str, Any],
        embedder: ReferenceEmbedder,
        progress: Callable[[int, int], None] | None,
    ) -> "ReferenceIndex":
        """The index stored in ``directory`` (made with ``settings``), brought up to date with ``files``."""
        previous = cls._previous(directory, settings)
        old_meta = previous.meta if previous is not None else {"rows": []}
        # Stored stats describe the files of the folder the index was built from: another folder's
        # files are all hashed (their rows are still reused where the content hash matches).
        same_root = previous is not None and old_meta.get("root") == root_name
        stats = {row["file"]: row for row in old_meta["rows"]} if same_root else {}

        rows: list[dict[str, Any]] = []
        hashed: dict[Path, str] = {}  # windowed layouts list each file several times
        for ref in files:
            stat = ref.path.stat()
            identity = _file_identity(stat)
            known = stats.get(ref.name)
            # A file whose size, mtime, inode and ctime all match the stored ones keeps its stored
            # hash (no re-read).  ctime cannot be set back: a same-size replacement whose mtime was
            # preserved (cp -p, rsync -a, tar x) is hashed again.
            trusted = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino, "ctime_ns": stat.st_ctime_ns}
            if known and all(known.get(name) == value for name, value in trusted.items()):
                digest = known["sha256"]
            else:
                digest = hashed[ref.path] if ref.path in hashed else sha256_file(ref.path)
                hashed[ref.path] = digest
            rows.append({"file": ref.name, "class": ref.label, "sha256": digest, **identity})

        meta: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "layout": layout,
            "root": root_name,
            **settings,
            "rows": rows,
        }
        labels = [row["class"] for row in rows]
        reusable: dict[tuple[str, str], np.ndarray] = {}
        if previous is not None:
            reusable = {(row["file"], row["sha256"]): vector for row, vector in zip(old_meta["rows"], previous.embeddings)}
            if _content(rows) == _content(old_meta["rows"]):
                meta["dim"] = old_meta["dim"]
                if meta != old_meta:  # files touched or moved, content unchanged: refresh the stat cache
                    cls._write_meta(directory, meta)
                return cls(previous.embeddings, labels, meta, embedded=0)

        todo = [i for i, row in enumerate(rows) if (row["file"], row["sha256"]) not in reusable]
        vectors: dict[int, np.ndarray] = {}
        for start in range(0, len(todo), _EMBED_CHUNK):
            chunk = todo[start : start + _EMBED_CHUNK]
            clips = _decode([files[i] for i in chunk], settings["sample_rate"], settings["load_rate"])
            for i, vector in zip(chunk, _unit_rows(embedder.embed_audio(clips))):
                vectors[i] = vector
            if progress is not None:
                progress(min(start + _EMBED_CHUNK, len(todo)), len(todo))
        matrix = np.stack(
            [vectors[i] if i in vectors else reusable[(row["file"], row["sha256"])] for i, row in enumerate(rows)]
        ).astype(np.float32)
        meta["dim"] = int(matrix.shape[1])

        directory.mkdir(parents=True, exist_ok=True)
        _atomic_write(directory / "embeddings.npy", lambda f: np.save(f, matrix, allow_pickle=False))
        cls._write_meta(directory, meta)  # written last: the meta file marks a complete index
        return cls(matrix, labels, meta, embedded=len(todo))

    @classmethod
    def _previous(cls, directory: Path, settings: dict[str, Any]) -> "ReferenceIndex | None":
        """The stored index if it was built with the same settings (else nothing can be reused)."""
        if not (directory / "meta.json").is_file():
            return None
        try:
            index = cls.load(directory)
        except (OSError, ValueError, KeyError):
            return None  # unreadable or from another format: rebuild
        if any(index.meta.get(name, "absent") != value for name, value in settings.items()):
            return None
        return index

    @staticmethod
    def _write_meta(directory: Path, meta: dict[str, Any]) -> None:
        text = json.dumps(meta, indent=1, sort_keys=True, ensure_ascii=False)
        _atomic_write(directory / "meta.json", lambda f: f.write(text), mode="w")

    # -- scoring --------------------------------------------------------------------------------------
    def classes(self) -> list[str]:
        return sorted(self._spans)

    def rows(self, cls: str) -> np.ndarray:
        """The class's unit-norm reference embeddings (a view, not a copy)."""
        if cls not in self._spans:
            raise UnknownIdError("reference class", cls, self.classes())
        return self.embeddings[self._spans[cls]]

    def similarities(self, embeddings: np.ndarray, cls: str) -> np.ndarray:
        """Cosine similarity of each query row against every reference of ``cls``: (N, rows)."""
        queries = _unit_rows(np.atleast_2d(embeddings))
        return queries @ self.rows(cls).T

    def topk_mean_batch(self, embeddings: np.ndarray, cls: str, k: int = 10) -> np.ndarray:
        """Mean of the ``k`` highest cosine similarities per query row; ``k`` is capped at the class size."""
        if k < 1:
            raise ValueError("k must be >= 1")
        sims = self.similarities(embeddings, cls)
        k = min(k, sims.shape[1])
        top = np.partition(sims, sims.shape[1] - k, axis=1)[:, sims.shape[1] - k :]
        return top.astype(np.float64).mean(axis=1)

    def topk_mean(self, embedding: np.ndarray, cls: str, k: int = 10) -> float:
        """Mean of the top-``k`` cosine similarities of one clip's embedding against class ``cls``."""
        vector = np.asarray(embedding)
        if vector.ndim != 1:
            raise ValueError(f"expected one embedding vector, got shape {vector.shape}")
        return float(self.topk_mean_batch(vector[None, :], cls, k)[0])

    def __len__(self) -> int:
        return len(self.labels)
