"""What every model backend shares: where weights come from, device choice, lazy loading, errors.

A backend is configured with a *source*: a hub id (``laion/clap-htsat-unfused``) or a local path
(a folder saved with ``save_pretrained``, or a checkpoint file).  Scoring never downloads: hub ids
load with ``local_files_only`` from the local Hugging Face cache, which ``mmverify models fetch``
fills.  Anything missing raises :class:`ModelUnavailable`, which becomes a ``model_unavailable``
error row whose message says what to fetch or configure.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.settings import setting
from .digests import checkpoint_digest

# One model loads at a time in a process: transformers builds models under process-wide state (the
# meta-device initialisation context), and two loads in two threads corrupt each other.
_LOAD_LOCK = threading.RLock()


class ModelUnavailable(ScoringError):
    """The backend cannot be used here (package missing, weights absent, offline)."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(ErrorCode.MODEL_UNAVAILABLE, f"{backend}: {message}")
        self.backend = backend


_CHECKPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".jit", ".safetensors", ".onnx")


def is_checkpoint_name(source: str) -> bool:
    """Whether ``source`` reads as a checkpoint's name (``final0``, ``large-v3``, ``tiny.en``):
    letters, digits, ``_``, ``.`` and ``-``, not first.  A name is a file in a known folder and can
    never reach outside it."""
    return _CHECKPOINT_NAME.fullmatch(source) is not None


def is_local(source: str) -> bool:
    """Path-like sources are local; bare names ("final0", "large-v3") and hub ids are not, unless
    a relative folder of that name exists (so ``models/clap`` works from the project root)."""
    if source.startswith(("/", "./", "../", "~")) or source.endswith(_CHECKPOINT_SUFFIXES):
        return True
    return "/" in source and Path(source).exists()


def check_device(device: str) -> str:
    """The type of ``device`` (``cpu``, ``cuda``, ``mps`` ...) if torch can name it, else ValueError."""
    import torch

    try:
        return torch.device(device).type
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f"device {device!r} is not a torch device (cpu, cuda, cuda:1, mps)") from None


def pick_device(preferred: str | None = None) -> str:
    """``cuda`` > ``mps`` > ``cpu`` unless ``preferred`` (or the MMVERIFY_DEVICE setting) names one."""
    preferred = preferred or setting("MMVERIFY_DEVICE") or None
    import torch

    if preferred:
        kind = check_device(preferred)
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {preferred!r} requested but CUDA is not available")
        mps = getattr(torch.backends, "mps", None)
        if kind == "mps" and not (mps is not None and mps.is_available()):
            raise ValueError(f"device {preferred!r} requested but MPS is not available")
        return preferred
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


ROW_RULES = ("auto", "content", "packed")  # where inputs sit in a batch: see Backend.rows_by_content
PRECISIONS = ("fp32", "bf16", "fp16")  # what ``--precision`` and a spec's ``precision`` option accept
PRECISION_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # torch dtype names


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


FP16_ON_CPU = "precision fp16 is not supported on the CPU; use bf16 or fp32 there"


def precision_dtype(torch: Any, precision: str, device: Any, backend: str) -> Any:
    """The torch dtype of ``precision``; fp16 is refused on the CPU, where kernels lack it."""
    if precision == "fp16" and device_type_of(device) == "cpu":
        raise ModelUnavailable(backend, FP16_ON_CPU)
    return getattr(torch, PRECISION_DTYPES[precision])


def device_type_of(device: Any) -> str:
    """The type of a device (``cuda:1`` -> ``cuda``)."""
    return str(device).split(":", 1)[0].strip().lower() or "cpu"


class DownloadError(OSError):
    """A checkpoint could not be downloaded (``mmverify models fetch``): the hub client's own words."""


def hub_snapshot(repo_id: str, allow_download: bool = False) -> Path:
    """Local folder of a hub repository; downloads only when ``allow_download``."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=not allow_download))
    except Exception as exc:  # the hub client raises several types for "not cached" and "not reachable"
        if allow_download:  # what stopped the download is the news, not that nothing is cached
            words = " ".join(str(exc).split()) or "no reason given"
            raise DownloadError(f"could not download {repo_id} ({type(exc).__name__}: {words})") from None
        raise FileNotFoundError(f"{repo_id} is not in the local Hugging Face cache ({type(exc).__name__})") from None


def missing_packages(packages: tuple[str, ...]) -> list[str]:
    return [name for name in packages if importlib.util.find_spec(name) is None]


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str
    location: str


class Backend(ABC):
    """Lazy-loading model wrapper.  Subclasses implement ``_load`` and the capability methods."""

    name: ClassVar[str]
    capability: ClassVar[str]
    default_source: ClassVar[str | None] = None
    packages: ClassVar[tuple[str, ...]] = ("torch",)
    extra: ClassVar[str] = "models"
    needs_torch: ClassVar[bool] = True  # False for backends without neural weights (no device, no torch import)
    servable: ClassVar[bool] = False  # names its computations and loads apart what its inputs need (see .served)

    def __init__(self, source: str | None = None, device: str | None = None, batch_size: int = 8, rows: str = "auto") -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if rows not in ROW_RULES:
            raise ValueError(f"rows must be one of {', '.join(ROW_RULES)}, got {rows!r}")
        self.row_rule = rows
        self.source = source or self.unnamed_source()
        self.requested_device = device
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._loaded = False
        self._fingerprint: str | None = None
        self._tagged_device: str | None = None  # the device type the memoised fingerprint names
        self.server: Any = None  # a .served.ModelClient computing this backend's batches in another process

    # -- where the weights are --------------------------------------------------------------------
    @classmethod
    def unnamed_source(cls) -> str | None:
        """The checkpoint used where none is named: ``MMVERIFY_<NAME>_SOURCE``, else the default
        (what ``mmverify models fetch NAME`` downloads)."""
        return setting(f"MMVERIFY_{cls.name.upper().replace('-', '_')}_SOURCE") or cls.default_source

    def local_path(self, allow_download: bool = False) -> Path:
        """The checkpoint on disk (a local path, or the hub id's cached snapshot)."""
        if not self.source:
            raise ModelUnavailable(self.name, "no checkpoint configured")
        if is_local(self.source):
            path = Path(self.source).expanduser()
            if not path.exists():
                raise ModelUnavailable(self.name, f"local checkpoint {path} does not exist")
            return path
        try:
            return hub_snapshot(self.source, allow_download)
        except FileNotFoundError as exc:
            raise ModelUnavailable(self.name, f"{exc}; {self._fetch_hint()}") from None

    def _fetch_hint(self) -> str:
        """How to get the configured checkpoint: ``models fetch NAME`` downloads :meth:`unnamed_source`."""
        if self.source == self.unnamed_source():
            return f"run `mmverify models fetch {self.name}`, or point the backend at a local copy"
        return "download it into the local Hugging Face cache, or point the backend at a local copy"

    def availability(self) -> Availability:
        """Whether this backend can load here, without loading it."""
        missing = missing_packages(self.packages)
        if missing:
            return Availability(False, f"missing Python packages: {', '.join(missing)} (pip install \"mmverify[{self.extra}]\")", "-")
        if self.needs_torch:
            try:
                self._chosen_device()
            except ValueError as exc:
                return Availability(False, str(exc), "-")
        if getattr(self, "precision", "fp32") == "fp16" and self.device_type == "cpu":
            return Availability(False, FP16_ON_CPU, "-")
        try:
            return Availability(True, "ready", str(self.local_path()))
        except ModelUnavailable as exc:
            return Availability(False, exc.message, self.source or "-")

    @property
    def fingerprint(self) -> str:
        """Backend name + checkpoint digest, the fixed batch shape its outputs depend on (see
        :mod:`.batching`) and the device type they are computed on: part of every cache key."""
        if self._fingerprint is None:
            self._fingerprint = f"{self.name}:{checkpoint_digest(self.local_path())}{self.shape_tag}"
        return self._fingerprint

    @property
    def rows_per_forward(self) -> int | None:
        """The fixed batch shape of this backend's forwards; None where outputs do not depend on
        it (a backend that runs one input per forward)."""
        return self.batch_size

    def run_batched(
        self, kind: Any, inputs: Sequence[Any], compute: Any, shape: Any = None, prepare: Callable[[Any], Any] | None = None
    ) -> list[Any]:
        """``compute``'s outputs for ``inputs`` (each made by ``prepare`` first, when given) on this
        backend's fixed batch shape, merged with other items' requests when scored together (see
        :func:`.batching.forward`)."""
        from .batching import forward, one_shape

        if self.server is not None:
            compute = self.server.computation(self, kind)
        return forward(
            self, kind, inputs, compute, self.rows_per_forward or 1, shape or one_shape, self.rows_by_content, prepare
        )

    @property
    def rows_by_content(self) -> bool:
        """Whether each input sits in the row its content picks (``rows=content``, or ``auto`` on a
        CPU, whose kernels can round a row by its position) rather than packed (``rows=packed``, or
        ``auto`` on an accelerator): see :mod:`.rows`."""
        return self.row_rule == "content" or (self.row_rule == "auto" and self.device_type in ("cpu", None))

    @property
    def device_type(self) -> str | None:
        """``cpu``, ``cuda`` or ``mps`` (never an index): what outputs are computed on, whose last bits
        differ between device types.  Known without loading the model: the loaded device, else the
        one :func:`pick_device` would choose.  None for backends without torch."""
        if not self.needs_torch:
            return None
        device = getattr(self, "device", None) if self._loaded else None
        if device is None:
            try:
                device = self._chosen_device()
            except (ValueError, ImportError):  # unusable here: loading will say so; keys name the request
                device = self.requested_device or "cpu"
        return device_type_of(device)

    @property
    def shape_tag(self) -> str:
        """``;rows=<batch rows>`` (when outputs depend on the batch shape), ``;row=content`` (inputs
        sit in the row their content picks, see :mod:`.rows`) and ``;device=<type>``."""
        rows = self.rows_per_forward
        tag = "" if rows is None else f";rows={rows}" + (";row=content" if rows > 1 and self.rows_by_content else "")
        device = self._tagged_device = self.device_type
        return tag if device is None else f"{tag};device={device}"

    def _chosen_device(self) -> str:
        """The device :func:`pick_device` chooses for this backend: in the model process where one
        computes its batches (:mod:`.served`), which spares a worker importing torch."""
        return pick_device(self.requested_device) if self.server is None else self.server.device(self.requested_device)

    # -- loading ----------------------------------------------------------------------------------
    def ensure_loaded(self) -> None:
        with self._lock:
            if self._loaded:
                return
            missing = missing_packages(self.packages)
            if missing:
                raise ModelUnavailable(
                    self.name, f"missing Python packages {', '.join(missing)}; pip install \"mmverify[{self.extra}]\""
                )
            if self.needs_torch:
                if self.server is None:
                    from ..envfix import install_torchvision_op_stubs

                    install_torchvision_op_stubs()
                try:
                    self.device = self._chosen_device()
                except ValueError as exc:
                    raise ModelUnavailable(self.name, str(exc)) from None
                if self._tagged_device not in (None, device_type_of(self.device)):
                    self._fingerprint = None  # the settings chose another device since: key by this one
            else:
                self.device = "cpu"
            if self.server is not None:  # the model process loads it and says what preparing inputs needs
                self.adopt(self.server.ask("settings", backend=self))
                self._loaded = True
                return
            try:
                with _LOAD_LOCK:
                    self._load(self.local_path())
            except ImportError as exc:
                raise ModelUnavailable(self.name, f"cannot import what it needs ({exc}); pip install \"mmverify[{self.extra}]\"") from None
            self._loaded = True

    def fetch(self) -> Path:
        """Download the checkpoint into the local cache (the only code path that downloads)."""
        return self.local_path(allow_download=True)

    @abstractmethod
    def _load(self, path: Path) -> None:
        """Load weights from ``path`` onto ``self.device`` in eval mode."""

    # -- served from a model process (see .served) --------------------------------------------------
    def worker_settings(self) -> dict[str, Any]:
        """What a worker's copy of this servable backend needs to prepare inputs, read from the
        loaded checkpoint (a sample rate, a window, labels): text, numbers, lists and dicts."""
        return {}

    def adopt(self, settings: dict[str, Any]) -> None:
        """Take :meth:`worker_settings` from the model process's copy (a worker's copy loads nothing)."""

    def answer(self, question: str, value: Any) -> Any:
        """What the model process's loaded copy answers a worker's copy: ``"settings"``, its
        :meth:`worker_settings`; a backend may know more questions."""
        if question == "settings":
            return self.worker_settings()
        raise ValueError(f"{self.name} answers no question {question!r}")

    def computation(self, kind: Any) -> Any:
        """The computation :meth:`run_batched` is given for ``kind``, for a servable backend: the
        model process runs it by this name on the batches the worker forms."""
        raise NotImplementedError(f"{self.name} does not name its computations")

    def batches(self, items: list[Any]) -> list[list[Any]]:
        return [items[i : i + self.batch_size] for i in range(0, len(items), self.batch_size)]


def validate_waveform(audio: np.ndarray, *, allow_empty: bool = False, sample_rate: float | None = None) -> np.ndarray:
    """A contiguous mono float32 waveform, or ValueError (wrong shape, empty, NaN/inf, bad rate)."""
    if sample_rate is not None and (int(sample_rate) != sample_rate or sample_rate <= 0):
        raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
    array = np.ascontiguousarray(audio, dtype=np.float32)
    if array.ndim != 1:
        raise ValueError(f"expected a mono waveform (1-D array), got shape {array.shape}")
    if array.size == 0 and not allow_empty:
        raise ValueError("empty waveform")
    if not np.isfinite(array).all():
        raise ValueError("waveform contains NaN or infinite samples")
    return array


def safe_torch_load(path: str | Path, map_location: str = "cpu") -> Any:
    """``torch.load`` that refuses pickled code (tensors, containers and primitives only)."""
    import torch

    return torch.load(path, map_location=map_location, weights_only=True)
