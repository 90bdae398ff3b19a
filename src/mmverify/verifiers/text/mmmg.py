"""MMMG's speech-transcript constraints (``mmmg:*``) and the parser for their annotations.

Annotations look like ``["keyword_count", "design", "== 2"]``, a list of those, or (conversations) a
mapping from turn index to either.  Every checker normalises the transcript (and any phrase it
compares against) with the same normaliser, then lower-cases and strips it, as the published pipeline
does.

Two matching semantics, chosen per checker:

* ``"published"`` (default, reproduces published scores): keywords are searched as raw substrings of
  the lower-cased transcript *without* lower-casing the keyword, so a keyword with capitals ("NASA",
  "AI") never matches -- an exclusion of it always passes and an inclusion always fails; ``start`` /
  ``end`` are plain prefix / suffix tests (``start "art"`` accepts "artists ..."); words are counted
  as Treebank tokens that are alphanumeric or contain an apostrophe.
* ``"word"`` (corrected): keywords are normalised like the transcript and matched as whole words,
  case-insensitively; ``start`` / ``end`` must end / begin at a word boundary; every token with a
  letter or digit counts as a word.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Callable, Mapping, Sequence

from .base import TextChecker, require_text, require_words
from .normalize import normalize_transcript
from .relations import Relation, parse_relation
from .tokenize import word_tokenize

SEMANTICS = ("published", "word")
Normalizer = Callable[[str], str]


class MmmgChecker(TextChecker):
    """Shared options: ``semantics`` (see module docstring) and ``normalizer``."""

    def __init__(self, *, semantics: str = "published", normalizer: Normalizer | None = None) -> None:
        super().__init__()
        if semantics not in SEMANTICS:
            raise ValueError(f"semantics must be one of {list(SEMANTICS)}, got {semantics!r}")
        if normalizer is not None and not callable(normalizer):
            raise ValueError(f"normalizer must be callable, got {normalizer!r}")
        self.semantics = semantics
        self._normalizer: Normalizer = normalizer or normalize_transcript
        self._options: dict[str, Any] = {"semantics": semantics}
        if normalizer is not None:
            self._options["normalizer"] = getattr(normalizer, "__name__", type(normalizer).__name__)

    def prepare(self, text: str) -> str:
        return self._normalizer(text).lower().strip()

    def prepare_phrase(self, name: str, phrase: Any) -> str:
        prepared = self.prepare(require_text(name, phrase))
        if not prepared:
            raise ValueError(f"{name} {phrase!r} is empty after normalisation")
        return prepared

    def _pattern(self, keyword: str) -> re.Pattern[str]:
        return re.compile(r"(?<!\w)" + re.escape(keyword) + r"(?!\w)")

    def _finish(self, **kwargs: Any) -> None:
        self.kwargs = {**kwargs, **self._options}


class ExactMatch(MmmgChecker):
    """``mmmg:exact_match``: the normalised transcript equals the normalised target text."""

    id = "mmmg:exact_match"

    def __init__(self, *, text: Any, **options: Any) -> None:
        super().__init__(**options)
        self.target = self.prepare_phrase("text", text)
        self._finish(text=text)

    def check(self, text: str) -> bool:
        return self.prepare(text) == self.target

    def describe(self) -> str:
        return f"say exactly {self.target!r}"


class _KeywordSet(MmmgChecker):
    def __init__(self, *, keywords: Any, **options: Any) -> None:
        super().__init__(**options)
        self.keywords = require_words("keywords", keywords)
        if self.semantics == "word":
            self._patterns = [self._pattern(self.prepare_phrase("keyword", k)) for k in self.keywords]
        self._finish(keywords=list(self.keywords))

    def found(self, text: str) -> list[bool]:
        prepared = self.prepare(text)
        if self.semantics == "published":
            return [keyword in prepared for keyword in self.keywords]
        return [bool(p.search(prepared)) for p in self._patterns]


class KeywordInclude(_KeywordSet):
    """``mmmg:keyword_include``: every keyword occurs."""

    id = "mmmg:keyword_include"

    def check(self, text: str) -> bool:
        return all(self.found(text))

    def describe(self) -> str:
        return "include " + ", ".join(repr(k) for k in self.keywords)


class KeywordExclude(_KeywordSet):
    """``mmmg:keyword_exclude``: no keyword occurs."""

    id = "mmmg:keyword_exclude"

    def check(self, text: str) -> bool:
        return not any(self.found(text))

    def describe(self) -> str:
        return "never say " + ", ".join(repr(k) for k in self.keywords)


class KeywordCount(MmmgChecker):
    """``mmmg:keyword_count``: the number of (non-overlapping) occurrences satisfies ``relation``."""

    id = "mmmg:keyword_count"

    def __init__(self, *, keyword: Any, relation: Any, **options: Any) -> None:
        super().__init__(**options)
        self.keyword = require_text("keyword", keyword, strip=False)
        self.relation: Relation = parse_relation(relation)
        if self.semantics == "word":
            self._compiled = self._pattern(self.prepare_phrase("keyword", keyword))
        self._finish(keyword=self.keyword, relation=str(self.relation))

    def count(self, text: str) -> int:
        prepared = self.prepare(text)
        if self.semantics == "published":
            return prepared.count(self.keyword)  # str.count is re.findall(re.escape(k)) without regex
        return len(self._compiled.findall(prepared))

    def check(self, text: str) -> bool:
        return self.relation.holds(self.count(text))

    def describe(self) -> str:
        return f"say {self.keyword!r} a number of times that is {self.relation}"


class LengthWord(MmmgChecker):
    """``mmmg:length_word``: the number of words satisfies ``relation``."""

    id = "mmmg:length_word"

    def __init__(self, *, relation: Any, **options: Any) -> None:
        super().__init__(**options)
        self.relation = parse_relation(relation)
        self._finish(relation=str(self.relation))

    def count(self, text: str) -> int:
        tokens = word_tokenize(self.prepare(text))
        if self.semantics == "published":
            return sum(1 for t in tokens if t.isalnum() or "'" in t)
        return sum(1 for t in tokens if any(c.isalnum() for c in t))

    def check(self, text: str) -> bool:
        return self.relation.holds(self.count(text))

    def describe(self) -> str:
        return f"a word count that is {self.relation}"


class Start(MmmgChecker):
    """``mmmg:start``: the transcript begins with the phrase."""

    id = "mmmg:start"

    def __init__(self, *, phrase: Any, **options: Any) -> None:
        super().__init__(**options)
        self.phrase = self.prepare_phrase("phrase", phrase)
        self._compiled = re.compile(re.escape(self.phrase) + r"(?!\w)")
        self._finish(phrase=phrase)

    def check(self, text: str) -> bool:
        prepared = self.prepare(text)
        if self.semantics == "published":
            return prepared.startswith(self.phrase)
        return bool(self._compiled.match(prepared))

    def describe(self) -> str:
        return f"start with {self.phrase!r}"


class End(MmmgChecker):
    """``mmmg:end``: the transcript ends with the phrase."""

    id = "mmmg:end"

    def __init__(self, *, phrase: Any, **options: Any) -> None:
        super().__init__(**options)
        self.phrase = self.prepare_phrase("phrase", phrase)
        self._compiled = re.compile(r"(?<!\w)" + re.escape(self.phrase) + r"$")
        self._finish(phrase=phrase)

    def check(self, text: str) -> bool:
        prepared = self.prepare(text)
        if self.semantics == "published":
            return prepared.endswith(self.phrase)
        return bool(self._compiled.search(prepared))

    def describe(self) -> str:
        return f"end with {self.phrase!r}"


# --- annotation parsing ------------------------------------------------------------------------------

_KINDS: dict[str, tuple[str, ...]] = {
    "exact_match": ("exact", "exactmatch", "match", "exact_text"),
    "keyword_include": ("include", "includes", "keywords_include", "include_keywords", "keyword_inclusion",
                        "keyword_includes", "contains"),
    "keyword_exclude": ("exclude", "excludes", "keywords_exclude", "exclude_keywords", "keyword_exclusion",
                        "keyword_excludes", "forbidden_words"),
    "keyword_count": ("keywords_count", "keyword_frequency", "count", "keyword_counts"),
    "length_word": ("length_words", "word_length", "word_count", "num_words", "length"),
    "start": ("starts_with", "startswith", "start_with", "begin", "begins_with", "starts"),
    "end": ("ends_with", "endswith", "end_with", "ends"),
}
_CANONICAL = {alias: kind for kind, aliases in _KINDS.items() for alias in (kind, *aliases)}


def canonical_kind(name: Any) -> str:
    """Map a kind spelling (``"Keyword Include"``, ``"mmmg:start"``, ``"starts_with"``) to its canonical name."""
    if not isinstance(name, str):
        raise ValueError(f"constraint kind must be a string, got {name!r}")
    key = re.sub(r"[\s\-]+", "_", name.strip().lower()).removeprefix("mmmg:")
    if key not in _CANONICAL:
        close = difflib.get_close_matches(key, list(_CANONICAL), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(_CANONICAL[c]) for c in close)}?" if close else ""
        raise ValueError(f"unknown MMMG constraint kind {name!r}; known: {sorted(_KINDS)}.{hint}")
    return _CANONICAL[key]


def _flatten(args: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for arg in args:
        out.extend(_flatten(arg) if isinstance(arg, (list, tuple)) else [arg])
    return out


def build_constraint(spec: Sequence[Any], **options: Any) -> MmmgChecker:
    """One ``["kind", args...]`` annotation -> its checker (``ValueError`` on anything unexpected)."""
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence) or not spec:
        raise ValueError(f"a constraint must be a list like ['kind', args...], got {spec!r}")
    kind = canonical_kind(spec[0])
    args = _flatten(spec[1:])

    def expect(n: int) -> None:
        if len(args) != n:
            raise ValueError(f"{kind} takes {n} argument(s), got {len(args)} in {list(spec)!r}")

    if kind == "exact_match":
        expect(1)
        return ExactMatch(text=args[0], **options)
    if kind in ("keyword_include", "keyword_exclude"):
        if not args:
            raise ValueError(f"{kind} needs at least one keyword in {list(spec)!r}")
        cls = KeywordInclude if kind == "keyword_include" else KeywordExclude
        return cls(keywords=args, **options)
    if kind == "keyword_count":
        expect(2)
        return KeywordCount(keyword=args[0], relation=args[1], **options)
    if kind == "length_word":
        expect(1)
        return LengthWord(relation=args[0], **options)
    expect(1)
    return (Start if kind == "start" else End)(phrase=args[0], **options)


def parse_mmmg_constraint(spec: Any, **options: Any) -> list[MmmgChecker]:
    """A ``constraint`` value of a_speech_constraint / a_speech_modify: one constraint or a list."""
    if isinstance(spec, Mapping):
        raise ValueError("per-turn constraints (a mapping) are parsed by parse_mmmg_turn_constraints")
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(s, (list, tuple)) for s in spec):
        return [build_constraint(s, **options) for s in spec]
    return [build_constraint(spec, **options)]


def parse_mmmg_turn_constraints(
    spec: Any, *, n_turns: int | None = None, **options: Any
) -> dict[int, list[MmmgChecker]]:
    """A_consistency_conversation's ``{"<turn index>": constraint(s)}`` -> {turn: checkers}, sorted."""
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(f"per-turn constraints must be a non-empty mapping, got {spec!r}")
    turns: dict[int, list[MmmgChecker]] = {}
    for key, value in spec.items():
        text = str(key).strip()
        if not text.isdigit():
            raise ValueError(f"turn index must be a non-negative integer, got {key!r}")
        turn = int(text)
        if n_turns is not None and turn >= n_turns:
            raise ValueError(f"turn index {turn} is outside the {n_turns} turns of the conversation")
        if turn in turns:
            raise ValueError(f"turn index {turn} appears twice")
        turns[turn] = parse_mmmg_constraint(value, **options)
    return dict(sorted(turns.items()))


def parse_mmmg_annotation(row: Mapping[str, Any], **options: Any) -> list[MmmgChecker] | dict[int, list[MmmgChecker]]:
    """Checkers for an instruction row: a list, or {turn: checkers} when the row has an ``order``."""
    spec = row.get("constraint", row.get("constraints"))
    if spec is None:
        raise ValueError("the instruction has no 'constraint' field")
    if isinstance(spec, Mapping):
        order = row.get("order")
        n_turns = len(order) if isinstance(order, (list, tuple)) else None
        return parse_mmmg_turn_constraints(spec, n_turns=n_turns, **options)
    return parse_mmmg_constraint(spec, **options)
