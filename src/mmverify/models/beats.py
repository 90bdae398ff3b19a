"""Beat trackers: beat_this (the MMMG tracker) and librosa's dynamic-programming tracker.

Both return beat times in seconds as a sorted ``float64`` array; ``name`` says which tracker produced
them, so a task can record it in its evidence.

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
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

import numpy as np

from ..core.media import resample
from ..core.settings import default_cache_dir
from .base import Availability, Backend, ModelUnavailable, is_local, missing_packages, validate_waveform

_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MIN_SECONDS = 0.1  # beat_this's STFT cannot pad shorter inputs; no beats fit in them anyway


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
    default_source: ClassVar[str | None] = "final0"
    packages: ClassVar[tuple[str, ...]] = ("beat_this",)

    def _hint(self) -> str:
        return (
            f"run `mmverify models fetch {self.name}` or set "
            f"MMVERIFY_BEAT_THIS_SOURCE=/path/to/{self.source or 'final0'}.ckpt"
        )

    def _named_checkpoint(self) -> str | None:
        """The checkpoint name when the source is a name rather than a path."""
        if not self.source or is_local(self.source):
            return None
        if not _CHECKPOINT_NAME.match(self.source):
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

    def beats(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        signal = validate_waveform(audio, allow_empty=True, sample_rate=sample_rate)
        if signal.size < _MIN_SECONDS * sample_rate:
            return np.zeros(0, dtype=np.float64)
        self.ensure_loaded()
        # beat_this resamples to its 22050 Hz spectrogram rate itself (soxr), as published
        with self._lock:  # one model shared by threads: keep calls serial
            beat_times, _downbeats = self._model(signal, int(sample_rate))
        return _beat_times(beat_times)


class LibrosaBeatTracker(Backend):
    """librosa's dynamic-programming tracker (Ellis, 2007) with fixed parameters; needs no weights.

    Audio is resampled to 22050 Hz first so results do not depend on the input rate.  Parameters
    (librosa's defaults except the hop): ``hop_length=256`` (11.6 ms frames; with librosa's default 512
    the tracker's whole-frame beat period is off by 2-2.5 % at 120-140 BPM, with 256 by < 1.5 % over
    60-150 BPM), ``start_bpm=120`` (tempo prior), ``tightness=100``, ``trim=True`` (weak edge beats
    are dropped: a clip that starts exactly on a beat loses that first beat, whereas ``trim=False``
    adds beats in leading silence and past the last onset).  Like any autocorrelation tempo estimate it
    can pick half the tempo above ~170 BPM.
    """

    name: ClassVar[str] = "librosa-beats"
    capability: ClassVar[str] = "beat_tracker"
    default_source: ClassVar[str | None] = None
    packages: ClassVar[tuple[str, ...]] = ("librosa",)

    SAMPLE_RATE: ClassVar[int] = 22050
    PARAMS: ClassVar[Mapping[str, Any]] = MappingProxyType(
        {"hop_length": 256, "start_bpm": 120.0, "tightness": 100.0, "trim": True}
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
        if signal.size < self.PARAMS["hop_length"] * 2 or not np.any(signal):
            return np.zeros(0, dtype=np.float64)
        _tempo, beat_times = librosa.beat.beat_track(y=signal, sr=self.SAMPLE_RATE, units="time", **self.PARAMS)
        return _beat_times(beat_times)
