"""CLAP audio/text embeddings: transformers ``ClapModel`` (default) and the original ``laion_clap``
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

Front end and precision (``HFClap``): the log-mel input is computed by
:mod:`mmverify.models.clap_features` on the model's device for the whole batch (``features="torch"``,
the default), or clip by clip by the checkpoint's numpy ``ClapFeatureExtractor``
(``features="numpy"``); the tests hold the two to 4e-7 of each clip's dynamic range, embedding
cosine 1.0 and identical verdicts.  ``precision`` runs the model in fp32 (default), bf16 or fp16
(refused on the CPU); under bf16/fp16 the STFT runs in float32 and the features are cast to the
model's dtype (measured deltas: docs/GPU.md, Precision).  Front end (when torch) and precision
(when not fp32) are part of the backend fingerprint, so no cached output or reference index is
shared across them (nor across device types, see ``Backend.shape_tag``).
"""

from __future__ import annotations

import hashlib
from contextlib import nullcontext
from operator import methodcaller
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from .base import PRECISIONS, Backend, ModelUnavailable, check_precision, precision_dtype, validate_waveform
from .cache import OutputCache, array_digest
from .clap_features import PADDINGS, check_padding, crop_offset, deterministic_crop
from .rows import Compute, Staged, then
from .transfer import HostCopy

__all__ = [
    "CROP_POLICY", "DEFAULT_PADDING", "FEATURE_FRONT_ENDS", "PADDINGS", "PRECISIONS", "ClapBackend", "ClapFrontEnd",
    "HFClap", "SAMPLE_RATE", "check_padding", "crop_offset", "deterministic_crop", "zero_pad",
]  # fmt: skip

CROP_POLICY = "content-seeded-crop/1"
SAMPLE_RATE = 48_000  # what CLAP checkpoints embed
DEFAULT_PADDING = "zero"
_DEFAULT_MAX_SECONDS = 10
FEATURE_FRONT_ENDS = ("torch", "numpy")  # HFClap's log-mel: torch on the model's device, or the extractor's numpy
TORCH_FRONT_END = "torch-mel/1"  # part of the fingerprint of embeddings computed through it


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


_BLAS_CONTROLLER: Any = None


def _single_threaded_blas() -> Any:
    """Run numpy's BLAS on one thread: its worker threads otherwise keep spinning after the small
    mel-filter products and slow the model forward that follows (~40% on a 2-core machine)."""
    global _BLAS_CONTROLLER
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return nullcontext()
    if _BLAS_CONTROLLER is None:
        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER.limit(limits=1, user_api="blas")


def _pooled(output: Any) -> Any:
    """transformers 5 returns a model output whose pooler output is the embedding; 4.x a tensor."""
    return getattr(output, "pooler_output", output)


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
        shape: Callable[[Any], Any] | None = None, prepare: Callable[[Any], Any] | None = None,
    ) -> np.ndarray:
        """Unit rows of ``items``: cached ones looked up, the rest computed through
        :func:`~mmverify.models.batching.forward` (``forward_kind`` names the computation, see
        :meth:`computation`; ``prepare`` makes an item what is computed)."""
        rows: list[np.ndarray | None] = [None] * len(items)
        if self.cache is not None:
            for i, key in enumerate(keys):
                rows[i] = self.cache.get_array(key)
        todo = [i for i, row in enumerate(rows) if row is None]
        embedded = self.run_batched(forward_kind, [items[i] for i in todo], self.computation(forward_kind), shape, prepare)
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
        return self._cached("clap_text", keys, items, "clap_text", self._text_shape)

    def _text_shape(self, text: str) -> Any:
        """What decides a text's input shape: texts of one shape share a batch unpadded."""
        return None


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


class HFClap(ClapBackend):
    """CLAP through transformers (``laion/clap-htsat-unfused`` or any ``save_pretrained`` folder).

    ``features`` chooses how the log-mel input is computed: ``"torch"`` (default) on the model's
    device for the whole batch (:mod:`mmverify.models.clap_features`), or ``"numpy"``, the
    checkpoint's ``ClapFeatureExtractor`` clip by clip.  ``precision`` is the model's dtype:
    ``"fp32"`` (default; published parity), ``"bf16"`` or ``"fp16"`` (not on CPU).  Both are part
    of the fingerprint, except for the numpy/fp32 pair, which computes what this backend always did.
    """

    name = "clap-hf"
    default_source = "laion/clap-htsat-unfused"
    packages = ("torch", "transformers")
    extra = "models"
    option_choices: ClassVar[dict[str, tuple[str, ...]]] = {"features": FEATURE_FRONT_ENDS, "precision": PRECISIONS}
    servable = True

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        features: str = "torch",
        precision: str = "fp32",
        rows: str = "auto",
    ) -> None:
        if features not in FEATURE_FRONT_ENDS:
            raise ValueError(f"features must be one of {', '.join(FEATURE_FRONT_ENDS)}, got {features!r}")
        check_precision(precision)
        super().__init__(source=source, device=device, batch_size=batch_size, cache=cache, rows=rows)
        self.features = features
        self.precision = precision
        self._model: Any = None
        self._extractor: Any = None
        self._mel: Any = None
        self._tokenizer: Any = None
        self._dtype: Any = None
        self._max_text_tokens = 512
        self._fusion = False
        self._projection_dim = 0

    @property
    def fingerprint(self) -> str:
        """Backend name + checkpoint digest, then the feature front end and the precision."""
        tags = [] if self.features == "numpy" else [f"features={TORCH_FRONT_END}"]
        if self.precision != "fp32":
            tags.append(f"precision={self.precision}")
        return ";".join([super().fingerprint, *tags])

    def _max_samples(self) -> int:
        return int(self._extractor.nb_max_samples)

    def embedding_dim(self) -> int:
        self.ensure_loaded()
        return self._projection_dim

    def _model_dtype(self, torch: Any) -> Any:
        return precision_dtype(torch, self.precision, self.device, self.name)

    def _load(self, path: Path) -> None:
        import torch
        from transformers import ClapModel

        from .clap_features import ClapMelFeatures

        dtype = self._model_dtype(torch)
        try:
            model = ClapModel.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelUnavailable(self.name, f"cannot load a CLAP checkpoint from {path} ({exc})") from None
        self._load_served(path, model.config)
        self._model = model.to(device=self.device, dtype=dtype).eval()
        self._dtype = dtype
        self._mel = ClapMelFeatures.from_extractor(self._extractor, fusion=self._fusion)

    def _load_served(self, path: Path, config: Any = None) -> None:
        """The settings, feature extractor and tokenizer: what preparing inputs needs, without the weights."""
        import torch
        from transformers import AutoTokenizer, ClapConfig, ClapFeatureExtractor

        try:
            config = config if config is not None else ClapConfig.from_pretrained(path, local_files_only=True)
            extractor = ClapFeatureExtractor.from_pretrained(path, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelUnavailable(self.name, f"cannot load a CLAP checkpoint from {path} ({exc})") from None
        self._extractor = extractor
        self._tokenizer = tokenizer
        self.sample_rate = int(extractor.sampling_rate)
        self._fusion = bool(config.audio_config.enable_fusion)
        self._projection_dim = int(config.projection_dim)
        # Roberta positions are offset by padding_idx + 1, so two positions are unusable.
        limit = int(config.text_config.max_position_embeddings) - 2
        self._max_text_tokens = min(int(getattr(tokenizer, "model_max_length", limit) or limit), limit)
        self._torch = torch

    def _stft_dtype(self) -> Any:
        """float64 (the extractor's own precision) for fp32; float32 under bf16/fp16, and on MPS,
        which has no float64."""
        torch = self._torch
        if self.precision != "fp32" or str(self.device).startswith("mps"):
            return torch.float32
        return torch.float64

    def _numpy_features(self, clips: list[np.ndarray]) -> np.ndarray:
        # Clips arrive cropped to the window, so "rand_trunc" never draws; zero-padded clips fill the
        # window, so the extractor's own padding (always "repeatpad" here) leaves them alone.
        with _single_threaded_blas():
            features = self._extractor(
                [clip.astype(np.float64) for clip in clips],
                sampling_rate=self.sample_rate,
                truncation="fusion" if self._fusion else "rand_trunc",
                padding="repeatpad",
                return_tensors="np",
            )
        return np.asarray(features["input_features"], dtype=np.float32)

    def _pads_clips(self) -> bool:
        return self.features == "torch"

    def feature_batch(self, clips: list[np.ndarray], padding: str = "repeat") -> Any:
        """The model's input for prepared clips (see :meth:`prepare`) shorter than the window padded
        by ``padding``: a ``(batch, channels, frames, mels)`` tensor on the model's device, in its
        dtype.  The default, "repeat", is the extractor's own "repeatpad"; it leaves clips that
        already fill the window (zero-padded ones) alone."""
        torch = self._torch
        if self.features == "numpy":
            window = self._max_samples()
            filled = [zero_pad(clip, window) for clip in clips] if check_padding(padding) == "zero" else clips
            return torch.from_numpy(self._numpy_features(filled)).to(self.device, self._dtype)  # converted on the host
        with torch.inference_mode():
            features = self._mel(clips, padding=padding, device=self.device, compute_dtype=self._stft_dtype())
        return features.to(self._dtype)

    def input_features(self, clips: list[np.ndarray], padding: str = "repeat") -> np.ndarray:
        """The log-mel features of prepared clips (see :meth:`feature_batch`), as float32 numpy."""
        if self.features == "numpy" and padding == "repeat":
            return self._numpy_features(clips)
        return self.feature_batch(clips, padding).float().cpu().numpy()

    def _audio_compute(self, padding: str) -> Compute:
        # staged: a bulk call prepares and queues the next batch while the device runs this one
        return Staged(lambda batch: self._launch_audio(batch, padding), methodcaller("result"))

    def _compute_audio(self, clips: list[np.ndarray], padding: str) -> np.ndarray:
        # embed_audio launches through _launch_audio (what a subclass overrides to see every batch)
        return self._launch_audio(clips, padding).result()

    def _launch_audio(self, clips: list[np.ndarray], padding: str) -> HostCopy:
        """The embeddings of ``clips``, computed (on an accelerator: queued) and on their way to the host
        (a subclass may return any handle with ``ready()`` and ``result()``)."""
        torch = self._torch
        features = self.feature_batch(clips, padding)
        # For fused checkpoints the extractor marks a random clip "longer" when none is; no clip is
        # longer than the window here, so the flag is False for all.
        is_longer = torch.zeros((len(clips), 1), dtype=torch.bool, device=self.device)
        with torch.inference_mode():
            output = self._model.get_audio_features(input_features=features, is_longer=is_longer)
            return HostCopy(_pooled(output).float())

    def _text_shape(self, text: str) -> int:
        # the tokenizer pads to the longest text of a batch: only texts of one length share one
        return len(self._tokenizer(text, truncation=True, max_length=self._max_text_tokens)["input_ids"])

    def _compute_text(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        tokens = self._tokenizer(
            texts, padding=True, truncation=True, max_length=self._max_text_tokens, return_tensors="pt"
        )
        with torch.inference_mode():
            output = self._model.get_text_features(
                input_ids=tokens["input_ids"].to(self.device),
                attention_mask=tokens["attention_mask"].to(self.device),
            )
        return _pooled(output).float().cpu().numpy()
