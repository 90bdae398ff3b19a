"""A generation's parts with their media resolved, as tasks see them.

Media are decoded on demand through :mod:`mmverify.core.media`, in the calling thread or, for
items scored together, in decoding processes (:mod:`mmverify.core.decoding`).  A file that cannot
be decoded was written by the model, so it becomes a :class:`GenerationFault` (scored 0); a file
that is not there, or cannot be read, is the user's problem (:class:`ScoringError`,
``missing_media``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

import numpy as np

from ..core.errors import ErrorCode, GenerationFault, ScoringError
from ..core.decoding import INLINE, Decoder
from ..core.media import DEFAULT_LIMITS, DecodedAudio, MediaError, MediaLimits, MediaReason

MediaRef = Union[Path, bytes]


@dataclass(frozen=True)
class ResolvedPart:
    """A response part; ``media`` is a checked path or inline bytes for image/audio parts."""

    type: str
    text: str = ""
    media: MediaRef | None = None
    label: str = ""  # how the part is named in evidence (the manifest path, or "inline")


class Response:
    def __init__(self, parts: Sequence[ResolvedPart], limits: MediaLimits = DEFAULT_LIMITS, decoder: Decoder = INLINE) -> None:
        self.parts = tuple(parts)
        self.limits = limits
        self.decoder = decoder  # also for the instance's own media (see tasks/media.py)

    def of_type(self, kind: str) -> list[ResolvedPart]:
        return [part for part in self.parts if part.type == kind]

    @property
    def text(self) -> str:
        """All text parts joined with newlines."""
        return "\n".join(part.text for part in self.of_type("text"))

    def _decode(self, part: ResolvedPart, loader, kind: str):  # type: ignore[no-untyped-def]
        assert part.media is not None
        try:
            return loader(part.media)
        except MediaError as exc:
            if exc.reason == MediaReason.MISSING:
                raise ScoringError(ErrorCode.MISSING_MEDIA, exc.message) from None
            raise GenerationFault(f"unreadable_{kind}", exc.message, media=part.label, media_reason=exc.reason) from None

    def images(self) -> list[np.ndarray]:
        """Every image part decoded to uint8 RGB."""
        return [self._decode(p, lambda src: self.decoder.image(src, self.limits), "image") for p in self.of_type("image")]

    def audios(self, sample_rate: int | None = None) -> list[tuple[np.ndarray, int]]:
        """Every audio part decoded to mono float32 (resampled when ``sample_rate`` is given)."""
        return [(clip.samples, clip.rate) for clip in self.clips(sample_rate)]

    def clips(self, sample_rate: int | None = None, whole_at: Sequence[int] = ()) -> list[DecodedAudio]:
        """Every audio part as :meth:`audios` decodes it; a task that will resample a whole clip
        names the rates in ``whole_at``, so that decoding processes make those too."""
        return [
            self._decode(p, lambda src: self.decoder.clip(src, sample_rate, self.limits, whole_at), "audio")
            for p in self.of_type("audio")
        ]

    def _require_one(self, kind: str) -> None:
        count = len(self.of_type(kind))
        if count == 0:
            raise GenerationFault(f"no_{kind}", f"the response contains no {kind}")
        if count > 1:
            raise GenerationFault(f"wrong_{kind}_count", f"expected 1 {kind}, got {count}", **{f"{kind}_count": count})

    def single_image(self) -> np.ndarray:
        """The one image a single-image task expects; anything else is the generator's fault."""
        self._require_one("image")
        return self.images()[0]

    def single_audio(self, sample_rate: int | None = None) -> tuple[np.ndarray, int]:
        """The one clip a single-audio task expects, as mono float32 (resampled when asked)."""
        clip = self.single_clip(sample_rate)
        return clip.samples, clip.rate

    def single_clip(self, sample_rate: int | None = None, whole_at: Sequence[int] = ()) -> DecodedAudio:
        """The one clip of :meth:`single_audio`, decoded as :meth:`clips` does."""
        self._require_one("audio")
        return self.clips(sample_rate, whole_at)[0]
