"""Text rendering tasks: a judge reads the image's text back; scored by WER (CER for Chinese).

Published semantics (``eval_image.py``: ``IOCR``, ``IOCRTwo``, ``IOCRChinese``, ``IOCRGerman``):

* i_ocr -- the judge reads the main text on the annotated ``object`` ("the sign"; the whole image
  when a row has none); score = 1 - min(WER, 1) against ``text``;
* i_ocr_two -- existence gate on the described layout (``object``), then the text on each
  text-bearing object (``text: {object description: its text}``); WER pooled over the objects;
* i_ocr_multi_lingual -- rows of i_ocr_chinese: two *different* judges (roles ``ocr`` and
  ``ocr_second``) read conservatively and only characters both read are kept; score = 1 - min(CER,
  1).  Rows of i_ocr_german: as i_ocr.  The catalog averages the two source files with equal weight.

Text normalisation, by profile:

* ``mmmg`` (as published): lower case, accents removed (NFD, combining marks dropped), the ASCII
  punctuation characters deleted without a space ("e-mail" -> "email", "Don't" -> "dont");
  other characters, typographic quotes included, are kept; an empty text is the word ``<none>``.
  German is compared as written (the instructions ask for "Fuehrt", so "Führt" is a different
  word).  Chinese: only characters of the CJK Unified Ideographs block count; the characters both
  readers saw are kept once each (the published code intersects two character sets), in the first
  reader's order (the published set order was arbitrary, which made a two-character word score 1
  or 0 by chance); the reference is compared as given.
* ``strict``: :func:`~mmverify.verifiers.vlm.ocr.normalize_ocr` (all Unicode punctuation and symbols
  separate words, NFKD); German umlauts and their digraphs are folded together; Chinese readings
  are intersected as multisets (a character read twice by both counts twice) after
  :func:`~mmverify.verifiers.speech.text_metrics.normalize_chinese`.

Whitespace inside a reading always separates words (the published WER kept a lone line break
inside a word, an artefact of its tokeniser).

The judge's list of text pieces (English and German) is read, under ``mmmg``, as the published
``utils.extract_list`` read it: the first ``[...]`` that lies on one line, as JSON, and the empty
list when there is none or it is not JSON (a list spread over several lines reads as nothing);
under ``strict`` it is the JSON list that ends last in the reply, and a reply without one is
``judge_unparseable``.  Chinese readings are read the strict way in both profiles.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ..core.types import Check, Instance
from ..models.base import ModelUnavailable
from ..models.judge_config import shared_model
from ..verifiers.speech.text_metrics import cer
from ..verifiers.vlm.ocr import (  # noqa: F401  (normalize_mmmg_ocr: part of this module's interface)
    NORMALIZATIONS,
    agreed_characters,
    chinese_accuracy,
    has_cjk,
    normalize_mmmg_ocr,
    normalizer,
    word_accuracy,
)
from .base import Task, require_field
from .image_judged import JudgedImageTask, JudgeSession, invalid, judge_reading, text_of, texts_of

EMPTY_TEXT = "<none>"  # what an empty text is compared as (one word; as published)
_CJK_BASIC = re.compile("[\u4e00-\u9fff]")


# -- normalisation and scoring ------------------------------------------------------------------
def cjk_characters(pieces: Sequence[str]) -> str:
    """The characters of the CJK Unified Ideographs block (U+4E00-U+9FFF) in a reading, in order."""
    return "".join(_CJK_BASIC.findall("".join(pieces)))


def common_characters_once(first: str, second: str) -> str:
    """The characters of ``first`` that ``second`` also has, each once, in ``first``'s order."""
    shared = set(second)
    return "".join(ch for ch in dict.fromkeys(first) if ch in shared)


def mmmg_chinese_accuracy(reference: str, agreed: str) -> tuple[float, float]:
    """(``1 - min(CER, 1)``, CER) with the reference as given and ``<none>`` for an empty side."""
    rate = cer(reference.strip() or EMPTY_TEXT, agreed or EMPTY_TEXT, normalize=None)
    return max(0.0, 1.0 - min(rate, 1.0)), rate


def _reference(instance: Instance) -> str:
    """``text`` as a string (a list of lines is joined with spaces)."""
    return " ".join(texts_of(instance, require_field(instance, "text"), "text"))


def _target(instance: Instance) -> str | None:
    """The object whose text is read (``object``), or None to read the whole image."""
    target = instance.data.get("object")
    return None if target is None else text_of(instance, target, "object")


class NormalizationOption(Task):
    """The ``normalization`` a reading is compared under: "mmmg" (published) or "unicode" (strict),
    chosen by the profile and part of ``params()``, with how the judge's list is read
    (``judge_reading``: the published first one-line list under mmmg, the list that ends last under
    strict).  Listed before the task's judged base, so that ``params()`` extends that base's."""

    def __init__(self, normalization: str = "mmmg") -> None:
        normalizer(normalization)  # validates
        self.normalization = normalization

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {"normalization": "unicode" if profile == "strict" else "mmmg"}

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "normalization": self.normalization, "judge_reading": judge_reading(self)}

    def list_reader(self) -> str:
        """How a judge's OCR list is read: the published first one-line ``[...]`` (mmmg) or the
        JSON list that ends last in the reply (strict)."""
        return "first_line_list" if judge_reading(self) == "published" else "end"


class _OcrTask(NormalizationOption, JudgedImageTask):
    """``normalization`` "mmmg" (published) or "unicode" (strict); see the module docstring."""

    def read_text(self, session: JudgeSession, target: str | None, step: str = "ocr") -> list[str]:
        """The judge's reading of the main text on ``target`` (None: anywhere in the image)."""
        if target is None:
            return session.texts("ocr", step=step, role="ocr", reader=self.list_reader())
        return session.texts("ocr_object", step=step, role="ocr", reader=self.list_reader(), target=target)


class Ocr(_OcrTask):
    id = "i_ocr"
    version = 2
    roles = ("ocr",)

    def read(self, instance: Instance) -> tuple[str, str | None]:
        return _reference(instance), _target(instance)

    def judge(self, spec: tuple[str, str | None], session: JudgeSession) -> Check:
        reference, target = spec
        reading = self.read_text(session, target)
        accuracy, rate = word_accuracy([reference], [reading], normalizer(self.normalization))
        return session.check(accuracy, {"wer": rate}, reference=reference, object=target, reading=reading)


class OcrTwo(_OcrTask):
    id = "i_ocr_two"
    version = 2
    roles = ("default", "ocr")

    def read(self, instance: Instance) -> tuple[list[str], list[tuple[str, str]]]:
        raw = require_field(instance, "text")
        if isinstance(raw, Mapping):
            pairs = list(raw.items())
        elif isinstance(raw, list) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in raw):
            pairs = [tuple(p) for p in raw]
        else:
            raise invalid(instance, f"text must map each object to its text, got {raw!r}")
        if not pairs:
            raise invalid(instance, "text names no objects")
        texts = [(text_of(instance, o, "text object"), text_of(instance, t, "text")) for o, t in pairs]
        # the layout description gates the reading; without one, each text-bearing object must exist
        layout = instance.data.get("object")
        gates = texts_of(instance, layout, "object") if layout is not None else [o for o, _ in texts]
        return gates, texts

    def judge(self, spec: tuple[list[str], list[tuple[str, str]]], session: JudgeSession) -> Check:
        gates, texts = spec
        ocr_steps = [f"ocr_{i}" for i in range(len(texts))]
        evidence: dict[str, Any] = {"references": dict(texts)}
        for i, target in enumerate(gates):
            if not session.yes("existence", step=f"exists_{i}", target=target):
                session.skip(*(f"exists_{j}" for j in range(i + 1, len(gates))), *ocr_steps)
                return session.check(0.0, {"exists": 0.0}, **evidence)
        readings = [self.read_text(session, target, step) for step, (target, _) in zip(ocr_steps, texts)]
        accuracy, rate = word_accuracy([t for _, t in texts], readings, normalizer(self.normalization))
        return session.check(accuracy, {"exists": 1.0, "wer": rate}, readings=readings, **evidence)


SECOND_READER_HELP = (
    "Chinese rows of i_ocr_multi_lingual keep only the characters two different judge models both "
    "read, but the ocr_second role resolves to the same model as ocr ({model!r}); configure a distinct "
    "second reader with --vlm-role ocr_second=MODEL[@URL] (or MMVERIFY_VLM_OCR_SECOND_MODEL and "
    "MMVERIFY_VLM_OCR_SECOND_BASE_URL)"
)


def require_distinct_readers(session: JudgeSession) -> None:
    """Refuse before asking anything when both OCR roles resolve to the same model: the
    intersection of one model's reading with itself filters nothing."""
    model = shared_model(session.judge("ocr"), session.judge("ocr_second"))
    if model is not None:
        raise ModelUnavailable("vlm", SECOND_READER_HELP.format(model=model))


class OcrMultiLingual(_OcrTask):
    """The language is the row's ``language`` field when given, else Chinese when the reference has
    CJK characters and German otherwise (inline instances carry no source file to tell them apart)."""

    id = "i_ocr_multi_lingual"
    version = 2
    roles = ("ocr", "ocr_second")
    distinct_roles = roles  # Chinese rows keep what both read (``mmverify doctor`` checks it too)
    distinct_roles_fix = SECOND_READER_HELP

    def read(self, instance: Instance) -> tuple[str, str, str | None]:
        reference = _reference(instance)
        language = instance.data.get("language") or instance.data.get("lang")
        if language is None:
            code = "zh" if has_cjk(reference) else "de"
        else:
            code = text_of(instance, language, "language").lower()
            code = {"chinese": "zh", "zh-cn": "zh", "cmn": "zh", "german": "de", "deutsch": "de"}.get(code, code)
            if code not in ("zh", "de"):
                raise invalid(instance, f"language must be Chinese or German, got {language!r}")
        return code, reference, _target(instance)

    def judge(self, spec: tuple[str, str, str | None], session: JudgeSession) -> Check:
        language, reference, target = spec
        if language == "de":
            return self.judge_german(reference, target, session)
        require_distinct_readers(session)
        first = session.texts("ocr_chinese", step="ocr", role="ocr")
        second = session.texts("ocr_chinese", step="ocr_second", role="ocr_second")
        if self.normalization == "mmmg":
            agreed = common_characters_once(cjk_characters(first), cjk_characters(second))
            accuracy, rate = mmmg_chinese_accuracy(reference, agreed)
        else:
            agreed = agreed_characters(first, second)
            accuracy, rate = chinese_accuracy(reference, agreed)
        return session.check(
            accuracy, {"cer": rate}, language="zh", reference=reference, readings=[first, second], agreed=agreed
        )

    def judge_german(self, reference: str, target: str | None, session: JudgeSession) -> Check:
        reading = self.read_text(session, target)
        normalize = normalizer(self.normalization, fold_umlauts=True)  # folding applies to "unicode" only
        accuracy, rate = word_accuracy([reference], [reading], normalize)
        return session.check(accuracy, {"wer": rate}, language="de", reference=reference, object=target, reading=reading)
