"""Text rendering tasks: a judge reads the image's text back; scored by WER (CER for Chinese).

* i_ocr -- OCR list, normalised; score = 1 - min(WER, 1) against ``text``;
* i_ocr_two -- existence gate on the described layout (``object``), then OCR of each text-bearing
  object (``text: {object description: its text}``); WER pooled over the objects;
* i_ocr_multi_lingual -- rows of i_ocr_chinese: two judges (roles ``ocr`` and ``ocr_second``) read
  conservatively, only characters both read are kept, score = 1 - min(CER, 1); rows of
  i_ocr_german: as i_ocr, with umlauts folded to the digraphs the references use.  The catalog
  averages the two source files with equal weight.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.types import Check, Instance
from ..verifiers.vlm.ocr import agreed_characters, chinese_accuracy, corpus_ocr_accuracy, has_cjk, ocr_accuracy
from .base import require_field
from .image_judged import JudgedImageTask, JudgeSession, invalid, text_of, texts_of


def _reference(instance: Instance) -> str:
    """``text`` as a string (a list of lines is joined with spaces)."""
    return " ".join(texts_of(instance, require_field(instance, "text"), "text"))


class Ocr(JudgedImageTask):
    id = "i_ocr"
    roles = ("ocr",)

    def read(self, instance: Instance) -> str:
        return _reference(instance)

    def judge(self, spec: str, session: JudgeSession) -> Check:
        reading = session.texts("ocr", step="ocr", role="ocr")
        accuracy, rate = ocr_accuracy(spec, reading)
        return session.check(accuracy, {"wer": rate}, reference=spec, reading=reading)


class OcrTwo(JudgedImageTask):
    id = "i_ocr_two"
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
        readings = [
            session.texts("ocr_object", step=step, role="ocr", target=target)
            for step, (target, _) in zip(ocr_steps, texts)
        ]
        accuracy, rate = corpus_ocr_accuracy([t for _, t in texts], readings)
        return session.check(accuracy, {"exists": 1.0, "wer": rate}, readings=readings, **evidence)


class OcrMultiLingual(JudgedImageTask):
    """The language is the row's ``language`` field when given, else Chinese when the reference has
    CJK characters and German otherwise (inline instances carry no source file to tell them apart)."""

    id = "i_ocr_multi_lingual"
    roles = ("ocr", "ocr_second")

    def read(self, instance: Instance) -> tuple[str, str]:
        reference = _reference(instance)
        language = instance.data.get("language") or instance.data.get("lang")
        if language is None:
            return ("zh" if has_cjk(reference) else "de"), reference
        code = text_of(instance, language, "language").lower()
        if code in ("zh", "chinese", "zh-cn", "cmn"):
            return "zh", reference
        if code in ("de", "german", "deutsch"):
            return "de", reference
        raise invalid(instance, f"language must be Chinese or German, got {language!r}")

    def judge(self, spec: tuple[str, str], session: JudgeSession) -> Check:
        language, reference = spec
        if language == "de":
            reading = session.texts("ocr", step="ocr", role="ocr")
            accuracy, rate = ocr_accuracy(reference, reading, fold_umlauts=True)
            return session.check(accuracy, {"wer": rate}, language="de", reference=reference, reading=reading)
        first = session.texts("ocr_chinese", step="ocr", role="ocr")
        second = session.texts("ocr_chinese", step="ocr_second", role="ocr_second")
        agreed = agreed_characters(first, second)
        accuracy, rate = chinese_accuracy(reference, agreed)
        return session.check(
            accuracy, {"cer": rate}, language="zh", reference=reference, readings=[first, second], agreed=agreed
        )
