"""CLAP through transformers' ``ClapModel``: the default CLAP backend (what it shares with the
original ``laion_clap`` one, crop, padding, caching and batching, is :mod:`mmverify.models.clap`).

The log-mel input is computed by
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

import threading
from contextlib import nullcontext
from operator import methodcaller
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from .base import PRECISIONS, ModelUnavailable, check_precision, precision_dtype
from .cache import OutputCache
from .clap import ClapBackend, check_padding, zero_pad
from .mel import FEATURE_FRONT_ENDS, check_features
from .rows import Compute, Staged
from .transfer import HostCopy

TORCH_FRONT_END = "torch-mel/1"  # part of the fingerprint of embeddings computed through it

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
        check_precision(precision)
        super().__init__(source=source, device=device, batch_size=batch_size, cache=cache, rows=rows)
        self.features = check_features(features)
        self.precision = precision
        self._model: Any = None
        self._extractor: Any = None
        self._mel: Any = None
        self._tokenizer: Any = None
        self._dtype: Any = None
        self._max_text_tokens = 512
        self._fusion = False
        self._projection_dim = 0
        self._window = 0  # samples the model sees of a clip (the extractor's nb_max_samples)
        self._tokenizing = threading.Lock()  # shapes are counted while batches are tokenized

    @property
    def fingerprint(self) -> str:
        """Backend name + checkpoint digest, then the feature front end and the precision."""
        tags = [] if self.features == "numpy" else [f"features={TORCH_FRONT_END}"]
        if self.precision != "fp32":
            tags.append(f"precision={self.precision}")
        return ";".join([super().fingerprint, *tags])

    def _max_samples(self) -> int:
        if not self._window:  # set by the checkpoint's extractor (or the model process) on loading
            self.ensure_loaded()
        return self._window

    def embedding_dim(self) -> int:
        self.ensure_loaded()
        return self._projection_dim

    def _model_dtype(self, torch: Any) -> Any:
        return precision_dtype(torch, self.precision, self.device, self.name)

    def _load(self, path: Path) -> None:
        import torch
        from transformers import AutoTokenizer, ClapFeatureExtractor, ClapModel

        from .clap_features import ClapMelFeatures

        dtype = self._model_dtype(torch)
        try:
            model = ClapModel.from_pretrained(path, local_files_only=True)
            extractor = ClapFeatureExtractor.from_pretrained(path, local_files_only=True)
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelUnavailable(self.name, f"cannot load a CLAP checkpoint from {path} ({exc})") from None
        config = model.config
        self._extractor = extractor
        self._tokenizer = tokenizer
        self._fusion = bool(config.audio_config.enable_fusion)
        # Roberta positions are offset by padding_idx + 1, so two positions are unusable.
        limit = int(config.text_config.max_position_embeddings) - 2
        self._max_text_tokens = min(int(getattr(tokenizer, "model_max_length", limit) or limit), limit)
        self._torch = torch
        self.adopt({"sample_rate": extractor.sampling_rate, "window": extractor.nb_max_samples, "projection_dim": config.projection_dim})
        self._model = model.to(device=self.device, dtype=dtype).eval()
        self._dtype = dtype
        self._mel = ClapMelFeatures.from_extractor(self._extractor, fusion=self._fusion)

    def worker_settings(self) -> dict[str, Any]:
        """The rate and window clips are prepared at, and the embedding size (see :mod:`.served`)."""
        return {"sample_rate": self.sample_rate, "window": self._window, "projection_dim": self._projection_dim}

    def adopt(self, settings: dict[str, Any]) -> None:
        self.sample_rate = int(settings["sample_rate"])
        self._window = int(settings["window"])
        self._projection_dim = int(settings["projection_dim"])

    def answer(self, question: str, value: Any) -> Any:
        """Also ``"text_shapes"``: each text's input shape (its token count), for a worker's copy,
        which has no tokenizer."""
        if question == "text_shapes":
            return [self._text_shape(str(text)) for text in value]
        return super().answer(question, value)

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

    def _text_shapes(self, texts: list[str]) -> Callable[[str], int]:
        # the tokenizer pads to the longest text of a batch: only texts of one length share one.  A
        # served copy has no tokenizer: the model process counts a call's texts, in one question.
        if self.server is None:
            return self._text_shape
        counts = self.server.ask("text_shapes", texts, backend=self)
        return dict(zip(texts, (int(count) for count in counts))).__getitem__

    def _text_shape(self, text: str) -> int:
        with self._tokenizing:
            return len(self._tokenizer(text, truncation=True, max_length=self._max_text_tokens)["input_ids"])

    def _compute_text(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        with self._tokenizing:  # its padding and truncation are set per call, in the tokenizer
            tokens = self._tokenizer(texts, padding=True, truncation=True, max_length=self._max_text_tokens, return_tensors="pt")
        with torch.inference_mode():
            output = self._model.get_text_features(
                input_ids=tokens["input_ids"].to(self.device),
                attention_mask=tokens["attention_mask"].to(self.device),
            )
        return _pooled(output).float().cpu().numpy()
