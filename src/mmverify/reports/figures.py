"""Small hand-written SVG figures: score histograms, interval bars and annotated audio envelopes.

SVG text is written with fixed number formats and no identifiers or timestamps, so the same data
always gives the same bytes.  Every label passes through :func:`html.escape`.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

INK, MUTED, ACCENT, GOOD, BAD = "#1f2933", "#9aa5b1", "#2f6fb2", "#2e8b57", "#c0392b"


def _f(value: float) -> str:
    """Coordinates with one decimal, no negative zero."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def svg_data_uri(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def histogram_counts(scores: Sequence[float], bins: int = 10) -> list[int]:
    """Counts of scores in ``bins`` equal bins over [0, 1]; a score of exactly 1 falls in the last bin."""
    counts = [0] * bins
    for score in scores:
        index = min(max(int(float(score) * bins), 0), bins - 1)
        counts[index] += 1
    return counts


def histogram_svg(scores: Sequence[float], bins: int = 10, width: int = 150, height: int = 44) -> str:
    """Bars of :func:`histogram_counts`, with the bin range and count in each bar's tooltip."""
    counts = histogram_counts(scores, bins)
    top = max(counts) or 1
    plot_h, bar_w = height - 12, width / bins
    bars = []
    for i, count in enumerate(counts):
        h = plot_h * count / top
        tip = f"{i / bins:.1f}–{(i + 1) / bins:.1f}: {count}"
        bars.append(
            f'<rect x="{_f(i * bar_w + 0.5)}" y="{_f(plot_h - h)}" width="{_f(bar_w - 1)}" height="{_f(h)}" '
            f'fill="{ACCENT}"><title>{html.escape(tip)}</title></rect>'
        )
    axis = (
        f'<line x1="0" y1="{plot_h}" x2="{width}" y2="{plot_h}" stroke="{MUTED}"/>'
        f'<text x="0" y="{height - 1}" font-size="9" fill="{MUTED}">0</text>'
        f'<text x="{width}" y="{height - 1}" font-size="9" fill="{MUTED}" text-anchor="end">1</text>'
    )
    label = html.escape(f"score histogram, {len(scores)} scored")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}">{"".join(bars)}{axis}</svg>'
    )


def interval_svg(mean: float | None, ci: Sequence[float] | None, width: int = 120, height: int = 14) -> str:
    """The mean as a dot on [0, 1] with its 95% interval as a whisker."""
    parts = [f'<line x1="0" y1="{height / 2}" x2="{width}" y2="{height / 2}" stroke="#e4e7eb" stroke-width="4"/>']
    if ci:
        x0, x1 = width * float(ci[0]), width * float(ci[1])
        parts.append(f'<line x1="{_f(x0)}" y1="{height / 2}" x2="{_f(x1)}" y2="{height / 2}" stroke="{ACCENT}" stroke-width="2"/>')
    if mean is not None:
        parts.append(f'<circle cx="{_f(width * float(mean))}" cy="{height / 2}" r="3.5" fill="{INK}"/>')
    return f'<svg xmlns="http://www.w3.org/2000/svg" class="ci-bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(parts)}</svg>'


@dataclass
class AudioFigure:
    """An audio clip's peak envelope with what a verifier looked at drawn over it (times in seconds)."""

    duration: float
    envelope: np.ndarray  # peak |amplitude| per column, in [0, 1]
    spans: list[tuple[float, float, str, str]] = field(default_factory=list)  # start, end, label, colour
    ticks: list[tuple[float, str]] = field(default_factory=list)  # time, colour (beats)
    curve: list[tuple[float, float]] = field(default_factory=list)  # (time, value in [0, 1])
    points: list[tuple[float, float]] = field(default_factory=list)  # regression points on the curve
    line: tuple[float, float, float, float] | None = None  # t0, v0, t1, v1 of a fitted line
    caption: str = ""  # shown beside the figure by the page


def peak_envelope(samples: np.ndarray, columns: int) -> np.ndarray:
    """Peak absolute amplitude in ``columns`` equal slices, scaled so the loudest slice is 1."""
    if samples.size == 0:
        return np.zeros(columns)
    edges = np.linspace(0, samples.size, columns + 1).astype(int)
    peaks = np.array([np.abs(samples[a:b]).max() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:])])
    top = float(peaks.max())
    return peaks / top if top > 0 else peaks


def audio_svg(figure: AudioFigure, width: int = 480, height: int = 120) -> str:
    plot_h = height - 18
    mid = plot_h / 2
    scale = width / figure.duration if figure.duration > 0 else 0.0

    def x(t: float) -> str:
        return _f(min(max(t * scale, 0.0), width))

    def y(v: float) -> str:
        return _f(plot_h - 2 - v * (plot_h - 4))

    parts = []
    column_w = width / max(len(figure.envelope), 1)
    for i, peak in enumerate(figure.envelope):
        h = max(float(peak) * (plot_h - 4), 0.5)
        parts.append(f'<rect x="{_f(i * column_w)}" y="{_f(mid - h / 2)}" width="{_f(max(column_w - 0.3, 0.3))}" height="{_f(h)}" fill="{MUTED}"/>')
    labels = []
    for start, end, label, colour in figure.spans:
        parts.append(
            f'<rect x="{x(start)}" y="0" width="{_f(max((end - start) * scale, 1.0))}" height="{plot_h}" '
            f'fill="{colour}" fill-opacity="0.22" stroke="{colour}" stroke-width="1.5"><title>{html.escape(label)}</title></rect>'
        )
        labels.append(
            f'<text x="{x(start)}" y="12" dx="3" font-size="11" font-weight="bold" fill="{colour}" '
            f'stroke="#ffffff" stroke-width="3" paint-order="stroke">{html.escape(label)}</text>'
        )
    for t, colour in figure.ticks:
        parts.append(f'<line x1="{x(t)}" y1="0" x2="{x(t)}" y2="{plot_h}" stroke="{colour}" stroke-width="1"/>')
    if figure.curve:
        path = " ".join(f"{x(t)},{y(v)}" for t, v in figure.curve)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{ACCENT}" stroke-width="1.2"/>')
    for t, v in figure.points:
        parts.append(f'<circle cx="{x(t)}" cy="{y(v)}" r="2.5" fill="{BAD}"/>')
    if figure.line is not None:
        t0, v0, t1, v1 = figure.line
        parts.append(f'<line x1="{x(t0)}" y1="{y(v0)}" x2="{x(t1)}" y2="{y(v1)}" stroke="{BAD}" stroke-width="1.5" stroke-dasharray="4 2"/>')
    parts += labels
    parts.append(f'<text x="0" y="{height - 4}" font-size="10" fill="{INK}">0 s</text>')
    parts.append(f'<text x="{width}" y="{height - 4}" font-size="10" fill="{INK}" text-anchor="end">{figure.duration:.2f} s</text>')
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>{"".join(parts)}</svg>'
    )
