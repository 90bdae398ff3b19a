"""Where the reference sets live, and their embedding indexes, built once per process.

Users point mmverify at their own copies (the sets cannot be redistributed)::

    MMVERIFY_REFERENCES="esc50=/data/ESC-50,openmic=/data/openmic-2018,gtzan=/data/GTZAN"

``mmverify score --references esc50=/data/ESC-50`` sets the same setting in its scoring context,
which worker processes receive (:mod:`mmverify.pipelines.context`).  An index is built on first use into ``<cache dir>/references`` with the configured CLAP
backend, kept in memory for the rest of the process (keyed by layout, root, backend fingerprint and
front end: padding rule and the rate files are decoded at) and reused by later runs from disk,
where it is rebuilt only for files that changed.

Problems with the configuration are the user's, never the generator's: a set that is not configured
or not readable raises ``model_unavailable`` (like a missing checkpoint), and a class name that the
set does not have raises ``invalid_instance`` with the closest names.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.errors import ErrorCode, ScoringError
from ..core.media import MediaError
from ..core.registry import UnknownIdError
from ..core.settings import Settings, setting
from ..models.batching import outside_round
from .index import PUBLISHED_LOAD_RATE, ReferenceEmbedder, ReferenceIndex, preprocessing_of
from .layouts import scan

ENV_VAR = "MMVERIFY_REFERENCES"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SetInfo:
    layouts: tuple[str, ...]  # index layouts this folder can be read as; the first is the default
    expected: str  # what the folder must look like (shown in error messages)


SETS: dict[str, SetInfo] = {
    "esc50": SetInfo(
        ("esc50",),
        "the ESC-50 release (<root>/meta/esc50.csv and <root>/audio/*.wav) or MMMG's datasets/ESC-50 copy "
        "(<root>/dataset.csv and <root>/audio/*.wav)",
    ),
    "openmic": SetInfo(
        ("openmic",),
        "one folder per instrument, <root>/<instrument>/*.mp3|.ogg|.wav|.flac (MMMG's numbered <k>.mp3 folders: files 0-99 "
        "are used; otherwise the first 100 by name), or the OpenMIC-2018 release (<root>/openmic-2018-aggregated-labels.csv "
        "and <root>/audio/)",
    ),
    "gtzan": SetInfo(
        ("gtzan-thirds", "gtzan"), "one folder per genre: <root>/<genre>/*.wav|.au (GTZAN's genres/ folder, 30 s clips)"
    ),
}


def parse_references(text: str) -> dict[str, Path]:
    """``"esc50=/a,gtzan=/b"`` -> ``{"esc50": Path("/a"), "gtzan": Path("/b")}``; validates the names."""
    roots: dict[str, Path] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, root = (piece.strip() for piece in item.partition("="))
        if not sep or not name or not root:
            raise ValueError(f"reference spec must look like 'set=/path/to/folder', got {item!r}")
        if name not in SETS:
            raise UnknownIdError("reference set", name, sorted(SETS))
        roots[name] = Path(root).expanduser()
    return roots


def _how_to_configure(name: str) -> str:
    return (
        f"set {ENV_VAR}={name}=/path/to/{name} (or pass `mmverify score --references {name}=/path`); "
        f"expected layout: {SETS[name].expected}"
    )


def configured_root(name: str) -> Path:
    """The folder configured for set ``name``; ``model_unavailable`` when there is none."""
    try:
        roots = parse_references(setting(ENV_VAR))
    except (ValueError, KeyError) as exc:
        raise ScoringError(ErrorCode.MODEL_UNAVAILABLE, f"{ENV_VAR}: {exc}") from None
    if name not in roots:
        raise ScoringError(ErrorCode.MODEL_UNAVAILABLE, f"reference set {name!r} is not configured; {_how_to_configure(name)}")
    return roots[name]


def class_key(label: str) -> str:
    """Class names compared without case or separators: the ESC-50 release writes ``chirping_birds``
    where MMMG's annotations say ``chirping birds``; GTZAN's ``hiphop`` is also ``hip-hop``."""
    return re.sub(r"[^0-9a-z]+", "", label.lower())


class ReferenceSet:
    """One configured folder read with one layout: its class names and, per backend, its index."""

    def __init__(self, name: str, layout: str, root: Path) -> None:
        self.name = name
        self.layout = layout
        self.root = root
        self._lock = threading.Lock()
        self._classes: dict[str, str] | None = None  # class_key -> label as stored
        self._sizes: dict[str, int] = {}
        self._indexes: dict[tuple[str, str, int | None], ReferenceIndex] = {}

    def _unusable(self, exc: BaseException) -> ScoringError:
        return ScoringError(
            ErrorCode.MODEL_UNAVAILABLE,
            f"reference set {self.name!r} at {self.root} is not usable ({exc}); expected layout: {SETS[self.name].expected}",
        )

    def _scan(self) -> dict[str, str]:
        with self._lock:
            if self._classes is None:
                try:
                    files = scan(self.layout, self.root)
                except Exception as exc:  # unreadable, or metadata malformed in any way: the user's folder
                    raise self._unusable(exc) from None
                classes: dict[str, str] = {}
                for ref in files:
                    classes.setdefault(class_key(ref.label), ref.label)
                    self._sizes[ref.label] = self._sizes.get(ref.label, 0) + 1
                self._classes = classes
            return self._classes

    def resolve(self, label: str) -> str:
        """The set's own spelling of class ``label``; ``invalid_instance`` with suggestions if absent."""
        classes = self._scan()
        found = classes.get(class_key(label))
        if found is None:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, str(UnknownIdError(f"{self.name} class", label, sorted(classes.values()))))
        return found

    def size(self, label: str) -> int:
        """Reference rows of a resolved class (clips, or clip windows for windowed layouts)."""
        self._scan()
        return self._sizes[label]

    def index(
        self,
        embedder: ReferenceEmbedder,
        load_rate: int | None = PUBLISHED_LOAD_RATE,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReferenceIndex:
        """The set embedded by ``embedder`` with files decoded at ``load_rate`` first (the published
        22050 Hz; None: straight at the embedder's rate): from memory, else from
        ``<cache dir>/references``, else built."""
        key = (embedder.fingerprint, preprocessing_of(embedder), load_rate)
        with self._lock:
            if key not in self._indexes:
                log.info("indexing reference set %s (%s) at %s with %s", self.name, self.layout, self.root, key)
                try:
                    # items scored together wait on this lock, so they cannot share its batches
                    with outside_round():
                        index = ReferenceIndex.build(
                            self.layout, self.root, embedder, Settings().cache_dir / "references",
                            progress=progress, load_rate=load_rate,
                        )
                except (OSError, ValueError, MediaError) as exc:
                    raise self._unusable(exc) from None
                self._indexes[key] = index
            return self._indexes[key]


_MEMO: dict[tuple[str, str], ReferenceSet] = {}  # (layout, resolved root) -> set
_SPELLED: dict[tuple[str, str], ReferenceSet] = {}  # (layout, root as configured): resolved once, not per item
_MEMO_LOCK = threading.Lock()


def reference_set(name: str, layout: str | None = None) -> ReferenceSet:
    """The configured set ``name`` read with ``layout`` (default: the set's published layout)."""
    if name not in SETS:
        raise UnknownIdError("reference set", name, sorted(SETS))
    layout = layout or SETS[name].layouts[0]
    if layout not in SETS[name].layouts:
        raise ValueError(f"reference set {name!r} is read with layout {' or '.join(SETS[name].layouts)}, not {layout!r}")
    root = configured_root(name)
    absolute = root if root.is_absolute() else Path.cwd() / root  # one reading of the working folder
    spelled = (layout, str(absolute))
    with _MEMO_LOCK:
        known = _SPELLED.get(spelled)
    if known is not None:
        return known
    key = (layout, str(absolute.resolve()))  # links followed: two spellings of one folder share a set
    with _MEMO_LOCK:
        if key not in _MEMO:
            _MEMO[key] = ReferenceSet(name, layout, absolute)
        _SPELLED[spelled] = _MEMO[key]
        return _MEMO[key]


def clear_memo() -> None:
    """Forget every set read in this process (tests; long-lived servers after the files changed, or
    after a configured link was pointed at another folder: a root is resolved once per spelling)."""
    with _MEMO_LOCK:
        _MEMO.clear()
        _SPELLED.clear()
