"""The ``laion-clap`` backend: the original ``laion_clap`` package with its ``.pt`` checkpoints,
sharing input checks, the deterministic crop, padding and caching with ``clap-hf``
(:class:`~mmverify.models.clap.ClapBackend`)."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .base import ModelUnavailable, safe_torch_load
from .cache import OutputCache
from .clap import ClapBackend

_IMPORT_LOCK = threading.Lock()


@contextmanager
def _hub_offline() -> Iterator[None]:
    """Keep laion_clap's import-time tokenizer downloads off the network (it hangs offline otherwise)."""
    previous_env = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import huggingface_hub.constants as hub_constants
    except ImportError:
        hub_constants = None
    previous = getattr(hub_constants, "HF_HUB_OFFLINE", None)
    if hub_constants is not None:
        hub_constants.HF_HUB_OFFLINE = True  # read once, when huggingface_hub is imported
    try:
        yield
    finally:
        if hub_constants is not None:
            hub_constants.HF_HUB_OFFLINE = previous
        if previous_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = previous_env


def _checkpoint_state(checkpoint: Any) -> dict[str, Any]:
    """The model weights inside a laion_clap ``.pt`` file, keyed as ``CLAP`` expects."""
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else checkpoint
    if not isinstance(state, dict) or not state:
        raise ValueError("no state dict in checkpoint")
    if next(iter(state)).startswith("module."):
        state = {key[len("module."):]: value for key, value in state.items()}
    # Newer transformers keep position_ids as a buffer outside the state dict.
    state.pop("text_branch.embeddings.position_ids", None)
    return state


class LaionClap(ClapBackend):
    """The original ``laion_clap`` package with its ``.pt`` checkpoints (e.g. ``630k-audioset-best.pt``).

    ``source`` is the checkpoint file (or a folder holding exactly one ``.pt``).  The package is
    imported only here: it pins numpy<2 and fetches tokenizers at import, which this backend forces
    offline -- ``roberta-base``, ``bert-base-uncased`` and ``facebook/bart-base`` must be in the
    local Hugging Face cache.
    """

    name = "laion-clap"
    default_source = None
    packages = ("torch", "laion_clap")
    extra = "laion-clap"
    servable = True  # a worker's copy checks, crops and pads clips; the model process embeds them

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        amodel: str = "HTSAT-tiny",
        enable_fusion: bool = False,
        rows: str = "auto",
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size, cache=cache, rows=rows)
        self.amodel = amodel
        self.enable_fusion = enable_fusion
        self._module: Any = None
        self._embed_dim = 0

    def local_path(self, allow_download: bool = False) -> Path:
        if not self.source:
            raise ModelUnavailable(
                self.name,
                "no checkpoint configured; download a laion_clap .pt (e.g. 630k-audioset-best.pt) and set "
                "MMVERIFY_LAION_CLAP_SOURCE=/path/to/it or --model audio_text=laion-clap@/path/to/it",
            )
        path = super().local_path(allow_download)
        if path.is_dir():
            found = sorted(path.glob("*.pt"))
            if len(found) != 1:
                raise ModelUnavailable(self.name, f"expected exactly one .pt checkpoint in {path}, found {len(found)}")
            path = found[0]
        return path

    def _load(self, path: Path) -> None:
        import torch

        with _IMPORT_LOCK, _hub_offline():
            try:
                import laion_clap
            except (ImportError, OSError) as exc:
                raise ModelUnavailable(
                    self.name,
                    f"cannot import laion_clap ({exc}); install it with pip install \"mmverify[laion-clap]\" and make "
                    "sure roberta-base, bert-base-uncased and facebook/bart-base are in the Hugging Face cache",
                ) from None
            try:
                module = laion_clap.CLAP_Module(enable_fusion=self.enable_fusion, amodel=self.amodel, device=self.device)
            except OSError as exc:
                raise ModelUnavailable(self.name, f"laion_clap could not build its model offline ({exc})") from None
        # Same steps as CLAP_Module.load_ckpt, but through the weights-only loader.
        try:
            state = _checkpoint_state(safe_torch_load(path))
            module.model.load_state_dict(state)
        except Exception as exc:  # unpickling refusals, missing or mismatched keys
            raise ModelUnavailable(self.name, f"cannot load checkpoint {path} ({exc})") from None
        module.model.eval()
        self._module = module
        self._torch = torch
        self.adopt({"embed_dim": int(module.model_cfg["embed_dim"])})

    def worker_settings(self) -> dict[str, Any]:
        """The embedding size: clips are prepared at the fixed 48 kHz and 10 s (see :mod:`.served`)."""
        return {"embed_dim": self._embed_dim}

    def adopt(self, settings: dict[str, Any]) -> None:
        self._embed_dim = int(settings["embed_dim"])

    def embedding_dim(self) -> int:
        self.ensure_loaded()
        return self._embed_dim

    def _compute_audio(self, clips: list[np.ndarray], padding: str) -> np.ndarray:
        # laion_clap repeat-pads shorter clips itself; zero-padded ones arrive filling the window.
        with self._torch.inference_mode():
            return np.asarray(self._module.get_audio_embedding_from_data(x=list(clips), use_tensor=False))

    def _compute_text(self, texts: list[str]) -> np.ndarray:
        # laion_clap squeezes the batch axis of a single text; pad with a copy and drop it.
        padded = texts + texts[:1] if len(texts) == 1 else texts
        with self._torch.inference_mode():
            embedded = np.asarray(self._module.get_text_embedding(padded))
        return embedded[: len(texts)]
