"""Voice activity detection with Silero VAD, whose weights ship inside the ``silero-vad`` wheel.

Source ``bundled`` (the default) is the TorchScript model in the installed package
(``silero_vad/data/silero_vad.jit``), exactly what ``silero_vad.load_silero_vad()`` loads; a local
path to another Silero ``.jit`` file works too.  TorchScript archives hold TorchScript code and
tensors, not Python pickles.  Nothing is downloaded, ever.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..core.media import resample
from .base import Backend, ModelUnavailable, is_local, validate_waveform
from .digests import checkpoint_digest

_MODEL_FILE = ("data", "silero_vad.jit")


def bundled_model_path() -> Path:
    """The model file inside the installed silero-vad package (found without importing it)."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("silero-vad", 'the silero-vad package is not installed; pip install "mmverify[models]"')
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_MODEL_FILE)
    if not path.is_file():
        raise ModelUnavailable("silero-vad", f"the installed silero-vad package has no {path.name}; reinstall silero-vad")
    return path


class SileroVAD(Backend):
    """Speech segments from Silero VAD at 16 kHz.

    ``get_speech_timestamps`` settings (Silero's defaults unless noted): ``threshold=0.5`` speech
    probability to enter speech, ``neg_threshold=0.35`` to leave it; ``min_speech_duration_ms=250``;
    ``min_silence_duration_ms=300`` (default 100: pauses between words and phrases should not split
    one utterance); ``speech_pad_ms=30``; no maximum segment length.  The model runs on the CPU
    whatever the device setting: it steps through 32 ms windows one at a time, where a GPU only adds
    transfer overhead.  Inference runs with one intra-op torch thread (restored afterwards): the
    model's ops are tiny, and with more threads synchronisation costs 5-15x on a loaded CPU.
    """

    name: ClassVar[str] = "silero-vad"
    capability: ClassVar[str] = "vad"
    default_source: ClassVar[str | None] = "bundled"
    packages: ClassVar[tuple[str, ...]] = ("silero_vad",)
    sample_rate: int = 16000

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        *,
        threshold: float = 0.5,
        neg_threshold: float | None = None,
        min_speech_ms: int = 250,
        min_silence_ms: int = 300,
        speech_pad_ms: int = 30,
    ) -> None:
        super().__init__(source, device, batch_size)
        neg = threshold - 0.15 if neg_threshold is None else neg_threshold
        if not 0.0 < threshold < 1.0 or not 0.0 < neg <= threshold:
            raise ValueError("need 0 < neg_threshold <= threshold < 1")
        if min_speech_ms < 0 or min_silence_ms < 0 or speech_pad_ms < 0:
            raise ValueError("durations must be >= 0")
        self.params: dict[str, Any] = {
            "threshold": float(threshold),
            "neg_threshold": float(neg),
            "min_speech_duration_ms": int(min_speech_ms),
            "min_silence_duration_ms": int(min_silence_ms),
            "speech_pad_ms": int(speech_pad_ms),
        }

    def local_path(self, allow_download: bool = False) -> Path:
        if not self.source or self.source == "bundled":
            return bundled_model_path()
        path = Path(self.source).expanduser()
        if not is_local(self.source) or not path.is_file():
            raise ModelUnavailable(
                self.name,
                f"{self.source!r} is not a Silero .jit file; use the bundled model (unset MMVERIFY_SILERO_VAD_SOURCE) "
                'or reinstall silero-vad (pip install "mmverify[models]")',
            )
        return path

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            settings = hashlib.sha256(json.dumps(self.params, sort_keys=True).encode()).hexdigest()[:12]
            self._fingerprint = f"{self.name}:{checkpoint_digest(self.local_path())}:{settings}"
        return self._fingerprint

    def _load(self, path: Path) -> None:
        import torch

        # Importing silero_vad calls torch.set_num_threads(1) for the whole process; undo that so
        # other backends keep their threads.
        threads = torch.get_num_threads()
        try:
            from silero_vad import get_speech_timestamps
            from silero_vad.utils_vad import init_jit_model
        finally:
            torch.set_num_threads(threads)
        self.device = "cpu"
        try:
            with warnings.catch_warnings():
                # torch 2.13 deprecates torch.jit.load, the loader silero-vad itself uses
                warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated", category=DeprecationWarning)
                self._model = init_jit_model(str(path), device=torch.device("cpu"))
        except RuntimeError as exc:
            raise ModelUnavailable(self.name, f"{path} is not a loadable Silero TorchScript model ({exc})") from None
        self._timestamps = get_speech_timestamps

    def speech_segments(self, audio: np.ndarray, sample_rate: int) -> list[tuple[float, float]]:
        """``(start_s, end_s)`` of each speech segment, in order."""
        signal = validate_waveform(audio, allow_empty=True, sample_rate=sample_rate)
        signal = resample(signal, int(sample_rate), self.sample_rate)
        if signal.size == 0 or not np.any(signal):
            return []
        self.ensure_loaded()
        import torch

        # The process's thread count is left alone: it is process-wide, so changing it here would
        # change the bits of whatever another thread computes meanwhile.
        with self._lock:  # the model carries recurrent state between windows
            spans = self._timestamps(
                torch.from_numpy(np.ascontiguousarray(signal)),
                self._model,
                sampling_rate=self.sample_rate,
                max_speech_duration_s=math.inf,
                return_seconds=False,
                **self.params,
            )
        rate = float(self.sample_rate)
        return [(span["start"] / rate, span["end"] / rate) for span in spans]
