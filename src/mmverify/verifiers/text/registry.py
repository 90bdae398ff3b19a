"""The flat registry of text-constraint ids (IFEval's own ids plus ``mmmg:*``) and ``build_checker``."""

from __future__ import annotations

import inspect
from typing import Any, Mapping

from ...core.registry import Registry
from .base import TextChecker

_PKG = "mmverify.verifiers.text"
_ENTRIES: dict[str, str] = {
    "keywords:existence": "keywords:KeywordExistence",
    "keywords:frequency": "keywords:KeywordFrequency",
    "keywords:forbidden_words": "keywords:ForbiddenWords",
    "keywords:letter_frequency": "keywords:LetterFrequency",
    "language:response_language": "language:ResponseLanguage",
    "length_constraints:number_sentences": "length:NumberOfSentences",
    "length_constraints:number_paragraphs": "length:NumberOfParagraphs",
    "length_constraints:number_words": "length:NumberOfWords",
    "length_constraints:nth_paragraph_first_word": "length:NthParagraphFirstWord",
    "detectable_content:number_placeholders": "format:Placeholders",
    "detectable_content:postscript": "format:Postscript",
    "detectable_format:number_bullet_lists": "format:BulletLists",
    "detectable_format:constrained_response": "format:ConstrainedResponse",
    "detectable_format:number_highlighted_sections": "format:HighlightedSections",
    "detectable_format:multiple_sections": "format:MultipleSections",
    "detectable_format:json_format": "format:JsonFormat",
    "detectable_format:title": "format:Title",
    "combination:two_responses": "startend:TwoResponses",
    "combination:repeat_prompt": "startend:RepeatPrompt",
    "startend:end_checker": "startend:EndPhrase",
    "startend:quotation": "startend:Quotation",
    "change_case:capital_word_frequency": "case:CapitalWordFrequency",
    "change_case:english_capital": "case:EnglishCapital",
    "change_case:english_lowercase": "case:EnglishLowercase",
    "punctuation:no_comma": "startend:NoComma",
    "mmmg:exact_match": "mmmg:ExactMatch",
    "mmmg:keyword_include": "mmmg:KeywordInclude",
    "mmmg:keyword_exclude": "mmmg:KeywordExclude",
    "mmmg:keyword_count": "mmmg:KeywordCount",
    "mmmg:length_word": "mmmg:LengthWord",
    "mmmg:start": "mmmg:Start",
    "mmmg:end": "mmmg:End",
}

TEXT_CHECKERS: Registry[type[TextChecker]] = Registry("text constraint")
for _id, _target in _ENTRIES.items():
    TEXT_CHECKERS.register(_id, f"{_PKG}.{_target}")

IFEVAL_IDS: tuple[str, ...] = tuple(i for i in _ENTRIES if not i.startswith("mmmg:"))
MMMG_IDS: tuple[str, ...] = tuple(i for i in _ENTRIES if i.startswith("mmmg:"))


def _parameters(cls: type) -> tuple[set[str], set[str]]:
    """(accepted, required) keyword names of ``cls``'s constructor, following ``**options`` upwards."""
    accepted: set[str] = set()
    required: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        for p in params:
            if p.kind is p.KEYWORD_ONLY:
                accepted.add(p.name)
                if p.default is p.empty:
                    required.add(p.name)
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return accepted, required


def build_checker(instruction_id: str, kwargs: Mapping[str, Any] | None = None) -> TextChecker:
    """Build the checker registered as ``instruction_id`` from ``kwargs``.

    ``None`` values are dropped first (IFEval's published data lists every argument name, with null
    for the unused ones).  Unknown ids raise ``UnknownIdError`` (a ``KeyError`` with suggestions);
    unknown, missing or invalid arguments raise ``ValueError``.
    """
    cls = TEXT_CHECKERS.get(instruction_id)
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ValueError(f"kwargs for {instruction_id!r} must be a mapping, got {kwargs!r}")
    args = {k: v for k, v in (kwargs or {}).items() if v is not None}
    accepted, required = _parameters(cls)
    unknown = sorted(set(args) - accepted)
    if unknown:
        raise ValueError(f"{instruction_id}: unknown argument(s) {unknown}; accepted: {sorted(accepted)}")
    missing = sorted(required - set(args))
    if missing:
        raise ValueError(f"{instruction_id}: missing required argument(s) {missing}")
    return cls(**args)
