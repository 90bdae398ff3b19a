"""Whisper transcription with the ``openai-whisper`` package: a model name or a local ``.pt`` checkpoint.

Chunking, language handling, caching and determinism are those of every Whisper backend
(:mod:`.whisper`); this module adds where openai-whisper checkpoints are found, how they are read
(weights only), and decoding through openai-whisper's ``transcribe``.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ..core.settings import default_cache_dir
from .base import ModelUnavailable, is_checkpoint_name, is_local, safe_torch_load
from .cache import OutputCache
from .whisper import WhisperBase

_ALIASES = {"large": "large-v3", "turbo": "large-v3-turbo"}  # names whose file openai-whisper saves under another


class OpenAIWhisper(WhisperBase):
    """The ``openai-whisper`` package: a model name (``large-v3``) or a local ``.pt`` checkpoint.

    A name resolves to ``<cache_dir>/whisper/<name>.pt`` (or openai-whisper's own download folder,
    ``~/.cache/whisper``, when the file is already there; ``large`` and ``turbo`` to the files
    openai-whisper downloads them as, ``large-v3.pt`` and ``large-v3-turbo.pt``); only
    :meth:`fetch` downloads.  The checkpoint is read with ``weights_only=True`` and the model
    built from its ``dims``.  Decoding runs without timestamp tokens, one decoder pass per piece;
    openai-whisper has no batched decoding, so clips run one after another.
    """

    name = "whisper-openai"
    capability = "transcriber"
    default_source = "large-v3"
    packages = ("torch", "whisper")
    servable = True  # a worker's copy needs only the language tables (see .served)

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        max_new_tokens: int | None = None,
        download_root: str | os.PathLike[str] | None = None,
        fp16: bool = False,
        rows: str = "auto",
    ) -> None:
        super().__init__(
            source=source, device=device, batch_size=batch_size, cache=cache, max_new_tokens=max_new_tokens, rows=rows
        )
        self.download_root = Path(download_root).expanduser() if download_root else default_cache_dir() / "whisper"
        self.fp16 = fp16

    @staticmethod
    def _package_root() -> Path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "whisper"

    def _model_names(self) -> list[str]:
        from whisper import available_models

        return list(available_models())

    def _hint(self) -> str:
        return (
            f"run `mmverify models fetch {self.name}`, or set MMVERIFY_WHISPER_OPENAI_SOURCE "
            "to a local openai-whisper .pt checkpoint"
        )

    def local_path(self, allow_download: bool = False) -> Path:
        if not self.source:
            raise ModelUnavailable(self.name, "no checkpoint configured")
        if is_local(self.source) or self.source.endswith(".pt"):
            path = Path(self.source).expanduser()
            if not path.is_file():
                raise ModelUnavailable(self.name, f"local checkpoint {path} does not exist")
            return path
        file_name = f"{_ALIASES.get(self.source, self.source)}.pt"  # the name openai-whisper downloads it as
        target = self.download_root / file_name
        if is_checkpoint_name(self.source) and not allow_download:
            # A fetched checkpoint is found without importing openai-whisper (and torch with it):
            # a worker of a model process never loads the model.  So a file saved here under
            # another name (a fine-tune's) is used as well; loading checks it is a Whisper.
            for candidate in (target, self._package_root() / file_name):
                if candidate.is_file():
                    return candidate
        try:
            names = self._model_names()
        except ImportError:
            raise ModelUnavailable(self.name, 'openai-whisper is not installed (pip install --no-deps openai-whisper)') from None
        if self.source not in names:
            raise ModelUnavailable(self.name, f"unknown model {self.source!r}; names: {', '.join(names)}, or a .pt path")
        if allow_download:
            return self._download(target)
        raise ModelUnavailable(self.name, f"checkpoint {self.source!r} is not at {target}; {self._hint()}")

    def _download(self, target: Path) -> Path:
        import whisper

        # openai-whisper's own downloader verifies the file's SHA-256 against its URL.
        url = whisper._MODELS[self.source]
        return Path(whisper._download(url, str(target.parent), False))

    def _load(self, path: Path) -> None:
        from whisper.model import ModelDimensions, Whisper

        try:
            checkpoint = safe_torch_load(path, map_location="cpu")
        except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
            raise ModelUnavailable(
                self.name, f"{path} is not a weights-only openai-whisper checkpoint ({type(exc).__name__}: {exc})"
            ) from None
        if not isinstance(checkpoint, dict) or "dims" not in checkpoint or "model_state_dict" not in checkpoint:
            raise ModelUnavailable(self.name, f"{path} lacks the 'dims' and 'model_state_dict' of an openai-whisper checkpoint")
        try:
            model = Whisper(ModelDimensions(**checkpoint["dims"]))
            model.load_state_dict(checkpoint["model_state_dict"])
        except (TypeError, RuntimeError) as exc:
            raise ModelUnavailable(self.name, f"{path}: weights do not fit the declared dims ({exc})") from None
        self.model = model.to(self.device).eval()

    def _read_language_tables(self) -> tuple[dict[str, str], dict[str, str]]:
        from whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE

        return LANGUAGES, TO_LANGUAGE_CODE

    def _key_params(self) -> dict[str, Any]:
        return {"fp16": self.fp16}

    @property
    def rows_per_forward(self) -> int | None:
        return None  # openai-whisper transcribes piece by piece: there is no batch shape to fill

    def _decode(self, pieces: list[np.ndarray], language: str | None) -> list[str]:
        import torch

        options: dict[str, Any] = {
            "language": language,
            "task": "transcribe",
            "temperature": 0.0,  # a single temperature: no fallback to sampling
            "condition_on_previous_text": False,
            "without_timestamps": True,
            "fp16": self.fp16,
            "verbose": None,
        }
        if self.max_new_tokens is not None:
            options["sample_len"] = self.max_new_tokens
        texts = []
        with torch.inference_mode():
            for piece in pieces:
                result = self.model.transcribe(piece, **options)
                texts.append(str(result["text"]).strip())
        return texts
