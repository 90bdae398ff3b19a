"""Beat trackers: beat_this (the MMMG tracker) and librosa's dynamic-programming tracker.

Both return beat times in seconds as a sorted ``float64`` array; ``name`` says which tracker produced
them, so a task can record it in its evidence, and ``bpm_estimator`` which tempo estimator suits the
tracker's beats (see :mod:`mmverify.verifiers.audio.tempo`).

beat_this sources: a checkpoint *name* (``final0``, the paper's, or another published one such as
``small0``) resolves to ``<cache_dir>/beat_this/<name>.ckpt``, which ``mmverify models fetch beat-this``
downloads; a file beat_this itself downloaded earlier (``<torch hub>/checkpoints/beat_this-<name>.ckpt``)
is used as well.  Any other source is a local checkpoint path.  beat_this reads local checkpoints with
``torch.load(weights_only=True)``, so its own loader is used as is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pickle
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import numpy as np

from ..core.media import resample
from ..core.settings import default_cache_dir
from .base import Availability, Backend, ModelUnavailable, is_checkpoint_name, is_local, missing_packages, validate_waveform

_MIN_SECONDS = 0.1  # beat_this's STFT cannot pad shorter inputs; no beats fit in them anyway
SPECTROGRAM_RATE = 22050  # the rate beat_this computes its spectrogram at


def at_spectrogram_rate(signal: np.ndarray, sample_rate: int) -> np.ndarray:
    """``signal`` at beat_this's spectrogram rate, resampled as beat_this itself does (soxr's
    default quality) before it computes a spectrogram."""
    if sample_rate == SPECTROGRAM_RATE:
        return signal
    import soxr

    return soxr.resample(signal, in_rate=sample_rate, out_rate=SPECTROGRAM_RATE)


def _beat_times(times: Any) -> np.ndarray:
    return np.sort(np.asarray(times, dtype=np.float64).reshape(-1))


def _torch_hub_checkpoints() -> Path:
    """torch.hub's checkpoint folder, computed as torch does but without importing torch."""
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "torch"
    )
    return Path(torch_home).expanduser() / "hub" / "checkpoints"


class BeatThisTracker(Backend):
    """beat_this (Foscarin et al., 2024) with its minimal peak-picking post-processor (``dbn=False``)."""

    name: ClassVar[str] = "beat-this"
    capability: ClassVar[str] = "beat_tracker"
    bpm_estimator: ClassVar[str] = "count"  # the published BPM formula was used with this tracker
    default_source: ClassVar[str | None] = "final0"
    packages: ClassVar[tuple[str, ...]] = ("beat_this",)
    servable: ClassVar[bool] = True  # a worker's copy resamples; the model process tracks (see .served)

    def _hint(self) -> str:
        return (
            f"run `mmverify models fetch {self.name}` or set "
            f"MMVERIFY_BEAT_THIS_SOURCE=/path/to/{self.source or 'final0'}.ckpt"
        )

    def _named_checkpoint(self) -> str | None:
        """The checkpoint name when the source is a name rather than a path."""
        if not self.source or is_local(self.source):
            return None
        if not is_checkpoint_name(self.source):
            raise ModelUnavailable(
                self.name, f"{self.source!r} is neither an existing checkpoint file nor a beat_this checkpoint name"
            )
        return self.source

    def cache_path(self) -> Path:
        name = self._named_checkpoint()
        if name is None:
            raise ValueError("the source is a local path, not a checkpoint name")
        return default_cache_dir() / "beat_this" / f"{name}.ckpt"

    def local_path(self, allow_download: bool = False) -> Path:
        name = self._named_checkpoint()
        if name is None:
            if not self.source:
                raise ModelUnavailable(self.name, f"no checkpoint configured; {self._hint()}")
            path = Path(self.source).expanduser()
            if not path.is_file():
                raise ModelUnavailable(self.name, f"checkpoint {path} is not a file; {self._hint()}")
            return path
        for candidate in (self.cache_path(), _torch_hub_checkpoints() / f"beat_this-{name}.ckpt"):
            if candidate.is_file():
                return candidate
        if allow_download:
            return self._download(name)
        raise ModelUnavailable(self.name, f"checkpoint {name!r} is not at {self.cache_path()}; {self._hint()}")

    def _download(self, name: str) -> Path:
        import torch.hub
        from beat_this.inference import CHECKPOINT_URL

        target = self.cache_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        # download_url_to_file writes a temporary file and renames it, so a failed download leaves nothing
        torch.hub.download_url_to_file(f"{CHECKPOINT_URL}/{name}.ckpt", str(target), progress=True)
        return target

    def _load(self, path: Path) -> None:
        from beat_this.inference import Audio2Beats

        # beat_this falls back to downloading when torch.load raises FileNotFoundError, so only an
        # existing file may reach it (local_path guarantees that).
        if not path.is_file():
            raise ModelUnavailable(self.name, f"checkpoint {path} disappeared; {self._hint()}")
        try:
            self._model = Audio2Beats(checkpoint_path=str(path), device=self.device, float16=False, dbn=False)
        except (KeyError, RuntimeError, ValueError, pickle.UnpicklingError) as exc:
            raise ModelUnavailable(self.name, f"{path} is not a usable beat_this checkpoint ({exc})") from None

    @property
    def rows_per_forward(self) -> int | None:
        return None  # one clip per forward: its beats never depend on other clips

    def computation(self, kind: Any) -> Any:
        if kind != "beats":
            raise ValueError(f"{self.name} has no computation {kind!r}")
        return self._track

    def _track(self, signals: list[np.ndarray]) -> list[np.ndarray]:
        """The beats of each clip, given at beat_this's spectrogram rate."""
        outputs = []
        for signal in signals:
            beat_times, _downbeats = self._model(signal, SPECTROGRAM_RATE)
            outputs.append(_beat_times(beat_times))
        return outputs

    def beats(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        signal = validate_waveform(audio, allow_empty=True, sample_rate=sample_rate)
        if signal.size < _MIN_SECONDS * sample_rate:
            return np.zeros(0, dtype=np.float64)
        self.ensure_loaded()
        # resampled here, where the item is prepared: beat_this skips its own step at this rate
        signal = at_spectrogram_rate(signal, int(sample_rate))
        return self.run_batched("beats", [signal], self._track)[0]


def refine_tempo(envelope: np.ndarray, frame_rate: float, bpm: float, spread: float = 0.06) -> float:
    """``bpm`` refined on the onset envelope's autocorrelation: the highest autocorrelation lag
    within ``spread`` (relative) of the lag of ``bpm``, located between frames by a parabola through
    the peak and its neighbours.  Returns ``bpm`` unchanged when no interior peak is found."""
    signal = np.asarray(envelope, dtype=np.float64)
    signal = signal - signal.mean()
    n = signal.size
    if n < 4 or not bpm > 0:
        return float(bpm)
    power = np.abs(np.fft.rfft(signal, 2 * n)) ** 2
    autocorrelation = np.fft.irfft(power)[:n]
    lag = 60.0 * frame_rate / bpm
    low = max(1, int(np.floor(lag * (1.0 - spread))))
    high = min(n - 2, int(np.ceil(lag * (1.0 + spread))))
    if high <= low:
        return float(bpm)
    peak = low + int(np.argmax(autocorrelation[low : high + 1]))
    left, centre, right = autocorrelation[peak - 1 : peak + 2]
    curvature = left - 2.0 * centre + right
    offset = 0.5 * (left - right) / curvature if curvature < 0 else 0.0
    return float(60.0 * frame_rate / (peak + offset))


class LibrosaBeatTracker(Backend):
    """librosa's dynamic-programming beat tracker (Ellis, 2007) with a finer tempo; needs no weights.

    Audio is resampled to 22050 Hz first so results do not depend on the input rate.  Steps:

    1. Tempo: librosa's tempogram estimate on onset frames of ``tempo_hop_length=256`` samples, with
       the tempo prior centred at ``start_bpm=150``.  An autocorrelation is about as strong at twice
       the beat period as at the period itself; with librosa's default centre (120) a 170-180 BPM
       track is read at half its tempo, while 150 lies nearer every tempo from 60 to 180 BPM than
       to its half or double.
    2. The tempo is refined on the autocorrelation of a finer onset envelope (``hop_length=64``,
       2.9 ms frames), see :func:`refine_tempo`: the tempogram's whole-frame lags alone leave the
       beat period up to 1.7 % off at 150-180 BPM.
    3. Beats: librosa's dynamic programme on the fine envelope at the refined tempo
       (``tightness=100``, ``trim=True``: librosa's defaults, weak edge beats are dropped).  It spaces
       beats by whole frames, which at 2.9 ms costs under 0.5 % of the period up to 180 BPM.

    Because edge beats may be dropped, beats x 60 / duration under-counts this tracker's tempo;
    ``bpm_estimator`` names the estimator that suits it: the beat period (``"intervals"``).  On
    synthetic click and drum tracks of 10-60 s at 60-180 BPM the fitted beat period is within
    0.5 BPM of the truth.
    """

    name: ClassVar[str] = "librosa-beats"
    capability: ClassVar[str] = "beat_tracker"
    bpm_estimator: ClassVar[str] = "intervals"
    default_source: ClassVar[str | None] = None
    packages: ClassVar[tuple[str, ...]] = ("librosa",)

    SAMPLE_RATE: ClassVar[int] = 22050
    PARAMS: ClassVar[Mapping[str, Any]] = MappingProxyType(
        {"hop_length": 64, "tempo_hop_length": 256, "start_bpm": 150.0, "refine_spread": 0.06, "tightness": 100.0, "trim": True}
    )

    def local_path(self, allow_download: bool = False) -> Path:
        """No weights: the installed librosa package is what runs."""
        spec = importlib.util.find_spec("librosa")
        if spec is None or not spec.submodule_search_locations:
            raise ModelUnavailable(self.name, "librosa is not installed; pip install librosa")
        return Path(next(iter(spec.submodule_search_locations)))

    def availability(self) -> Availability:
        if missing_packages(self.packages):
            return Availability(False, "missing Python package librosa (pip install librosa)", "-")
        return Availability(True, "ready (no weights needed)", f"librosa {importlib.metadata.version('librosa')}")

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            settings = json.dumps({"sr": self.SAMPLE_RATE, **dict(self.PARAMS)}, sort_keys=True)
            digest = hashlib.sha256(settings.encode()).hexdigest()[:12]
            self._fingerprint = f"{self.name}:librosa-{importlib.metadata.version('librosa')}:{digest}"
        return self._fingerprint

    needs_torch: ClassVar[bool] = False

    def _load(self, path: Path) -> None:
        """Nothing to load: the tracker is librosa's algorithm with the fixed parameters above."""

    def fetch(self) -> Path:
        return self.local_path()

    def beats(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        import librosa

        self.ensure_loaded()
        signal = validate_waveform(audio, allow_empty=True, sample_rate=sample_rate)
        signal = resample(signal, int(sample_rate), self.SAMPLE_RATE)
        params = self.PARAMS
        if signal.size < params["tempo_hop_length"] * 2 or not np.any(signal):
            return np.zeros(0, dtype=np.float64)
        sr = self.SAMPLE_RATE
        coarse = librosa.onset.onset_strength(y=signal, sr=sr, hop_length=params["tempo_hop_length"])
        tempo = float(librosa.feature.tempo(onset_envelope=coarse, sr=sr, hop_length=params["tempo_hop_length"], start_bpm=params["start_bpm"])[0])
        if not (np.isfinite(tempo) and tempo > 0):
            return np.zeros(0, dtype=np.float64)
        envelope = librosa.onset.onset_strength(y=signal, sr=sr, hop_length=params["hop_length"])
        bpm = refine_tempo(envelope, sr / params["hop_length"], tempo, params["refine_spread"])
        _tempo, beat_times = librosa.beat.beat_track(
            onset_envelope=envelope, sr=sr, hop_length=params["hop_length"], bpm=bpm,
            tightness=params["tightness"], trim=params["trim"], units="time",
        )  # fmt: skip
        return _beat_times(beat_times)
