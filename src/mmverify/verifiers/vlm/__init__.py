"""Questions for vision-language judges, strict parsing of their replies, and OCR scoring.

* :mod:`.templates` -- the hand-written question templates (versioned) and answer keys;
* :mod:`.parse` -- verdicts read from the end of a reply, or ``judge_unparseable``;
* :mod:`.published` -- the published evaluator's own readers (first ``Answer:`` letter, first
  character, first one-line list), used by the ``mmmg`` profile where a verdict depends on them;
* :mod:`.record` -- ask a judge, parse, and keep question, reply and verdict for the evidence;
* :mod:`.ocr` -- normalisation and WER/CER scoring of OCR readings.

No model is loaded here: the judge is passed in by the caller.
"""

from .ocr import agreed_characters, chinese_accuracy, corpus_ocr_accuracy, normalize_ocr, ocr_accuracy
from .parse import parse_choice, parse_text_list, parse_yes_no
from .record import JudgeRecord, Verdict, read_reply
from .templates import (
    COUNT_OPTIONS,
    QUADRANT_OPTIONS,
    TEMPLATE_VERSION,
    TEMPLATES,
    Question,
    Template,
    count_letter,
    quadrant_letter,
    question,
    relative_key,
)

__all__ = [
    "COUNT_OPTIONS",
    "QUADRANT_OPTIONS",
    "TEMPLATES",
    "TEMPLATE_VERSION",
    "JudgeRecord",
    "Question",
    "Template",
    "Verdict",
    "agreed_characters",
    "chinese_accuracy",
    "corpus_ocr_accuracy",
    "count_letter",
    "normalize_ocr",
    "ocr_accuracy",
    "parse_choice",
    "parse_text_list",
    "parse_yes_no",
    "quadrant_letter",
    "question",
    "read_reply",
    "relative_key",
]
