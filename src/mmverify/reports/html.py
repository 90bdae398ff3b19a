"""One self-contained HTML page for a score run: overview, leaderboard, item browser, errors.

Static parts are rendered here with every string from the run passed through :func:`html.escape`;
the items travel as one JSON blob (``<`` ``>`` ``&`` escaped, so no value can close the script
element) that :mod:`.script` renders.  Nothing is fetched: images, audio and plots are data URIs.
The same run gives the same bytes: keys are sorted and no clock is read.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..tasks.catalog import CATALOG
from .compare_html import EXTRA_STYLE as COMPARE_STYLE, comparison_sections_html
from .figures import histogram_svg, interval_svg
from .items import clip_text, item_records
from .leaderboard import build_leaderboard, leaderboard_html
from .rundata import RunData, load_run
from .script import SCRIPT
from .style import STYLE, content_policy
from .usage import usage_html

DEFAULT_MAX_MEDIA = 200
FIRST_MESSAGES = 5
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None (JSON.parse accepts neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def script_json(value: Any) -> str:
    """JSON that is safe inside ``<script>``: sorted keys, and no ``<``, ``>``, ``&`` or line separators."""
    text = json.dumps(_finite(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in _JSON_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def _e(value: Any) -> str:
    return html.escape(str(value))


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{float(value):.{digits}f}"


# -- header ------------------------------------------------------------------------------------------


def header_html(data: RunData, extra_links: Sequence[tuple[str, str]] = ()) -> str:
    """Title, headline numbers, the run's settings and the page's navigation (``extra_links``:
    (anchor, label) of optional sections, placed after the overview)."""
    summary = data.summary
    overall = summary.get("overall") or {}
    config = summary.get("config") or {}
    facts = [
        ("profile", config.get("profile") or ", ".join(summary.get("profiles") or []) or "–"),
        ("errors in means", summary.get("aggregate") or config.get("aggregate") or "apart"),
        ("manifest", config.get("manifest") or "–"),
        ("instructions", config.get("instructions") or "–"),
        ("mmverify", summary.get("package_version") or "–"),
        ("started", summary.get("started") or "–"),
        ("finished", summary.get("finished") or "–"),
    ]
    config_line = " · ".join(f"{_e(k)}: {_e(v)}" for k, v in facts)
    links = "".join(f'<a href="#{_e(anchor)}">{_e(label)}</a>' for anchor, label in extra_links)
    return (
        f"<header><h1>mmverify report — {_e(data.run.name)}</h1>"
        f'<div class="headline">overall (macro mean over tasks) <strong id="overall">{_fmt(overall.get("mean"))}</strong> · '
        f'{_e(overall.get("tasks_scored", 0))} of {_e(overall.get("tasks_total", 0))} tasks scored · '
        f'<span id="n-rows">{len(data.rows)}</span> generations · errors: {_e(summary.get("n_error", 0))}</div>'
        f'<div class="config">{config_line}</div>'
        f'<nav><a href="#overview">Overview</a>{links}'
        '<a href="#leaderboard">Leaderboard</a><a href="#items">Items</a><a href="#errors">Errors</a></nav></header>'
    )


# -- overview ----------------------------------------------------------------------------------------


def _group_cards(summary: Mapping[str, Any]) -> str:
    cards = []
    for group, entry in (summary.get("groups") or {}).items():
        cards.append(
            f'<div class="group-card"><div class="muted">{_e(group)}</div><div class="value">{_fmt(entry.get("mean"))}</div>'
            f'<div class="muted">{_e(entry.get("tasks_scored", 0))}/{_e(entry.get("tasks_total", 0))} tasks</div></div>'
        )
    return f'<div class="groups">{"".join(cards)}</div>'


def _notes(entry: Mapping[str, Any]) -> str:
    notes = [f"error {k} ×{v}" for k, v in (entry.get("errors") or {}).items()]
    notes += [f"{k} ×{v}" for k, v in (entry.get("reasons") or {}).items()]
    return _e(", ".join(notes))


def _task_row(task: str, entry: Mapping[str, Any], scores: Sequence[float]) -> str:
    info = CATALOG.get(task)
    ci = entry.get("ci95")
    ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "–"
    return (
        f'<tr data-task-row="{_e(task)}"><td><a href="#items" data-task="{_e(task)}">{_e(task)}</a>'
        f'<div class="muted">{_e(info.name if info else "")}</div></td>'
        f'<td>{_e(entry.get("group") or "?")}</td><td class="num">{_fmt(entry.get("mean"))}</td>'
        f'<td class="num">{ci_text}<br>{interval_svg(entry.get("mean"), ci)}</td>'
        f'<td class="num">{_fmt(entry.get("pass_rate"), 2)}</td><td class="num">{_e(entry.get("n", 0))}</td>'
        f'<td class="num">{_e(entry.get("n_scored", 0))}</td><td class="num">{_e(entry.get("n_error", 0))}</td>'
        f'<td class="notes">{_notes(entry)}</td><td>{histogram_svg(scores)}</td></tr>'
    )


def overview_html(data: RunData, task_order: Sequence[str]) -> str:
    scores: dict[str, list[float]] = defaultdict(list)
    for row in data.rows:
        if row.get("status") == "scored" and isinstance(row.get("score"), (int, float)):
            scores[str(row.get("task"))].append(float(row["score"]))
    tasks = data.summary.get("tasks") or {}
    body = "".join(_task_row(t, tasks[t], scores.get(t, [])) for t in task_order if t in tasks)
    head = "".join(f"<th>{h}</th>" for h in ("task", "group", "mean", "95% CI", "pass rate", "n", "scored", "errors", "reasons / errors", "scores"))
    return (
        f'<section id="overview"><h2>Overview</h2>{_group_cards(data.summary)}'
        f'<div class="scroll"><table id="task-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
        f"{_bootstrap_note(data.summary)}</section>"
    )


def _bootstrap_note(summary: Mapping[str, Any]) -> str:
    boot = summary.get("bootstrap")
    if not isinstance(boot, Mapping):
        return ""
    return f'<p class="muted">95% CIs: {_e(boot.get("method"))}, {_e(boot.get("resamples"))} resamples, seed {_e(boot.get("seed"))}.</p>'


# -- errors ------------------------------------------------------------------------------------------


def _code_block(code: str, rows: Sequence[Mapping[str, Any]]) -> str:
    tasks = Counter(str(r.get("task")) for r in rows)
    task_text = ", ".join(f"{t} ×{n}" for t, n in sorted(tasks.items()))
    items = []
    for row in rows[:FIRST_MESSAGES]:
        message = clip_text(str((row.get("error") or {}).get("message", "")), 400)
        items.append(f"<li><code>{_e(row.get('instance_id'))}</code> ({_e(row.get('task'))}): {_e(message)}</li>")
    more = f'<p class="muted">… and {len(rows) - FIRST_MESSAGES} more</p>' if len(rows) > FIRST_MESSAGES else ""
    return (
        f'<div class="errors-code" data-error-code="{_e(code)}"><code>{_e(code)}</code> — rows: {len(rows)} '
        f'<span class="muted">({_e(task_text)})</span><ul>{"".join(items)}</ul>{more}</div>'
    )


def errors_html(rows: Sequence[Mapping[str, Any]]) -> str:
    by_code: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("status") == "error":
            by_code[str((row.get("error") or {}).get("code", "unknown"))].append(row)
    reasons = Counter(str(r["reason"]) for r in rows if r.get("status") == "scored" and isinstance(r.get("reason"), str))
    blocks = "".join(_code_block(code, by_code[code]) for code in sorted(by_code)) or "<p>No error rows.</p>"
    reason_rows = "".join(f'<tr><td><code>{_e(k)}</code></td><td class="num">{v}</td></tr>' for k, v in sorted(reasons.items()))
    reason_table = (
        f"<h4>generations scored 0 for breaking the task's rules</h4><table><tr><th>reason</th><th>rows</th></tr>{reason_rows}</table>"
        if reasons
        else ""
    )
    return f'<section id="errors"><h2>Errors</h2><p class="muted">Scorer or input problems, kept out of the means.</p>{blocks}{reason_table}</section>'


# -- items -------------------------------------------------------------------------------------------


def items_html(records: Sequence[Mapping[str, Any]], media: Sequence[str], max_media: int) -> str:
    status = "".join(
        f'<option value="{v}">{t}</option>'
        for v, t in (("", "any"), ("scored", "scored"), ("error", "error"), ("passed", "passed"), ("failed", "failed"), ("reason", "scored 0 with a reason"))
    )
    order = "".join(f'<option value="{v}">{t}</option>' for v, t in (("line", "manifest order"), ("worst", "worst first"), ("best", "best first")))
    head = "".join(f"<th>{h}</th>" for h in ("line", "task", "model", "instance", "score", "pass", "reason / error", "media"))
    controls = (
        '<div class="controls">'
        '<label>task<select id="f-task"><option value="">all</option></select></label>'
        '<label id="f-model-label">model<select id="f-model"><option value="">all</option></select></label>'
        f'<label>status<select id="f-status">{status}</select></label>'
        '<label>score ≥<input id="f-min" type="number" min="0" max="1" step="0.05"></label>'
        '<label>score ≤<input id="f-max" type="number" min="0" max="1" step="0.05"></label>'
        f'<label>order<select id="f-order">{order}</select></label>'
        '<label>show first N<input id="f-limit" type="number" min="0" step="1" placeholder="all"></label></div>'
    )
    return (
        f'<section id="items"><h2>Items</h2><p class="muted">Click a row for its instruction, media with the checked regions, '
        f"judge questions and replies, components and evidence. Media are embedded for up to {max_media} items per task "
        f'(lowest and highest scores first).</p>{controls}'
        '<div class="pager"><button id="prev" type="button">‹ prev</button><span id="page-info"></span>'
        '<button id="next" type="button">next ›</button><span id="item-count" class="muted"></span></div>'
        f'<div class="scroll"><table id="items-table"><thead><tr>{head}</tr></thead><tbody id="item-rows"></tbody></table></div>'
        f'<script type="application/json" id="items-data">{script_json({"items": list(records), "media": list(media)})}</script></section>'
    )


# -- page --------------------------------------------------------------------------------------------


def comparison_html(result: Mapping[str, Any]) -> str:
    """The comparison with other runs (a :func:`~mmverify.pipelines.compare.compare_runs` result
    whose baseline is this run), as ``mmverify compare --html`` shows it."""
    others = ", ".join(str(r["label"]) for r in result["runs"][1:])
    note = f"Each other run ({others}) minus this run (A, the baseline), paired by generation, as `mmverify compare` computes it."
    return f'<section id="compare"><h2>Comparison</h2><p class="muted">{_e(note)}</p></section>{comparison_sections_html(result)}'


def render_html(data: RunData, max_media: int = DEFAULT_MAX_MEDIA, comparison: Mapping[str, Any] | None = None) -> str:
    """The whole page; ``comparison`` adds the differences to other runs (see :func:`compare_with`)."""
    board = build_leaderboard(data)
    task_order = [task for _, tasks in board.groups for task in tasks]
    records, media = item_records(data, max_media)
    leaderboard = (
        '<section id="leaderboard"><h2>Leaderboard</h2><p class="muted">Scores × 100 per model, tasks grouped by '
        "modality group with the group macro means and the overall macro mean over tasks; the 95% interval "
        f"is under each task mean; the best value of a column is in bold.</p>{leaderboard_html(board)}</section>"
    )
    judges = usage_html(data.summary)
    compared = comparison_html(comparison) if comparison else ""
    links = [link for link, shown in ((("judges", "Judges"), judges), (("compare", "Comparison"), compared)) if shown]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'{content_policy(SCRIPT)}<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>mmverify report — {_e(data.run.name)}</title><style>{STYLE}{COMPARE_STYLE if compared else ''}</style></head>"
        f"<body>{header_html(data, links)}<main>{overview_html(data, task_order)}{judges}{compared}{leaderboard}"
        f"{items_html(records, media, max_media)}{errors_html(data.rows)}</main>"
        f'<footer>Written by mmverify {_e(data.summary.get("package_version") or "")} from '
        f"{_e(data.run.name)}/summary.json and results.latest.jsonl.</footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def compare_with(run: Path, others: Sequence[Path], summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``mmverify compare run *others`` for the run's report: error rows treated as the run's
    summary treats them, with its bootstrap seed (``ValueError`` when a run is unusable)."""
    from ..pipelines.compare import compare_runs

    if summary is None:
        summary = load_run(run).summary
    boot = summary.get("bootstrap")
    seed = boot.get("seed") if isinstance(boot, Mapping) and isinstance(boot.get("seed"), int) else 0
    return compare_runs([run, *others], seed=seed, errors_as_zero=summary.get("aggregate") == "as_zero")


def write_html_report(
    run: Path, out: Path | None = None, max_media: int = DEFAULT_MAX_MEDIA, compare: Sequence[Path] = (),
    comparison: Mapping[str, Any] | None = None, media_root: Path | None = None,
) -> Path:
    """Write the self-contained report of ``run`` to ``out`` (default ``run/report.html``), with the
    differences to the runs in ``compare`` (or an already computed ``comparison``) when given.
    Media are embedded from under ``media_root`` (default: the run's data root, else its manifest's folder)."""
    if max_media < 0:
        raise ValueError("max_media must be >= 0")
    path = out if out is not None else run / "report.html"
    data = load_run(run)
    if media_root is not None:
        data = dataclasses.replace(data, data_root=media_root)
    if comparison is None and compare:
        comparison = compare_with(run, compare, data.summary)
    text = render_html(data, max_media, comparison)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="replace")  # a lone surrogate from a manifest becomes "?"
    return path
