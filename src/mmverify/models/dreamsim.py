"""DreamSim perceptual image similarity (Fu et al., 2023) through the ``dreamsim`` package.

Source forms (``MMVERIFY_DREAMSIM_SOURCE`` or ``image_similarity=dreamsim@<source>``):

* ``ensemble`` (default) or another DreamSim type (``dino_vitb16``, ``open_clip_vitb32``, ...):
  weights in ``<cache_dir>/dreamsim`` (``MMVERIFY_CACHE_DIR``, default ``~/.cache/mmverify``);
* ``/path/to/folder``: the ``ensemble`` weights in that folder;
* ``<type>@/path/to/folder``: that type's weights in that folder.

The folder is dreamsim's ``cache_dir``: the unzipped release checkpoint (backbone ``*_pretrain.pth*``
files and a ``*_lora`` adapter folder) and, for DINO backbones, the torch.hub copy of the DINO
repository plus its ``checkpoints/`` weights, which dreamsim fetches through torch.hub when it first
builds the model.  ``mmverify models fetch dreamsim`` runs that first build with the network allowed.
Scoring builds the model with torch.hub's network access switched off, so anything missing ends in
:class:`ModelUnavailable` instead of a download or a hang.  dreamsim reads the backbone checkpoints
with ``torch.load(weights_only=True)`` and the LoRA adapter through peft.

**The weights folder runs Python: point it only at a folder you trust.**  For the DINO backbones
(``ensemble``, ``dino_vitb16``, ``dinov2_vitb14``) dreamsim builds the backbone with
``torch.hub.load``, which imports ``<folder>/facebookresearch_dino_main/hubconf.py`` (or
``facebookresearch_dinov2_main``) and the modules beside it -- arbitrary code, run with your
permissions, whatever ``weights_only`` says.  A folder filled by ``mmverify models fetch dreamsim``
holds the code torch.hub downloaded from facebookresearch's GitHub repositories; a folder someone
handed you (or a shared folder others can write to) may hold anything.  The open_clip / clip types
(``open_clip_vitb32``, ``clip_vitb32``) load no repository code from the folder.  The hub code is not
compared against a pinned copy (that would need the network); it is left out of the fingerprint
because it holds no weights.  See SECURITY.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
import threading
import urllib.error
import warnings
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Sequence

import numpy as np

from ..core.settings import default_cache_dir
from .base import Backend, ModelUnavailable, is_local
from .digests import checkpoint_digest

DEFAULT_TYPE = "ensemble"

# Files dreamsim's release zips put in cache_dir, per type (mirrors dreamsim.model.download_weights).
_RELEASE_FILES: dict[str, tuple[str, ...]] = {
    "ensemble": ("dino_vitb16_pretrain.pth", "open_clip_vitb16_pretrain.pth.tar", "clip_vitb16_pretrain.pth.tar", "ensemble_lora"),
    "dino_vitb16": ("dino_vitb16_pretrain.pth", "dino_vitb16_single_lora"),
    "dinov2_vitb14": ("dinov2_vitb14_pretrain.pth", "dinov2_vitb14_single_lora"),
    "open_clip_vitb32": ("open_clip_vitb32_pretrain.pth.tar", "open_clip_vitb32_single_lora"),
    "clip_vitb32": ("clip_vitb32_pretrain.pth.tar", "clip_vitb32_single_lora"),
    "synclr_vitb16": ("synclr_vit_b_16.pth", "synclr_vitb16_single_lora"),
}
# What torch.hub.load leaves in cache_dir for the DINO backbones (repository code + weights).
_DINO = ("facebookresearch_dino_main", "checkpoints/dino_vitbase16_pretrain.pth")
_DINOV2 = ("facebookresearch_dinov2_main", "checkpoints/dinov2_vitb14_pretrain.pth")
_HUB_FILES: dict[str, tuple[str, ...]] = {"ensemble": _DINO, "dino_vitb16": _DINO, "dinov2_vitb14": _DINOV2}

# torch.hub state is process-wide; builds that touch it go one at a time.
_HUB_LOCK = threading.Lock()


def required_files(dreamsim_type: str) -> tuple[str, ...]:
    """Paths, relative to the weights folder, that must exist to build ``dreamsim_type`` offline."""
    return _RELEASE_FILES[dreamsim_type] + _HUB_FILES.get(dreamsim_type, ())


def parse_source(source: str | None) -> tuple[str, Path]:
    """``(dreamsim_type, weights_folder)`` for a source string (see the module docstring)."""
    source = (source or DEFAULT_TYPE).strip()
    kind, sep, folder = source.partition("@")
    if sep:
        if kind not in _RELEASE_FILES:
            raise ValueError(f"unknown DreamSim type {kind!r}; choose from {', '.join(sorted(_RELEASE_FILES))}")
        if not folder:
            raise ValueError(f"DreamSim source {source!r} names no folder after '@'")
        return kind, Path(folder).expanduser()
    if source in _RELEASE_FILES:
        return source, default_cache_dir() / "dreamsim"
    if is_local(source):
        return DEFAULT_TYPE, Path(source).expanduser()
    raise ValueError(
        f"DreamSim source {source!r} is neither a type ({', '.join(sorted(_RELEASE_FILES))}), "
        "an existing folder, nor '<type>@<folder>'"
    )


@contextlib.contextmanager
def torch_hub_offline() -> Iterator[None]:
    """Make torch.hub refuse network access, and undo dreamsim's ``torch.hub.set_dir``.

    torch.hub reaches the network through its module-level ``urlopen`` (repository archives,
    checkpoint downloads, and the default-branch lookup it does even for cached repositories);
    replacing it makes each of those fail at once, and torch.hub then falls back to its cache.
    """
    import torch.hub

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise urllib.error.URLError("network access is disabled while loading models (offline scoring)")

    with _HUB_LOCK:
        saved_dir = getattr(torch.hub, "_hub_dir", None)
        saved_urlopen = torch.hub.urlopen
        torch.hub.urlopen = refuse  # type: ignore[assignment]
        try:
            yield
        finally:
            torch.hub.urlopen = saved_urlopen  # type: ignore[assignment]
            torch.hub._hub_dir = saved_dir  # type: ignore[attr-defined]


@contextlib.contextmanager
def _keep_hub_dir() -> Iterator[None]:
    import torch.hub

    with _HUB_LOCK:
        saved_dir = getattr(torch.hub, "_hub_dir", None)
        try:
            yield
        finally:
            torch.hub._hub_dir = saved_dir  # type: ignore[attr-defined]


def _to_pil(image: np.ndarray) -> "PIL.Image.Image":  # noqa: F821
    from PIL import Image

    array = np.asarray(image)
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"expected a uint8 image of shape (H, W), (H, W, 3) or (H, W, 4), got {array.dtype} {array.shape}")
    return Image.fromarray(np.ascontiguousarray(array))


class DreamSimBackend(Backend):
    """``similarity(pairs)`` = 1 - DreamSim distance, clipped to [0, 1] (the distance is a cosine
    distance of normalised embeddings; it only leaves [0, 1] through rounding or for near-opposite
    embeddings).  Preprocessing is dreamsim's own: RGB, 224x224 bicubic resize, ``ToTensor``; the
    model applies each backbone's mean/std normalisation itself.
    """

    name: ClassVar[str] = "dreamsim"
    capability: ClassVar[str] = "image_similarity"
    default_source: ClassVar[str | None] = DEFAULT_TYPE
    packages: ClassVar[tuple[str, ...]] = ("dreamsim", "torchvision")
    servable: ClassVar[bool] = True

    def __init__(self, source: str | None = None, device: str | None = None, batch_size: int = 16, rows: str = "auto") -> None:
        super().__init__(source, device, batch_size, rows)
        try:
            self.dreamsim_type, self.folder = parse_source(self.source)
        except ValueError as exc:
            self.dreamsim_type, self.folder = DEFAULT_TYPE, None
            self._source_error: str | None = str(exc)
        else:
            self._source_error = None

    def _hint(self) -> str:
        return (
            f"run `mmverify models fetch {self.name}` (downloads into {self.folder or default_cache_dir() / 'dreamsim'}) "
            f"or set MMVERIFY_DREAMSIM_SOURCE={self.dreamsim_type}@/path/to/dreamsim_weights"
        )

    def missing_files(self) -> list[str]:
        if self.folder is None:
            return list(required_files(self.dreamsim_type))
        return [name for name in required_files(self.dreamsim_type) if not (self.folder / name).exists()]

    def local_path(self, allow_download: bool = False) -> Path:
        if self._source_error is not None or self.folder is None:
            raise ModelUnavailable(self.name, self._source_error or "no weights folder")
        missing = self.missing_files()
        if missing and allow_download:
            return self._download()
        if missing:
            raise ModelUnavailable(
                self.name,
                f"DreamSim {self.dreamsim_type!r} weights are incomplete in {self.folder} "
                f"(missing: {', '.join(missing)}); {self._hint()}",
            )
        return self.folder

    @property
    def fingerprint(self) -> str:
        """Type + digest of exactly the files this type loads (the folder may hold other types)."""
        if self._fingerprint is None:
            folder = self.local_path()
            digest = hashlib.sha256(self.dreamsim_type.encode())
            for name in required_files(self.dreamsim_type):
                if not name.startswith("facebookresearch_"):  # hub code, not weights
                    digest.update(f"{name}={checkpoint_digest(folder / name)};".encode())
            self._fingerprint = f"{self.name}:{self.dreamsim_type}:{digest.hexdigest()[:16]}{self.shape_tag}"
        return self._fingerprint

    def _download(self) -> Path:
        """Build the model once with the network allowed: dreamsim fetches its zip and torch.hub parts."""
        from ..envfix import install_torchvision_op_stubs

        install_torchvision_op_stubs()
        from dreamsim import dreamsim

        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        with _keep_hub_dir():
            dreamsim(pretrained=True, device="cpu", cache_dir=str(self.folder), dreamsim_type=self.dreamsim_type)
        return self.folder

    def _load(self, path: Path) -> None:
        from dreamsim import dreamsim

        try:
            with torch_hub_offline(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                # dreamsim prints progress, wraps the model in peft twice (peft warns about that) and
                # builds its unused DINO head with torch's deprecated weight_norm
                warnings.filterwarnings("ignore", message="Already found a `peft_config` attribute")
                warnings.filterwarnings("ignore", message=r"`torch\.nn\.utils\.weight_norm` is deprecated")
                model, preprocess = dreamsim(
                    pretrained=True, device=self.device, cache_dir=str(path), dreamsim_type=self.dreamsim_type
                )
        except (OSError, RuntimeError, KeyError, ValueError, pickle.UnpicklingError) as exc:
            raise ModelUnavailable(
                self.name, f"cannot build DreamSim {self.dreamsim_type!r} from {path} ({exc}); {self._hint()}"
            ) from None
        self._model = model.eval()
        self._preprocess = preprocess

    def _batch_tensor(self, images: Sequence[np.ndarray]) -> Any:
        import torch

        return torch.cat([self._preprocess(_to_pil(image)) for image in images]).to(self.device)

    def similarity(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        pairs = list(pairs)
        if not pairs:
            return []
        for pair in pairs:
            if len(pair) != 2:
                raise ValueError("each pair must hold exactly two images")
        self.ensure_loaded()
        distance = np.asarray(self.run_batched("dreamsim", pairs, self.computation("dreamsim")), dtype=np.float64)
        return [float(s) for s in np.clip(1.0 - distance, 0.0, 1.0)]

    def computation(self, kind: Any) -> Callable[[list[tuple[np.ndarray, np.ndarray]]], list[float]]:
        if kind != "dreamsim":
            raise ValueError(f"{self.name} has no computation {kind!r}")
        return self._distances

    def _distances(self, batch: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        import torch

        left = self._batch_tensor([a for a, _ in batch])
        right = self._batch_tensor([b for _, b in batch])
        with self._lock, torch.inference_mode():  # dreamsim's feature hooks keep per-call state
            return self._model(left, right).reshape(-1).float().cpu().numpy().tolist()
