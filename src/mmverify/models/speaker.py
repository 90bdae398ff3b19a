"""Speaker embeddings: WavLM x-vectors (default), speechbrain ECAPA-TDNN, and the GE2E encoder
bundled inside the resemblyzer wheel (works offline).

All three take mono float32 waveforms at 16 kHz and return float32 rows of unit L2 norm, so a dot
product is the cosine similarity.  A clip with no signal (peak below -80 dBFS, or no voice found by
resemblyzer's VAD) gets an all-zero row: its cosine with anything is 0, so silence never passes a
"same speaker" check -- a fixed "silence embedding" would make two silent clips look identical.

Batching never changes a clip's embedding: clips are padded together (with attention masks) only
when the architecture is padding-invariant; otherwise a batch holds clips of equal length.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from .base import ModelUnavailable, safe_torch_load
from .clips import ClipBackend, TransformersClipModel, conv_min_samples, describe, is_silent, l2_rows, length_groups, pad_to


class SpeakerBackend(ClipBackend):
    """What the speaker models share: one embedding size (``_dim``, set by each ``_load``), zero rows
    for silent clips, and serving from a model process (a worker's copy needs only the size)."""

    capability = "speaker"
    kind = "speaker_embedding"
    servable = True
    _dim: int

    def embedding_dim(self) -> int:
        self.ensure_loaded()
        return self._dim

    def worker_settings(self) -> dict[str, Any]:
        return {"dim": self._dim}  # a silent clip's zero row has it

    def adopt(self, settings: dict[str, Any]) -> None:
        self._dim = int(settings["dim"])

    def _embed_voiced(self, clips: list[np.ndarray]) -> np.ndarray:
        """Raw embeddings (N, D) of clips that all carry signal."""
        raise NotImplementedError

    def _known_output(self, clip: np.ndarray) -> np.ndarray | None:
        return np.zeros(self.embedding_dim(), dtype=np.float32) if is_silent(clip) else None

    def _compute(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        return list(self._embed_voiced(clips))

    def embed(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        """(N, D) float32 rows of unit norm (all-zero for silent clips)."""
        rows = self._outputs(clips)
        if not rows:
            return np.zeros((0, self.embedding_dim()), dtype=np.float32)
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)


# -- WavLM x-vectors (transformers) ------------------------------------------------------------------


def _xvector_embeddings(model: Any, input_values: Any, attention_mask: Any) -> Any:
    """The x-vector head of transformers' ``*ForXVector`` models with exact per-clip lengths.

    transformers computes the pooled length ignoring the TDNN dilations, so in a padded batch a
    shorter clip's statistics include frames computed from padding (a ~1e-3 change of the unit
    embedding, measured).  Unpadded, its slice is clipped to the tensor and this gives the same
    result as ``model(...).embeddings``.
    """
    import torch

    config = model.config
    outputs = model.base_model(
        input_values, attention_mask=attention_mask, output_hidden_states=bool(config.use_weighted_layer_sum)
    )
    if config.use_weighted_layer_sum:
        stacked = torch.stack(outputs.hidden_states, dim=1)
        weights = torch.softmax(model.layer_weights, dim=-1)
        hidden = (stacked * weights.view(-1, 1, 1)).sum(dim=1)
    else:
        hidden = outputs[0]
    hidden = model.projector(hidden)
    for layer in model.tdnn:
        hidden = layer(hidden)
    lengths = model._get_feat_extract_output_lengths(attention_mask.sum(dim=1))
    for kernel, dilation in zip(config.tdnn_kernel, config.tdnn_dilation):
        lengths = lengths - dilation * (kernel - 1)
    pooled = torch.stack(
        [torch.cat([hidden[i, :n].mean(dim=0), hidden[i, :n].std(dim=0)]) for i, n in enumerate(lengths.tolist())]
    )
    return model.feature_extractor(pooled)


class WavLMSpeaker(TransformersClipModel, SpeakerBackend):
    """WavLM-SV (``microsoft/wavlm-base-sv``) or any transformers audio x-vector checkpoint."""

    name = "wavlm-sv"
    default_source = "microsoft/wavlm-base-sv"
    auto_model = "AutoModelForAudioXVector"
    checkpoint_kind = "an x-vector checkpoint"

    def _configure(self, config: Any) -> None:
        super()._configure(config)
        dilated = sum(d * (k - 1) for k, d in zip(config.tdnn_kernel, config.tdnn_dilation))
        # Two pooled frames at least: the statistics pooling takes a standard deviation.
        self._min_samples = conv_min_samples(config.conv_kernel, config.conv_stride, dilated + 2)
        self._dim = int(config.xvector_output_dim)

    def _embed_voiced(self, clips: list[np.ndarray]) -> np.ndarray:
        torch = self._torch
        padded = [pad_to(clip, self._min_samples) for clip in clips]
        out = np.zeros((len(clips), self._dim), dtype=np.float32)
        for group in length_groups([c.size for c in padded], self.batch_size, self._pad_ok):
            values, mask = self._inputs([padded[i] for i in group])
            with torch.inference_mode():
                embeddings = _xvector_embeddings(self._model, values, mask)
            out[group] = l2_rows(embeddings.float().cpu().numpy())
        return out


# -- speechbrain ECAPA-TDNN --------------------------------------------------------------------------


@contextmanager
def _weights_only_loads() -> Iterator[None]:
    """speechbrain calls ``torch.load`` without ``weights_only``; force it on for the load."""
    name = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
    previous = os.environ.get(name)
    os.environ[name] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


class EcapaSpeaker(SpeakerBackend):
    """speechbrain ``EncoderClassifier`` from a folder with ``hyperparams.yaml`` and checkpoints.

    The hyperparams file is HyperPyYAML, which can construct arbitrary objects: point this backend
    only at folders you trust (a hub id resolves to its cached snapshot; nothing is downloaded).
    """

    name = "ecapa"
    default_source = "speechbrain/spkrec-ecapa-voxceleb"
    packages = ("torch", "speechbrain", "torchaudio")
    _min_samples = 1_600  # 0.1 s: the dilated convolutions reflect-pad, which needs a few frames

    def _load(self, path: Path) -> None:
        import torch

        if not (path / "hyperparams.yaml").is_file():
            raise ModelUnavailable(self.name, f"{path} has no hyperparams.yaml (expected a speechbrain model folder)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from speechbrain.inference.speaker import EncoderClassifier
            from speechbrain.utils.fetching import FetchConfig

        # savedir = the folder itself: every file is found in place, nothing is linked or fetched.
        try:
            with _weights_only_loads():
                self._encoder = EncoderClassifier.from_hparams(
                    source=str(path), savedir=str(path), run_opts={"device": self.device},
                    fetch_config=FetchConfig(allow_network=False),
                )
        except Exception as exc:  # any failure to build it from that folder means: not usable here
            raise ModelUnavailable(self.name, f"cannot load the speechbrain model in {path}: {describe(exc)}") from None
        self._encoder.eval()
        self._torch = torch
        with torch.inference_mode():
            probe = self._encoder.encode_batch(torch.zeros(1, self._min_samples, device=self.device))
        self._dim = int(probe.shape[-1])

    def _embed_voiced(self, clips: list[np.ndarray]) -> np.ndarray:
        torch = self._torch
        padded = [pad_to(clip, self._min_samples) for clip in clips]
        out = np.zeros((len(clips), self._dim), dtype=np.float32)
        # "same" convolutions reflect at the edges, so padding would leak: equal lengths only.
        for group in length_groups([c.size for c in padded], self.batch_size, pad_ok=False):
            wavs = torch.from_numpy(np.stack([padded[i] for i in group])).to(self.device)
            with torch.inference_mode():
                embeddings = self._encoder.encode_batch(wavs)
            out[group] = l2_rows(embeddings.reshape(len(group), -1).float().cpu().numpy())
        return out


# -- resemblyzer's bundled GE2E encoder --------------------------------------------------------------


def _bundled_ge2e() -> Path:
    """``pretrained.pt`` inside the installed resemblyzer package, found without importing it."""
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("resemblyzer", 'resemblyzer is not installed; pip install "mmverify[models]"')
    path = Path(next(iter(spec.submodule_search_locations))) / "pretrained.pt"
    if not path.is_file():
        raise ModelUnavailable("resemblyzer", f"the resemblyzer package has no bundled weights at {path}")
    return path


def _import_resemblyzer() -> Any:
    # webrtcvad imports pkg_resources and resemblyzer a deprecated scipy module: both only warn.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import resemblyzer
        import resemblyzer.audio

    return resemblyzer


class ResemblyzerSpeaker(SpeakerBackend):
    """resemblyzer's GE2E encoder: ``preprocess_wav`` then ``embed_utterance``, several clips per
    forward pass.  Weights are read with ``weights_only=True`` (resemblyzer's own loader does not
    ask for it)."""

    name = "resemblyzer"
    default_source = "bundled"
    packages = ("torch", "resemblyzer", "webrtcvad")

    def local_path(self, allow_download: bool = False) -> Path:
        if self.source == "bundled":
            return _bundled_ge2e()
        path = super().local_path(allow_download)
        return path / "pretrained.pt" if path.is_dir() else path

    def _load(self, path: Path) -> None:
        import torch

        self._resemblyzer = _import_resemblyzer()
        hp = self._resemblyzer.hparams
        try:
            checkpoint = safe_torch_load(path)
            state = checkpoint.get("model_state", checkpoint)
            layers = sum(1 for key in state if key.startswith("lstm.weight_ih_l"))
            n_mels, hidden = state["lstm.weight_ih_l0"].shape[1], state["lstm.weight_hh_l0"].shape[1]
            dim = state["linear.weight"].shape[0]
        except Exception as exc:  # not a GE2E checkpoint: say so instead of failing later
            raise ModelUnavailable(self.name, f"{path} is not a resemblyzer GE2E checkpoint ({describe(exc)})") from None
        if n_mels != hp.mel_n_channels:
            raise ModelUnavailable(self.name, f"{path} expects {n_mels} mel channels, resemblyzer computes {hp.mel_n_channels}")
        net = torch.nn.ModuleDict(
            {"lstm": torch.nn.LSTM(n_mels, hidden, layers, batch_first=True), "linear": torch.nn.Linear(hidden, dim)}
        )
        # The checkpoint also holds GE2E's training-only similarity scale and bias.
        net.load_state_dict({k: v for k, v in state.items() if k.startswith(("lstm.", "linear."))}, strict=True)
        self._net = net.to(self.device).eval()
        self._dim = int(dim)
        self._torch = torch

    @property
    def rows_per_forward(self) -> int | None:
        return None  # one clip per forward (see _embed_voiced)

    def _partials(self, clip: np.ndarray) -> np.ndarray | None:
        """Mel spectrograms of the 1.6 s partial utterances ``embed_utterance`` would use."""
        audio = self._resemblyzer.audio
        wav = audio.preprocess_wav(clip)
        if wav.size == 0:  # the VAD found no voice
            return None
        slices, mel_slices = self._resemblyzer.VoiceEncoder.compute_partial_slices(wav.size, rate=1.3, min_coverage=0.75)
        if slices[-1].stop >= wav.size:
            wav = np.pad(wav, (0, slices[-1].stop - wav.size))
        mel = audio.wav_to_mel_spectrogram(wav)
        return np.stack([mel[s] for s in mel_slices])

    def _embed_voiced(self, clips: list[np.ndarray]) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(clips), self._dim), dtype=np.float32)
        for i, clip in enumerate(clips):
            # One clip per forward pass: the number of partials depends on how much voice the
            # VAD keeps, so a batch of several clips would have a content-dependent shape.
            partials = self._partials(clip)
            if partials is None:
                continue
            with torch.inference_mode():
                _, (hidden, _) = self._net["lstm"](torch.from_numpy(partials).to(self.device))
                raw = torch.relu(self._net["linear"](hidden[-1]))
                per_partial = raw / torch.norm(raw, dim=1, keepdim=True).clamp_min(1e-12)
            out[i] = per_partial.float().cpu().numpy().mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.where(norms > 0, out / np.maximum(norms, 1e-12), 0.0).astype(np.float32)
