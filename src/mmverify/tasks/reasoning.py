"""Reasoning tasks of the interleaved image-text group (DESIGN §5, "reasoning").

* it_coherence_math -- the text must contain ``<<description>>``; a text-only LLM (role ``llm``)
  decides whether that description is the ground-truth ``pattern``, and a VLM whether the *last*
  image draws it; score = product (binary).  ``image_list`` / ``ref_image_list`` are the puzzle
  shown to the model and are not needed to score.
* it_coherence_code -- the *last* image against the reference: score = DreamSim(last image,
  reference) x [the VLM confirms ``object`` in the last image].  The reference is the instance's
  ``ref_image_list`` image when it has one (the published pipeline's 1024x1024 renderings), else
  the SVG code of the instance (``svg`` field, or the ``<svg>...</svg>`` in the instruction)
  rendered here at 1024x1024 on white by :func:`mmverify.verifiers.image.svg.render_svg`, which
  fetches nothing.  The published rows are of two kinds -- SVG code without ``object``, and HTML
  layouts with ``object`` but no reference -- so a factor whose input the row lacks is left out
  (``components`` shows which were scored); a row with neither is ``invalid_instance``.

Both accept several images (the reply may illustrate its reasoning) and need some text.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.image.svg import PUBLISHED_SIZE, WHITE, SvgError, SvgRendererUnavailable, find_svg, render_svg
from ..verifiers.vlm.coherence_templates import coherence_question
from .base import require_field
from .coherence import CoherenceSession, CoherenceTask, fault
from .image_judged import invalid, text_of
from .media import instance_images


# -- math -------------------------------------------------------------------------------------------
class CoherenceMath(CoherenceTask):
    id = "it_coherence_math"
    binary = True
    several_images = True
    roles = ("llm", "default")

    def read(self, instance: Instance) -> str:
        return text_of(instance, require_field(instance, "pattern"), "pattern")

    def claim(self, spec: str, text: str) -> str:
        match = re.search(r"<<(.*?)>>", text, re.DOTALL)
        # the instruction shows the answer as <<{...}>>; models copy the braces
        written = match.group(1).strip().removeprefix("{").removesuffix("}").strip() if match else ""
        if not written:
            raise fault("missing_pattern", "the text has no <<pattern description>>", text)
        return written

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


class CoherenceCode(CoherenceTask):
    id = "it_coherence_code"
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
        return {**super().params(), "render_size": self.render_size, "background": background}

    def read(self, instance: Instance) -> tuple[str | None, np.ndarray | None, dict[str, Any]]:
        data = instance.data
        target = text_of(instance, data["object"], "object") if data.get("object") is not None else None
        reference, about = self.reference(instance)
        if target is None and reference is None:
            raise invalid(instance, "needs an object to look for, a ref_image_list image or SVG code, and has none")
        return target, reference, about

    def reference(self, instance: Instance) -> tuple[np.ndarray | None, dict[str, Any]]:
        data = instance.data
        refs = data.get("ref_image_list")
        if refs:
            indices = refs if isinstance(refs, list) else [refs]
            return instance_images(instance, indices[:1])[0], {"reference": f"ref_image_list[0] = {indices[0]}"}
        svg = data.get("svg")
        field = "svg"
        if svg is None and isinstance(data.get("instruction"), str):
            svg, field = find_svg(data["instruction"]), "instruction"
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
        return pixels, {"reference": f"svg ({field})", "reference_refused_resources": refused}

    def claim(self, spec: Any, text: str) -> None:
        return None  # the text is the model's code and explanation; only the image is scored

    def judge(self, spec: tuple[str | None, np.ndarray | None, dict[str, Any]], claim: None, session: CoherenceSession) -> Check:
        target, reference, about = spec
        components: dict[str, float] = {}
        evidence: dict[str, Any] = {"object": target, **about}
        if target is not None:
            components["exists"] = float(session.yes("existence", step="object", target=target))
            if not components["exists"]:
                if reference is not None:
                    session.skip("similarity")
                return session.check(0.0, components, **evidence)
        if reference is not None:
            components["similarity"], evidence["backend"] = _similarity(session.image, reference)
        score = float(np.prod(list(components.values())))
        return session.check(score, components, **evidence)


def _similarity(generated: np.ndarray, reference: np.ndarray) -> tuple[float, str]:
    from ..models.hub import get_hub  # late: `mmverify tasks` must not import model code

    backend = get_hub().backend("image_similarity")
    values = list(backend.similarity([(generated, reference)]))
    if len(values) != 1 or not np.isfinite(values[0]):
        raise ScoringError(ErrorCode.INTERNAL, f"image_similarity returned {values!r} for one pair")
    return min(1.0, max(0.0, float(values[0]))), str(getattr(backend, "fingerprint", getattr(backend, "name", "")))
