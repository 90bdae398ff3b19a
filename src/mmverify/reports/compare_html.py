"""One self-contained HTML page for a ``mmverify compare`` result (the dict of
:func:`mmverify.pipelines.compare.compare_runs`).

The page reuses the run report's stylesheet and SVG helpers; every string from the result passes
through :func:`html.escape`, nothing is fetched, and no clock is read, so the same result always
gives the same bytes.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Mapping, Sequence

from .compare_table import fmt_interval, fmt_value
from .figures import ACCENT, BAD, GOOD, INK, MUTED, _f
from .style import STYLE, content_policy

SIGNIFICANT_MARK = "*"
EXTRA_STYLE = """
td.delta.up { color: var(--good); font-weight: 600; }
td.delta.down { color: var(--bad); font-weight: 600; }
tr.overall td { font-weight: 600; border-top: 2px solid var(--line); }
.sig { cursor: help; }
"""
COLUMNS: tuple[str, ...] = ("task", "group", "pairs used", "mean A", "mean B", "Δ", "95% CI", "errors A/B", "unpaired A/B")


def _e(value: Any) -> str:
    return html.escape(str(value))


def delta_interval_svg(delta: float | None, ci: Sequence[float] | None, width: int = 120, height: int = 14, span: float = 1.0) -> str:
    """A difference as a dot on [-span, span] with its 95% interval as a whisker and a tick at 0;
    the whisker is green or red when the interval excludes 0 (values outside the span are clipped)."""

    def x(value: float) -> float:
        clipped = min(max(float(value), -span), span)
        return width * (clipped + span) / (2 * span)

    mid = height / 2
    parts = [
        f'<line x1="0" y1="{mid}" x2="{width}" y2="{mid}" stroke="#e4e7eb" stroke-width="4"/>',
        f'<line x1="{_f(x(0.0))}" y1="0" x2="{_f(x(0.0))}" y2="{height}" stroke="{MUTED}" stroke-width="1"/>',
    ]
    if ci:
        low, high = float(ci[0]), float(ci[1])
        colour = GOOD if low > 0 else BAD if high < 0 else ACCENT
        parts.append(f'<line x1="{_f(x(low))}" y1="{mid}" x2="{_f(x(high))}" y2="{mid}" stroke="{colour}" stroke-width="2"/>')
    if delta is not None:
        parts.append(f'<circle cx="{_f(x(delta))}" cy="{mid}" r="3.5" fill="{INK}"/>')
    label = _e(f"difference {fmt_value(delta, signed=True)}, 95% CI {fmt_interval(ci, signed=True)}, axis from {-span:g} to {span:g}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="ci-bar" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}">{"".join(parts)}</svg>'
    )


def _delta_cell(entry: Mapping[str, Any]) -> str:
    """The difference, with a marker and colour when its interval excludes 0."""
    text = _e(fmt_value(entry.get("delta"), signed=True))
    if not entry.get("significant"):
        return f'<td class="num delta">{text}</td>'
    direction = "up" if float(entry["delta"]) > 0 else "down"
    mark = f'<span class="sig" title="95% CI excludes 0">{SIGNIFICANT_MARK}</span>'
    return f'<td class="num delta {direction}">{text}{mark}</td>'


def _ci_cell(entry: Mapping[str, Any]) -> str:
    ci = entry.get("ci95")
    return f'<td class="num">{_e(fmt_interval(ci, signed=True))}<br>{delta_interval_svg(entry.get("delta"), ci)}</td>'


def _task_row(task: str, entry: Mapping[str, Any]) -> str:
    return (
        f'<tr data-task-row="{_e(task)}"><td>{_e(task)}</td><td>{_e(entry.get("group") or "?")}</td>'
        f'<td class="num">{_e(entry.get("n", 0))}</td><td class="num">{fmt_value(entry.get("mean_a"))}</td>'
        f'<td class="num">{fmt_value(entry.get("mean_b"))}</td>{_delta_cell(entry)}{_ci_cell(entry)}'
        f'<td class="num">{_e(entry.get("n_error_a", 0))}/{_e(entry.get("n_error_b", 0))}</td>'
        f'<td class="num">{_e(entry.get("only_a", 0))}/{_e(entry.get("only_b", 0))}</td></tr>'
    )


def _overall_row(comparison: Mapping[str, Any]) -> str:
    overall, errors, unmatched = comparison["overall"], comparison["errors"], comparison["unmatched"]
    return (
        f'<tr class="overall"><td>overall ({_e(overall.get("tasks", 0))} tasks)</td><td>macro mean</td>'
        f'<td class="num">{_e(overall.get("n", 0))}</td><td class="num">{fmt_value(overall.get("mean_a"))}</td>'
        f'<td class="num">{fmt_value(overall.get("mean_b"))}</td>{_delta_cell(overall)}{_ci_cell(overall)}'
        f'<td class="num">{_e(errors["a"])}/{_e(errors["b"])}</td>'
        f'<td class="num">{_e(unmatched["only_a"])}/{_e(unmatched["only_b"])}</td></tr>'
    )


def _names(values: Sequence[Any]) -> str:
    return ", ".join("(none)" if v is None else str(v) for v in values) or "–"


def _matching_note(comparison: Mapping[str, Any]) -> str:
    unmatched = comparison["unmatched"]
    examples = list(unmatched.get("examples_only_a", [])) + list(unmatched.get("examples_only_b", []))
    text = (
        f"paired on ({', '.join(comparison['match_on'])}); models {_names(comparison['models_a'])} vs "
        f"{_names(comparison['models_b'])}; {comparison['matched']} pairs, {unmatched['only_a']} rows only in "
        f"{comparison['a']}, {unmatched['only_b']} only in {comparison['b']}"
    )
    if examples:
        text += f" (e.g. {'; '.join(str(x) for x in examples[:3])})"
    return f'<p class="muted">{_e(text)}</p>'


def comparison_html(comparison: Mapping[str, Any]) -> str:
    """One comparison (run B against the baseline A): the per-task table and the overall line."""
    title = f"{comparison['b']} − {comparison['a']}"
    head = "".join(f"<th>{_e(c)}</th>" if c in ("task", "group") else f'<th class="num">{_e(c)}</th>' for c in COLUMNS)
    body = "".join(_task_row(task, entry) for task, entry in comparison["tasks"].items())
    return (
        f'<section class="comparison" id="compare-{_e(comparison["b"])}"><h2>{_e(title)}</h2>{_matching_note(comparison)}'
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        f"<tfoot>{_overall_row(comparison)}</tfoot></table></div></section>"
    )


def runs_html(runs: Sequence[Mapping[str, Any]]) -> str:
    """The compared runs: label, folder, results file, rows and models (the first is the baseline)."""
    head = "".join(f"<th>{h}</th>" for h in ("run", "path", "results file", "rows", "duplicates", "models"))
    body = "".join(
        f'<tr><td>{_e(r["label"])}{" (baseline)" if i == 0 else ""}</td><td>{_e(r["path"])}</td>'
        f'<td>{_e(r["source"])}</td><td class="num">{_e(r["rows"])}</td><td class="num">{_e(r["duplicates"])}</td>'
        f'<td>{_e(_names(r["models"]))}</td></tr>'
        for i, r in enumerate(runs)
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<section id="runs"><h2>Runs</h2><div class="scroll">{table}</div></section>'


def settings_html(result: Mapping[str, Any]) -> str:
    """Seed, aggregation of error rows, pairing rule and bootstrap settings."""
    boot = result.get("bootstrap") or {}
    errors = "error rows scored 0 (as_zero)" if result.get("errors") == "as_zero" else "pairs with an error row left out (apart)"
    facts = [
        ("difference", result.get("difference", "")),
        ("seed", boot.get("seed", "–")),
        ("aggregation", errors),
        ("match rule", result.get("match", "–")),
        ("bootstrap", f"{boot.get('method', '–')}; {boot.get('resamples', '–')} resamples; level {boot.get('level', '–')}"),
    ]
    items = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    note = f"{SIGNIFICANT_MARK} = the 95% CI excludes 0; intervals are drawn on [−1, 1] with a tick at 0"
    return f'<section id="settings"><h2>Settings</h2><table>{items}</table><p class="muted">{_e(note)}</p></section>'


def comparison_sections_html(result: Mapping[str, Any]) -> str:
    """The compared runs, the settings and every comparison: the body of the compare page, and
    the comparison part of a run report (``mmverify report RUN --html --compare OTHER``)."""
    return runs_html(result["runs"]) + settings_html(result) + "".join(comparison_html(c) for c in result["comparisons"])


def render_compare_html(result: Mapping[str, Any]) -> str:
    """The whole page as text."""
    runs = " vs ".join(str(r["label"]) for r in result["runs"])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'{content_policy()}<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>mmverify compare — {_e(runs)}</title><style>{STYLE}{EXTRA_STYLE}</style></head>"
        f"<body><header><h1>mmverify compare — {_e(runs)}</h1>"
        f'<div class="config">{_e(result.get("difference", ""))}</div></header>'
        f"<main>{comparison_sections_html(result)}</main>"
        "<footer>Written by mmverify compare.</footer></body></html>\n"
    )


def write_compare_html(result: dict, path: Path) -> Path:
    """Write the comparison page for ``result`` (from ``compare_runs``) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_compare_html(result), encoding="utf-8", errors="replace")
    return path
