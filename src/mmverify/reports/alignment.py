"""Word (or character) alignment of a speech task's transcript against the text it should say.

Both sides are normalised the way the speech tasks normalise them before WER/CER, then aligned by
jiwer; the page colours substitutions, deletions and insertions.
"""

from __future__ import annotations

from typing import Any, Mapping

import jiwer

from ..verifiers.speech.text_metrics import normalize_chinese, normalize_english

WORD_TASKS = frozenset({"a_speech_attribute", "a_speech_imitate", "a_speech_retrieve", "a_speech_translate"})
CHAR_TASKS = frozenset({"a_speech_chinese"})


def _ops_of(chunks: Any, reference: list[str], hypothesis: list[str], joiner: str) -> list[dict[str, str]]:
    ops = []
    for chunk in chunks:
        ops.append(
            {
                "op": str(chunk.type),
                "ref": joiner.join(reference[chunk.ref_start_idx : chunk.ref_end_idx]),
                "hyp": joiner.join(hypothesis[chunk.hyp_start_idx : chunk.hyp_end_idx]),
            }
        )
    return ops


def align(reference: str, hypothesis: str, unit: str = "word") -> dict[str, Any]:
    """``{"unit", "ops": [{"op", "ref", "hyp"}], "error_rate"}`` for already normalised texts."""
    joiner = " " if unit == "word" else ""
    ref_units = reference.split() if unit == "word" else [c for c in reference if not c.isspace()]
    hyp_units = hypothesis.split() if unit == "word" else [c for c in hypothesis if not c.isspace()]
    if not ref_units or not hyp_units:
        ops = [{"op": "delete", "ref": joiner.join(ref_units), "hyp": ""}] if ref_units else []
        ops += [{"op": "insert", "ref": "", "hyp": joiner.join(hyp_units)}] if hyp_units else []
        return {"unit": unit, "ops": ops, "error_rate": 1.0 if ref_units else (0.0 if not hyp_units else 1.0)}
    out = jiwer.process_words(" ".join(ref_units), " ".join(hyp_units))
    return {
        "unit": unit,
        "ops": _ops_of(out.alignments[0], out.references[0], out.hypotheses[0], joiner),
        "error_rate": round(float(out.wer), 6),
    }


def transcript_alignment(task: str, instance: Mapping[str, Any] | None, evidence: Mapping[str, Any]) -> dict[str, Any] | None:
    """The alignment for a speech task row whose instance text and transcript are both known."""
    if task not in WORD_TASKS | CHAR_TASKS or instance is None:
        return None
    reference, transcript = instance.get("text"), evidence.get("transcript")
    if not isinstance(reference, str) or not isinstance(transcript, str):
        return None
    if task in CHAR_TASKS:
        return align(normalize_chinese(reference), normalize_chinese(transcript), "char")
    return align(normalize_english(reference), normalize_english(transcript), "word")
