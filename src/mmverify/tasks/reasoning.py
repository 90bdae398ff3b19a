"""Reasoning tasks of the interleaved image-text group (DESIGN §5, "reasoning").  Published rules:
``eval_interleaved.py`` (``ITCoherenceMath``, ``ITCoherenceCode``) at d341665a.

* it_coherence_math -- the text must contain ``<<description>>``; a text-only LLM (role ``llm``)
  decides whether that description is the ground-truth ``pattern``, and a VLM whether the *last*
  image draws it (one pattern, no question mark left); score = product (binary).  ``mmmg`` reads
  the description as the published pattern does (on one line); ``strict`` also reads one that
  spans lines.  ``image_list`` / ``ref_image_list`` are the puzzle shown to the model and are not
  needed to score.
* it_coherence_code -- the *last* image: score = [the judge accepts it] x DreamSim(last image,
  reference).  The judgement is an existence question on the description (``caption``, or
  ``object`` in the published 20-row file), or -- for rows with ``criteria`` -- a criteria question
  whose reply ends with ``VERDICT: PASS`` / ``VERDICT: FAIL`` (more than half of the criteria must
  hold).  The reference is the row's ``ref_image_list`` image (the published 1024x1024 renderings);
  rows without one fall back to the SVG code of the row (``svg`` field, or the ``<svg>...</svg>`` in
  the instruction) rendered here at 1024x1024 on white by
  :func:`mmverify.verifiers.image.svg.render_svg`, which fetches nothing; a row with a reference and
  no description is scored by DreamSim alone; a row with neither is ``invalid_instance``.
  ``components`` shows which factors were scored.  Same rules in both profiles.

Both accept several images (the reply may illustrate its reasoning).  ``strict`` requires some text;
``mmmg`` judges an image-only reply, whose published shape check passes (math then fails at its
missing ``<<description>>``; code is judged on its image).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.image.svg import PUBLISHED_SIZE, WHITE, SvgError, SvgRendererUnavailable, find_svg, render_svg
from ..verifiers.vlm.coherence_templates import coherence_question
from ..verifiers.vlm.templates import CODE_TEMPLATE_KEY, code_criteria_question
from . import models
from .base import require_field
from .coherence_frame import MAX_SEARCHED_TEXT, CoherenceSession, CoherenceTask, fault
from .image_judged import invalid, text_of, texts_of
from .media import instance_images


# -- math -------------------------------------------------------------------------------------------
def first_between_marks(text: str, multiline: bool) -> str | None:
    """What ``re.search(r"<<(.*?)>>", text)`` captures (``re.DOTALL`` when ``multiline``), found in
    linear time: the expression scans from every ``<<`` to the end when no ``>>`` follows it."""
    start, end = text.find("<<"), -1
    while start >= 0:
        if end < start + 2:  # else the first ">>" after the last start is also the first after this one
            end = text.find(">>", start + 2)
            if end < 0:  # nothing closes this "<<", nor any after it
                return None
        newline = -1 if multiline else text.find("\n", start + 2, end)
        if newline < 0:
            return text[start + 2 : end]
        start = text.find("<<", newline + 1)  # no later "<<" on this line closes before its end either
    return None


def parse_pattern(text: str, multiline: bool) -> str:
    """The first ``<<description>>`` (within one line unless ``multiline``), without the braces the
    instruction's ``<<{...}>>`` template invites; GenerationFault when there is none or it is empty."""
    found = first_between_marks(text[:MAX_SEARCHED_TEXT], multiline)
    written = found.strip().removeprefix("{").removesuffix("}").strip() if found is not None else ""
    if not written:
        raise fault("missing_pattern", "the text has no <<pattern description>>", text)
    return written


class CoherenceMath(CoherenceTask):
    id = "it_coherence_math"
    version = 2
    binary = True
    several_images = True
    roles = ("llm", "default")

    def read(self, instance: Instance) -> str:
        return text_of(instance, require_field(instance, "pattern"), "pattern")

    def claim(self, spec: str, text: str) -> str:
        return parse_pattern(text, multiline=self.strict)

    def judge(self, spec: str, claim: str, session: CoherenceSession) -> Check:
        text_ok = session.ask_question(
            coherence_question("pattern_text", truth=spec, candidate=claim), step="text", role="llm", with_image=False
        )
        if not text_ok:
            session.skip("image")
            return session.check(0.0, {"text_match": 0.0}, pattern=spec, described=claim)
        image_ok = session.ask_question(coherence_question("pattern_image", truth=spec), step="image")
        score = float(bool(image_ok))
        return session.check(score, {"text_match": 1.0, "image_match": score}, pattern=spec, described=claim)


# -- code -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _rendered(svg: str, size: int, background: tuple[int, int, int] | None) -> tuple[np.ndarray, int]:
    """Reference renderings, shared by the samples of one instruction (pixels are read-only)."""
    result = render_svg(svg, width=size, height=size, background=background)
    pixels = result.pixels
    pixels.setflags(write=False)
    return pixels, len(result.refused)


@dataclass(frozen=True)
class CodeSpec:
    description: str | None  # ``caption`` or ``object``
    criteria: tuple[str, ...]  # empty: an existence question on the description
    reference: np.ndarray | None = field(compare=False)
    about: Mapping[str, Any] = field(compare=False)


class CoherenceCode(CoherenceTask):
    id = "it_coherence_code"
    version = 3  # 3: media indices as written, nothing coerced
    several_images = True

    def __init__(self, render_size: int = PUBLISHED_SIZE, background: tuple[int, int, int] | None = WHITE) -> None:
        if isinstance(render_size, bool) or not isinstance(render_size, int) or not 16 <= render_size <= 4096:
            raise ValueError(f"render_size must be an integer in [16, 4096], got {render_size!r}")
        if background is not None and (len(background) != 3 or not all(0 <= int(c) <= 255 for c in background)):
            raise ValueError(f"background must be an RGB triple or None, got {background!r}")
        self.render_size = render_size
        self.background = None if background is None else (int(background[0]), int(background[1]), int(background[2]))

    def params(self) -> Mapping[str, Any]:
        background = None if self.background is None else list(self.background)
        return {
            **super().params(),
            "code_templates": CODE_TEMPLATE_KEY,
            "render_size": self.render_size,
            "background": background,
        }

    def read(self, instance: Instance) -> CodeSpec:
        data = instance.data
        raw = next((data[name] for name in ("caption", "object") if data.get(name) is not None), None)
        description = None if raw is None else text_of(instance, raw, "caption")
        criteria: tuple[str, ...] = ()
        if data.get("criteria") is not None:
            if description is None:
                raise invalid(instance, "has criteria but no caption (or object) describing the figure")
            if not isinstance(data["criteria"], list):
                raise invalid(instance, f"criteria must be a list of strings, got {data['criteria']!r}")
            criteria = tuple(texts_of(instance, data["criteria"], "criteria"))
        reference, about = self.reference(instance)
        if description is None and reference is None:
            raise invalid(instance, "needs a caption (or object) to judge, a ref_image_list image or SVG code, and has none")
        return CodeSpec(description, criteria, reference, about)

    def reference(self, instance: Instance) -> tuple[np.ndarray | None, dict[str, Any]]:
        data = instance.data
        refs = data.get("ref_image_list")
        if refs:
            indices = refs if isinstance(refs, list) else [refs]
            return instance_images(instance, indices[:1])[0], {"reference": f"ref_image_list[0] = {indices[0]}"}
        svg = data.get("svg")
        source = "svg"
        if svg is None and isinstance(data.get("instruction"), str):
            svg, source = find_svg(data["instruction"]), "instruction"
        if svg is None:
            return None, {"reference": None}
        if not isinstance(svg, str):
            raise invalid(instance, f"svg must be a string, got {type(svg).__name__}")
        try:
            pixels, refused = _rendered(svg, self.render_size, self.background)
        except SvgError as exc:
            raise invalid(instance, f"the reference SVG cannot be rendered ({exc.reason}: {exc.message})") from None
        except SvgRendererUnavailable as exc:
            from ..models.base import ModelUnavailable

            raise ModelUnavailable("svg-renderer", str(exc)) from None
        return pixels, {"reference": f"svg ({source})", "reference_refused_resources": refused}

    def claim(self, spec: Any, text: str) -> None:
        return None  # the text is the model's code and explanation; only the image is scored

    def accepted(self, spec: CodeSpec, session: CoherenceSession) -> tuple[str, bool] | None:
        """(component, verdict) of the judge's look at the last image; None for rows with no description."""
        if spec.description is None:
            return None
        if spec.criteria:
            question = code_criteria_question(spec.description, spec.criteria)
            return "criteria", bool(session.ask_question(question, step="criteria"))
        return "exists", session.yes("existence", step="object", target=spec.description)

    def judge(self, spec: CodeSpec, claim: None, session: CoherenceSession) -> Check:
        components: dict[str, float] = {}
        evidence: dict[str, Any] = {"caption": spec.description, **spec.about}
        if spec.criteria:
            evidence["criteria"] = list(spec.criteria)
        judged = self.accepted(spec, session)
        if judged is not None:
            components[judged[0]] = float(judged[1])
            if not judged[1]:
                if spec.reference is not None:
                    session.skip("similarity")
                return session.check(0.0, components, **evidence)
        if spec.reference is not None:
            components["similarity"], evidence["backend"] = _similarity(session.image, spec.reference)
        score = float(np.prod(list(components.values())))
        return session.check(score, components, **evidence)


def _similarity(generated: np.ndarray, reference: np.ndarray) -> tuple[float, str]:

    backend = models.backend("image_similarity")
    values = list(backend.similarity([(generated, reference)]))
    if len(values) != 1 or not np.isfinite(values[0]):
        raise ScoringError(ErrorCode.INTERNAL, f"image_similarity returned {values!r} for one pair")
    return min(1.0, max(0.0, float(values[0]))), str(getattr(backend, "fingerprint", getattr(backend, "name", "")))
