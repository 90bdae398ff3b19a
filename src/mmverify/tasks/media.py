"""Input and reference media that belong to an instance (edit sources, reference views, speakers).

These files come with the instruction set, so any problem with them is the user's, never the
generator's: missing or undecodable files raise :class:`ScoringError`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.decoding import INLINE, Decoder
from ..core.media import MediaError, MediaReason
from ..core.types import Instance


def _indices(instance: Instance, indices: Any) -> Sequence[int]:
    """Media numbers as written: a non-negative integer (or its digits as a string), or a non-empty
    list of them.  Nothing is coerced -- ``1.5``, ``true`` or ``-1`` would name another file."""
    listed = indices if isinstance(indices, list) else [indices]
    valid = [
        int(k) for k in listed
        if (isinstance(k, int) and not isinstance(k, bool) and k >= 0) or (isinstance(k, str) and k.isascii() and k.isdigit())
    ]  # fmt: skip
    if not listed or len(valid) != len(listed):
        raise ScoringError(
            ErrorCode.INVALID_INSTANCE, f"{instance.id}: media indices must be a non-empty list of non-negative integers"
        )
    return valid


def _load(instance: Instance, kind: str, index: int, loader):  # type: ignore[no-untyped-def]
    path = instance.media_path(kind, index)
    if path is None:
        raise ScoringError(
            ErrorCode.MISSING_MEDIA,
            f"{instance.id} needs {kind} #{index}; pass --instructions DIR with {kind}/ beside the task files",
        )
    try:
        return loader(path)
    except MediaError as exc:
        code = ErrorCode.MISSING_MEDIA if exc.reason == MediaReason.MISSING else ErrorCode.INVALID_INSTANCE
        raise ScoringError(code, f"{instance.id}: {exc.message}") from None


def instance_images(instance: Instance, indices: Any, decoder: Decoder = INLINE) -> list[np.ndarray]:
    """``decoder``: the response's (:attr:`~.response.Response.decoder`), so they decode where its media do."""
    return [_load(instance, "image", k, decoder.image) for k in _indices(instance, indices)]


def instance_audios(
    instance: Instance, indices: Any, sample_rate: int | None = None, decoder: Decoder = INLINE
) -> list[tuple[np.ndarray, int]]:
    return [_load(instance, "audio", k, lambda p: decoder.audio(p, sample_rate)) for k in _indices(instance, indices)]
