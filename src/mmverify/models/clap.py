"""CLAP audio/text embeddings, what both CLAP backends share: transformers ``ClapModel``
(:mod:`mmverify.models.clap_hf`, the default) and the original ``laion_clap``
(:mod:`mmverify.models.clap_laion`).

Both backends take mono float32 waveforms at 48 kHz and return L2-normalised float32 rows.

Determinism: CLAP sees at most ``max_length_s`` (10 s) of audio.  The published preprocessing crops
longer clips at a *random* offset, so the same clip scores differently on every call.  Here each
long clip is cropped before feature extraction, at an offset drawn from a generator seeded with the
clip's content hash: the same clip always gets the same crop, and over many clips the offsets are
uniform, like the published crop.

Padding of shorter clips is chosen per call (``embed_audio(clips, padding=...)``, or a
:class:`ClapFrontEnd` view that fixes it):

- ``"zero"`` (the default): the clip is followed by silence up to the window.  This is what the
  published MMMG evaluator computed: it calls the processor with ``padding=True``, and the
  transformers 4.x ``ClapFeatureExtractor`` took any truthy ``padding`` argument as the padding
  *mode*; ``True`` is neither "repeat" nor "repeatpad", so the clip was only zero-padded (newer
  releases map ``True`` to the configured mode instead).  An empty clip becomes 10 s of silence,
  as it did there.
- ``"repeat"``: the checkpoint's own "repeatpad" -- the clip is tiled, then zero-padded to the
  window -- which is how LAION trained the unfused CLAP models.

Both rules are deterministic; the rule is part of every cache key and reference index key.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np

from .base import PRECISIONS, Backend, validate_waveform
from .cache import OutputCache, array_digest
from .clap_features import PADDINGS, check_padding, crop_offset, deterministic_crop
from .rows import Compute, then

__all__ = [
    "CROP_POLICY", "DEFAULT_PADDING", "PADDINGS", "PRECISIONS", "ClapBackend", "ClapFrontEnd", "SAMPLE_RATE", "check_padding",
    "crop_offset", "deterministic_crop", "zero_pad",
]  # fmt: skip

CROP_POLICY = "content-seeded-crop/1"
SAMPLE_RATE = 48_000  # what CLAP checkpoints embed
DEFAULT_PADDING = "zero"
_DEFAULT_MAX_SECONDS = 10


def zero_pad(clip: np.ndarray, window: int) -> np.ndarray:
    """``clip`` followed by zeros up to ``window`` samples (clips at or over the window unchanged)."""
    missing = window - clip.shape[0]
    if missing <= 0:
        return clip
    return np.concatenate([clip, np.zeros(missing, dtype=clip.dtype)])


def _l2_rows(matrix: np.ndarray) -> np.ndarray:
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(rows / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


class ClapBackend(Backend):
    """Shared by both CLAP backends: input checks, deterministic crop, cache lookups, batching."""

    capability = "audio_text"
    crop_policy = CROP_POLICY

    def __init__(
        self, source: str | None = None, device: str | None = None, batch_size: int = 8, cache: OutputCache | None = None,
        rows: str = "auto",
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size, rows=rows)
        self.cache = cache
        self.sample_rate = SAMPLE_RATE
        self._torch: Any = None

    def _max_samples(self) -> int:
        return _DEFAULT_MAX_SECONDS * self.sample_rate

    def embedding_dim(self) -> int:
        raise NotImplementedError

    def _compute_audio(self, clips: list[np.ndarray], padding: str) -> np.ndarray:
        """Embeddings of prepared clips (see :meth:`prepare`; left unpadded when :meth:`_pads_clips`)."""
        raise NotImplementedError

    def _audio_compute(self, padding: str) -> Compute:
        """The computation :meth:`embed_audio` batches: :meth:`_compute_audio`, or a staged one."""
        return lambda batch: self._compute_audio(batch, padding)

    def _pads_clips(self) -> bool:
        """Whether :meth:`_compute_audio` zero-pads clips itself (they reach it unpadded)."""
        return False

    def _compute_text(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def computation(self, kind: Any) -> Compute:
        """Unit rows of a batch: of clips for ``("clap_audio", padding)``, of texts for ``"clap_text"``."""
        if kind == "clap_text":
            return then(self._compute_text, _l2_rows)
        name, padding = kind
        if name != "clap_audio":
            raise ValueError(f"{self.name} has no computation {kind!r}")
        return then(self._audio_compute(check_padding(padding)), _l2_rows)

    def _cached(
        self, kind: str, keys: list[str], items: list[Any], forward_kind: Any,
        shapes: Callable[[list[Any]], Callable[[Any], Any]] | None = None, prepare: Callable[[Any], Any] | None = None,
    ) -> np.ndarray:
        """Unit rows of ``items``: cached ones looked up, the rest computed through
        :func:`~mmverify.models.batching.forward` (``forward_kind`` names the computation, see
        :meth:`computation`; ``shapes`` gives, for the items to compute, what decides an item's
        input shape; ``prepare`` makes an item what is computed)."""
        rows: list[np.ndarray | None] = [None] * len(items)
        if self.cache is not None:
            for i, key in enumerate(keys):
                rows[i] = self.cache.get_array(key)
        todo = [i for i, row in enumerate(rows) if row is None]
        computed = [items[i] for i in todo]
        shape = shapes(computed) if shapes is not None and computed else None
        embedded = self.run_batched(forward_kind, computed, self.computation(forward_kind), shape, prepare)
        for i, row in zip(todo, embedded):
            rows[i] = row
            if self.cache is not None:
                self.cache.put_array(keys[i], kind, row)
        if not rows:
            return np.zeros((0, self.embedding_dim()), dtype=np.float32)
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)  # type: ignore[arg-type]

    def padding_policy(self, padding: str) -> str:
        """The crop and ``padding`` rules as one string (part of reference index keys)."""
        return f"{self.crop_policy};pad={check_padding(padding)}"

    @property
    def preprocessing(self) -> str:
        """The crop and padding rules of :meth:`embed_audio` without a ``padding`` argument."""
        return self.padding_policy(DEFAULT_PADDING)

    def front_end(self, padding: str = DEFAULT_PADDING) -> "ClapFrontEnd":
        """This backend with ``padding`` fixed, for code that embeds through one rule."""
        return ClapFrontEnd(self, padding)

    def prepare(
        self, clips: Sequence[np.ndarray], padding: str = DEFAULT_PADDING, *, fill: bool = True, digests: bool = True
    ) -> tuple[list[np.ndarray], list[str | None]]:
        """The waveforms the model is given (cropped; zero-padded for ``padding="zero"`` when
        ``fill``) and the content hashes of the clips as passed in -- with ``digests=False`` only
        those a crop needs (hashing a clip costs about a fifth of resampling it), None elsewhere."""
        check_padding(padding)
        pairs = [self._prepared(clip, padding, fill, digests) for clip in clips]
        return [clip for clip, _ in pairs], [digest for _, digest in pairs]

    def _prepared(self, clip: np.ndarray, padding: str, fill: bool, digest: bool) -> tuple[np.ndarray, str | None]:
        """One clip of :meth:`prepare`: the waveform the model is given, and its content hash."""
        array = validate_waveform(clip, allow_empty=padding == "zero")
        window = self._max_samples()
        content = array_digest(array) if digest or array.shape[0] > window else None
        cropped = deterministic_crop(array, window, content)
        return (zero_pad(cropped, window) if padding == "zero" and fill else cropped), content

    def embed_audio(self, clips: Sequence[np.ndarray], padding: str | None = None) -> np.ndarray:
        """(N, D) float32 unit rows; clips are mono float32 at ``sample_rate``.  ``padding`` is
        ``"zero"`` (default) or ``"repeat"`` (see the module docstring).  A clip that is not a
        finite mono waveform is a ValueError -- with packed rows and no cache, raised once the
        batches before it have run (see :func:`~.rows.compute_now`)."""
        padding = check_padding(DEFAULT_PADDING if padding is None else padding)
        self.ensure_loaded()
        fill, kind = not self._pads_clips(), ("clap_audio", padding)
        if self.cache is None:  # no keys to look up: with packed rows each clip is prepared as its batch forms

            def prepare_one(clip: np.ndarray) -> np.ndarray:
                return self._prepared(clip, padding, fill, False)[0]

            return self._cached("clap_audio", [], list(clips), kind, prepare=prepare_one)
        prepared, digests = self.prepare(clips, padding, fill=fill)
        max_samples = self._max_samples()
        keys = [
            OutputCache.key(
                self.fingerprint, "clap_audio", str(d), crop=self.crop_policy, pad=padding, max_samples=max_samples, sr=self.sample_rate
            )
            for d in digests
        ]
        return self._cached("clap_audio", keys, prepared, kind)

    def embed_text(self, texts: Sequence[str]) -> np.ndarray:
        """(N, D) float32 unit rows in the same space as :meth:`embed_audio`."""
        self.ensure_loaded()
        items = [str(text) for text in texts]
        keys = [
            OutputCache.key(self.fingerprint, "clap_text", hashlib.sha256(t.encode("utf-8")).hexdigest()) for t in items
        ] if self.cache is not None else []
        return self._cached("clap_text", keys, items, "clap_text", self._text_shapes)

    def _text_shapes(self, texts: list[str]) -> Callable[[str], Any]:
        """What decides the input shape of each of ``texts``: texts of one shape share a batch
        unpadded."""
        return lambda text: None


class ClapFrontEnd:
    """A CLAP backend seen through one padding rule; what tasks and reference indexes embed with.

    It has what a :class:`~mmverify.references.index.ReferenceEmbedder` needs: ``sample_rate``,
    ``fingerprint``, ``preprocessing`` (crop and padding rules) and ``embed_audio``.
    """

    def __init__(self, backend: ClapBackend, padding: str = DEFAULT_PADDING) -> None:
        self.backend = backend
        self.padding = check_padding(padding)

    @property
    def sample_rate(self) -> int:
        self.backend.ensure_loaded()  # the checkpoint's extractor sets the rate
        return int(self.backend.sample_rate)

    @property
    def fingerprint(self) -> str:
        return self.backend.fingerprint

    @property
    def preprocessing(self) -> str:
        return self.backend.padding_policy(self.padding)

    def embed_audio(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        return self.backend.embed_audio(clips, padding=self.padding)

    def embed_text(self, texts: Sequence[str]) -> np.ndarray:
        return self.backend.embed_text(texts)
