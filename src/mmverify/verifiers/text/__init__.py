"""Text-constraint checkers in the IFEval style, for responses and speech transcripts.

One small checker class per instruction id (IFEval's ids such as ``keywords:existence``, plus MMMG's
``mmmg:keyword_count`` ...), built from validated keyword arguments and answering ``check(text)``.
``evaluate`` scores a text against a list of instructions in IFEval's strict or loose mode and returns
a :class:`~mmverify.core.types.Check`.  Sentence splitting, word tokenisation and language
identification are deterministic re-implementations that need no NLTK data or langdetect profiles.
"""

from .base import TextChecker
from .core import MODES, accuracy_report, evaluate, evaluate_ifeval, follows, response_variants, to_checker
from .language import SUPPORTED_LANGUAGES, detect_language
from .mmmg import (
    build_constraint,
    canonical_kind,
    parse_mmmg_annotation,
    parse_mmmg_constraint,
    parse_mmmg_turn_constraints,
)
from .normalize import normalize_transcript, whisper_normalizer
from .registry import IFEVAL_IDS, MMMG_IDS, TEXT_CHECKERS, build_checker
from .relations import Relation, parse_relation
from .tokenize import count_sentences, count_words, split_sentences, word_tokenize

__all__ = [
    "IFEVAL_IDS",
    "MMMG_IDS",
    "MODES",
    "SUPPORTED_LANGUAGES",
    "TEXT_CHECKERS",
    "Relation",
    "TextChecker",
    "accuracy_report",
    "build_checker",
    "build_constraint",
    "canonical_kind",
    "count_sentences",
    "count_words",
    "detect_language",
    "evaluate",
    "evaluate_ifeval",
    "follows",
    "normalize_transcript",
    "parse_mmmg_annotation",
    "parse_mmmg_constraint",
    "parse_mmmg_turn_constraints",
    "parse_relation",
    "response_variants",
    "split_sentences",
    "to_checker",
    "whisper_normalizer",
    "word_tokenize",
]
