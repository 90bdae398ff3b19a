"""Whisper transcription: transformers checkpoints (``HFWhisper``) and the ``openai-whisper`` package
(``OpenAIWhisper``, in :mod:`.whisper_openai`).

Both backends take mono float32 waveforms at 16 kHz and return one stripped transcript per clip.

Determinism: decoding is greedy (temperature 0, one beam) with no fallback to sampling, and
nothing is conditioned on previous text.  Whisper sees 30 s at a time; longer clips are split here,
identically for both backends, before decoding (:func:`split_long_clip`): each cut is placed at the
quietest 20 ms frame of the last 5 s before the 30 s mark, so words are rarely cut, and the pieces'
transcripts are joined with a space.  Pieces are decoded as ordinary short-form inputs, so a clip
costs exactly ``ceil``-many decoder passes and can never loop.

Language: ``transcribe(language=...)`` forces a language (``"en"``, ``"english"``, ``"zh"`` ...);
``None`` uses the backend's default (forced Chinese for the Chinese fine-tune, detection otherwise)
and :data:`DETECT` asks for detection whatever the default.  Forcing English makes Whisper translate
speech in another language, so a forced-English transcript cannot tell which language was spoken.

Duration: ``max_seconds`` transcribes only the clip's first seconds (the published evaluator saw the
first 30 s, the single window Whisper's feature extractor keeps); ``None`` transcribes everything.

An empty clip transcribes to ``""`` without running the model.  Transcripts can be cached in an
:class:`~mmverify.models.cache.OutputCache` keyed by checkpoint fingerprint, language, duration
limit, decoding settings and the clip's content hash.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from .base import PRECISION_DTYPES, PRECISIONS, Backend, ModelUnavailable, check_precision, precision_dtype, validate_waveform
from .cache import OutputCache, array_digest
from .mel import FEATURE_FRONT_ENDS, check_features

SAMPLE_RATE = 16_000
WINDOW_SECONDS = 30.0
SEARCH_SECONDS = 5.0
_FRAME = 320  # 20 ms at 16 kHz
# Part of every cache key: bump when chunking or decoding semantics change.
DECODE_POLICY = "greedy-t0/quiet-cut-30s/1"
DETECT = "detect"  # language argument: let Whisper detect the language even where a default is forced
TORCH_FRONT_END = "torch-log-mel/1"  # part of the fingerprint of transcripts decoded from it


def split_long_clip(
    clip: np.ndarray,
    sample_rate: int = SAMPLE_RATE,
    window_s: float = WINDOW_SECONDS,
    search_s: float = SEARCH_SECONDS,
) -> list[np.ndarray]:
    """Cut ``clip`` into pieces of at most ``window_s`` seconds, at quiet points.

    Each cut lies at the centre of the lowest-energy 20 ms frame within the last ``search_s``
    seconds of the current window (the earliest such frame on ties), so the split depends only on
    the samples.
    """
    if window_s <= 0 or not 0 < search_s <= window_s:
        raise ValueError("need window_s > 0 and 0 < search_s <= window_s")
    window = int(round(window_s * sample_rate))
    search = int(round(search_s * sample_rate))
    frame = max(1, int(round(0.02 * sample_rate)))
    pieces: list[np.ndarray] = []
    start = 0
    while clip.shape[0] - start > window:
        lo = start + window - search
        region = clip[lo : start + window].astype(np.float64)
        n_frames = region.shape[0] // frame
        energy = (region[: n_frames * frame].reshape(n_frames, frame) ** 2).sum(axis=1)
        cut = lo + int(np.argmin(energy)) * frame + frame // 2
        pieces.append(clip[start:cut])
        start = cut
    pieces.append(clip[start:])
    return pieces


class _FixedLengthNotice(logging.Filter):
    """Drops transformers' notice that ``max_new_tokens`` overrides the checkpoint's ``max_length``
    while this module's ``generate`` runs in the logging thread.

    A fixed decode length sets both on purpose, and ``generate`` repeats the notice on every batch
    (clearing the checkpoint's ``max_length`` does not help: ``generate`` fills in a default).
    Other callers' notices, and everything else from transformers, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(_DECODING, "active", False) and record.getMessage().startswith("Both `max_new_tokens`"))


_DECODING = threading.local()  # log records are emitted in the thread that runs generate
_FIXED_LENGTH_NOTICE = _FixedLengthNotice()
_GENERATE_LOGGER = "transformers.generation.utils"


def _language_code(language: str | None, languages: dict[str, str], to_code: dict[str, str]) -> str | None:
    """``"English"``/``"en"``/``"<|en|>"`` -> ``"en"`` using Whisper's language tables; ``None`` or
    :data:`DETECT` -> ``None`` (detected)."""
    if language is None or language == DETECT:
        return None
    key = language.strip().lower().removeprefix("<|").removesuffix("|>")
    if key in languages:
        return key
    if key in to_code:
        return to_code[key]
    raise ValueError(f"unsupported Whisper language {language!r}")


class WhisperBase(Backend):
    """Shared by both backends: input checks, chunking, cache lookups, batching."""

    sample_rate: ClassVar[int] = SAMPLE_RATE
    default_language: ClassVar[str | None] = None

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        max_new_tokens: int | None = None,
        rows: str = "auto",
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size, rows=rows)
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        self.cache = cache
        self.max_new_tokens = max_new_tokens
        self._tables: tuple[dict[str, str], dict[str, str]] | None = None

    def _language_tables(self) -> tuple[dict[str, str], dict[str, str]]:
        """Whisper's languages (code -> name) and names -> codes, read once (a served copy's
        come from the model process: see :meth:`worker_settings`)."""
        if self._tables is None:
            self._tables = self._read_language_tables()
        return self._tables

    def _read_language_tables(self) -> tuple[dict[str, str], dict[str, str]]:
        raise NotImplementedError

    def worker_settings(self) -> dict[str, Any]:
        languages, to_code = self._language_tables()
        return {"languages": dict(languages), "to_code": dict(to_code)}

    def adopt(self, settings: dict[str, Any]) -> None:
        self._tables = (dict(settings["languages"]), dict(settings["to_code"]))

    def transcribe(
        self, clips: Sequence[np.ndarray], language: str | None = None, max_seconds: float | None = None
    ) -> list[str]:
        """One transcript per clip.  ``language`` (``"english"``, ``"en"``, ``"zh"`` ...) is forced
        when given, :data:`DETECT` lets Whisper detect it, ``None`` uses the backend's default;
        ``max_seconds`` limits each clip to its first seconds (``None``: the whole clip)."""
        if max_seconds is not None and (isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)) or not max_seconds > 0):
            raise ValueError(f"max_seconds must be positive or None, got {max_seconds!r}")
        arrays = [validate_waveform(clip, allow_empty=True) for clip in clips]
        if not arrays:
            return []
        if max_seconds is not None:
            limit = int(round(float(max_seconds) * self.sample_rate))
            arrays = [array[:limit] for array in arrays]
        self.ensure_loaded()
        code = _language_code(self.default_language if language is None else language, *self._language_tables())
        texts: list[str | None] = [None] * len(arrays)
        keys: list[str | None] = [None] * len(arrays)
        todo: list[int] = []
        for i, array in enumerate(arrays):
            if array.size == 0:
                texts[i] = ""
                continue
            if self.cache is not None:
                keys[i] = OutputCache.key(
                    self.fingerprint, "transcript", array_digest(array),
                    language=code, policy=DECODE_POLICY, max_new_tokens=self.max_new_tokens,
                    max_seconds=None if max_seconds is None else float(max_seconds), **self._key_params(),
                )
                texts[i] = self.cache.get_text(keys[i])
            if texts[i] is None:
                todo.append(i)
        if todo:
            # Every piece of every clip goes through the same batches; pieces are regrouped after.
            owners: list[int] = []
            pieces: list[np.ndarray] = []
            for i in todo:
                for piece in split_long_clip(arrays[i], self.sample_rate):
                    owners.append(i)
                    pieces.append(piece)
            decoded = self.run_batched(("decode", code), pieces, self.computation(("decode", code)))
            joined: dict[int, list[str]] = {i: [] for i in todo}
            for owner, text in zip(owners, decoded):
                if text.strip():
                    joined[owner].append(text.strip())
            for i in todo:
                texts[i] = " ".join(joined[i])
                if self.cache is not None and keys[i] is not None:
                    self.cache.put_text(keys[i], "transcript", texts[i])
        return [text or "" for text in texts]

    def _key_params(self) -> dict[str, Any]:
        return {}

    def computation(self, kind: Any) -> Callable[[list[np.ndarray]], list[str]]:
        """The transcripts of a batch of pieces, for ``("decode", language code or None)``."""
        name, code = kind
        if name != "decode":
            raise ValueError(f"{self.name} has no computation {kind!r}")
        return lambda batch: self._decode(batch, code)

    def _decode(self, pieces: list[np.ndarray], language: str | None) -> list[str]:
        """Transcribe clips of at most 30 s each."""
        raise NotImplementedError


class HFWhisper(WhisperBase):
    """Whisper via transformers (``WhisperForConditionalGeneration`` + ``WhisperProcessor``).

    Loads an HF-format folder (``save_pretrained`` output, or a cached hub snapshot) with
    ``local_files_only``.  Clips in a batch are padded to 30 s each, so a batch decodes exactly as
    its clips would one by one.

    ``features`` chooses how the log-mel input is computed: ``"torch"`` (default) on the model's
    device for the whole batch (:mod:`mmverify.models.whisper_features`, the extractor's features
    to within float32 rounding), or ``"numpy"``, the checkpoint's ``WhisperFeatureExtractor`` on
    the CPU.  The torch front end is part of the fingerprint; ``"numpy"`` adds nothing to it.

    ``precision`` (``fp32`` default, ``bf16``, ``fp16`` -- not on the CPU; also ``--precision``) is the
    dtype the model and its input features run in; ``dtype`` (``float32``, ``bfloat16``, ``float16``)
    says the same and wins where both are given.  Anything but float32 is part of the fingerprint.
    """

    name = "whisper-hf"
    capability = "transcriber"
    default_source = "openai/whisper-large-v3"
    packages = ("torch", "transformers")
    servable = True
    option_choices: ClassVar[dict[str, tuple[str, ...]]] = {
        "features": FEATURE_FRONT_ENDS, "precision": PRECISIONS, "dtype": tuple(PRECISION_DTYPES.values()),
    }  # fmt: skip

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        max_new_tokens: int | None = None,
        dtype: str | None = None,
        features: str = "torch",
        precision: str = "fp32",
        rows: str = "auto",
    ) -> None:
        check_features(features)
        super().__init__(
            source=source, device=device, batch_size=batch_size, cache=cache, max_new_tokens=max_new_tokens, rows=rows
        )
        check_precision(precision)
        if dtype is not None and dtype not in PRECISION_DTYPES.values():
            raise ValueError(f"dtype must be one of {', '.join(PRECISION_DTYPES.values())}, got {dtype!r}")
        self.dtype_name = dtype or PRECISION_DTYPES[precision]
        self.precision = next(key for key, name in PRECISION_DTYPES.items() if name == self.dtype_name)  # dtype wins
        self.features = features
        self._mel: Any = None

    @property
    def fingerprint(self) -> str:
        """Backend name + checkpoint digest, then the feature front end unless it is the extractor,
        and the dtype unless it is float32."""
        tags = [super().fingerprint] if self.features == "numpy" else [super().fingerprint, f"features={TORCH_FRONT_END}"]
        if self.dtype_name != "float32":
            tags.append(f"dtype={self.dtype_name}")
        return ";".join(tags)

    def _check_folder(self, path: Path) -> None:
        if not path.is_dir():
            raise ModelUnavailable(self.name, f"{path} is not a transformers checkpoint folder")

    def _load(self, path: Path) -> None:
        import torch
        from transformers import WhisperForConditionalGeneration, WhisperProcessor

        self._check_folder(path)
        dtype = precision_dtype(torch, self.precision, self.device, self.name)  # fp16 refused on the CPU
        try:
            self.processor = WhisperProcessor.from_pretrained(path, local_files_only=True)
            model = WhisperForConditionalGeneration.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelUnavailable(self.name, f"cannot load a Whisper checkpoint from {path} ({exc})") from None
        self.model = model.to(device=self.device, dtype=dtype).eval()
        self._dtype = dtype
        rate = getattr(self.processor.feature_extractor, "sampling_rate", SAMPLE_RATE)
        if rate != SAMPLE_RATE:
            raise ModelUnavailable(self.name, f"checkpoint expects {rate} Hz audio, not {SAMPLE_RATE}")
        if self.features == "torch":
            self._mel = self._torch_front_end(self.processor.feature_extractor, model.config)
        if self.max_new_tokens is not None:
            logging.getLogger(_GENERATE_LOGGER).addFilter(_FIXED_LENGTH_NOTICE)  # added once: one object

    def _torch_front_end(self, extractor: Any, config: Any) -> Any:
        from .whisper_features import WhisperMelFeatures

        try:
            mel = WhisperMelFeatures.from_extractor(extractor)
        except ValueError as exc:
            raise ModelUnavailable(self.name, f"{exc}; use features='numpy'") from None
        expected = getattr(config, "num_mel_bins", mel.settings.n_mels)
        if mel.settings.n_mels != expected:
            raise ModelUnavailable(self.name, f"extractor makes {mel.settings.n_mels} mel bins, the model takes {expected}")
        return mel

    def _read_language_tables(self) -> tuple[dict[str, str], dict[str, str]]:
        from transformers.models.whisper.tokenization_whisper import LANGUAGES, TO_LANGUAGE_CODE

        return LANGUAGES, TO_LANGUAGE_CODE

    def _key_params(self) -> dict[str, Any]:
        return {"dtype": self.dtype_name}

    def _input_features(self, pieces: list[np.ndarray]) -> Any:
        """``(batch, n_mels, 3000)`` log-mel input on the model's device, in its dtype."""
        if self._mel is not None:
            features = self._mel(pieces, device=self.device)
        else:
            features = self.processor.feature_extractor(pieces, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_features
        return features.to(device=self.device, dtype=self._dtype)

    def _decode(self, pieces: list[np.ndarray], language: str | None) -> list[str]:
        import torch

        features = self._input_features(pieces)
        config = self.model.generation_config
        options: dict[str, Any] = {"num_beams": 1, "do_sample": False}
        # Checkpoints without language/task tables (English-only or old fine-tunes) use their own
        # forced prompt; asking for a language there is an error in transformers.
        if getattr(config, "lang_to_id", None):
            if language is not None:
                options["language"] = language
            if getattr(config, "task_to_id", None):
                options["task"] = "transcribe"
        if self.max_new_tokens is not None:
            options["max_new_tokens"] = self.max_new_tokens
        _DECODING.active = True
        try:
            with torch.inference_mode():
                ids = self.model.generate(features, **options)
        finally:
            _DECODING.active = False
        sequences = ids.sequences if hasattr(ids, "sequences") else ids
        return [text.strip() for text in self.processor.batch_decode(sequences, skip_special_tokens=True)]


class HFWhisperChinese(HFWhisper):
    """The Chinese fine-tune MMMG used for ``a_speech_chinese``; forces Chinese unless told otherwise
    (``language=DETECT`` detects)."""

    name = "whisper-hf-zh"
    capability = "transcriber_zh"
    default_source = "BELLE-2/Belle-whisper-large-v3-zh"
    default_language = "zh"
