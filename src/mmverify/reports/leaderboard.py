"""Per-model leaderboard: models x tasks grouped by modality group, group means and the overall mean.

The numbers are those of ``summary.json`` (``by_model`` when the run holds several models, the
top-level breakdown for one model); a summary without ``by_model`` for several models is
completed with :func:`mmverify.pipelines.summary.aggregate`, the function that wrote it, with the
run's seed and error aggregation, so intervals match what ``score`` would have written.
"""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.types import MODALITY_GROUPS
from ..pipelines.summary import aggregate
from ..tasks.catalog import CATALOG
from .rundata import RunData, load_run

OTHER_GROUP = "other"  # tasks the catalog does not know (they stay out of group and overall means)
UNNAMED = "None"  # how ``by_model`` names rows without a model


@dataclass(frozen=True)
class Leaderboard:
    groups: list[tuple[str, list[str]]]  # (group, its tasks in catalog order), groups with tasks only
    models: dict[str, Mapping[str, Any]]  # model -> aggregate() document (tasks, groups, overall)

    def cell(self, model: str, task: str) -> Mapping[str, Any] | None:
        return self.models[model].get("tasks", {}).get(task)

    def group_mean(self, model: str, group: str) -> float | None:
        entry = self.models[model].get("groups", {}).get(group)
        return entry.get("mean") if isinstance(entry, Mapping) else None

    def overall(self, model: str) -> float | None:
        return (self.models[model].get("overall") or {}).get("mean")


def model_label(model: str) -> str:
    return "(no model name)" if model == UNNAMED else model


def model_summaries(data: RunData) -> dict[str, Mapping[str, Any]]:
    """model -> its aggregate document, from the summary where it has one."""
    by_model = data.summary.get("by_model")
    if isinstance(by_model, Mapping) and by_model:
        return {str(name): entry for name, entry in sorted(by_model.items())}
    models = data.models
    if len(models) <= 1 and "tasks" in data.summary:
        return {models[0] if models else UNNAMED: data.summary}
    seed = int((data.summary.get("bootstrap") or {}).get("seed", 0))
    how = str(data.summary.get("aggregate") or "apart")
    return {m: aggregate([r for r in data.rows if str(r.get("model")) == m], seed, how) for m in models}


def task_groups(tasks: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Tasks grouped by modality group in catalog (paper) order; unknown tasks last, sorted."""
    present = set(tasks)
    groups = [(g, [t.id for t in CATALOG.values() if t.group == g and t.id in present]) for g in MODALITY_GROUPS]
    other = sorted(t for t in present if CATALOG.get(t) is None)
    return [(g, members) for g, members in groups + [(OTHER_GROUP, other)] if members]


def build_leaderboard(data: RunData) -> Leaderboard:
    models = model_summaries(data)
    tasks = set(data.summary.get("tasks", {})) | {str(r.get("task")) for r in data.rows}
    for entry in models.values():
        tasks |= set(entry.get("tasks", {}))
    return Leaderboard(groups=task_groups(sorted(tasks)), models=models)


# -- CSV ---------------------------------------------------------------------------------------------


def _num(value: Any) -> str:
    return "" if value is None else f"{float(value):.6f}"


def csv_header(board: Leaderboard) -> list[str]:
    header = ["model", "n", "n_error", "overall"]
    header += [g for g, _ in board.groups if g != OTHER_GROUP]
    for _, tasks in board.groups:
        for task in tasks:
            header += [task, f"{task}:ci_low", f"{task}:ci_high", f"{task}:n", f"{task}:n_error"]
    return header


def csv_row(board: Leaderboard, model: str) -> list[str]:
    entry = board.models[model]
    row = ["" if model == UNNAMED else model, str(entry.get("n", "")), str(entry.get("n_error", "")), _num(board.overall(model))]
    row += [_num(board.group_mean(model, g)) for g, _ in board.groups if g != OTHER_GROUP]
    for _, tasks in board.groups:
        for task in tasks:
            cell = board.cell(model, task) or {}
            ci = cell.get("ci95") or [None, None]
            row += [_num(cell.get("mean")), _num(ci[0]), _num(ci[1]), str(cell.get("n", "")), str(cell.get("n_error", ""))]
    return row


def leaderboard_csv(board: Leaderboard) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(csv_header(board))
    for model in board.models:
        writer.writerow(csv_row(board, model))
    return buffer.getvalue()


def write_leaderboard_csv(run: Path) -> Path:
    """Write ``run/leaderboard.csv`` (one row per model; means, 95% CIs and counts per task)."""
    path = run / "leaderboard.csv"
    path.write_text(leaderboard_csv(build_leaderboard(load_run(run))), encoding="utf-8", errors="replace")
    return path


# -- HTML --------------------------------------------------------------------------------------------


def _best(board: Leaderboard, value_of: Any) -> float | None:
    values = [v for v in (value_of(m) for m in board.models) if v is not None]
    return max(values) if len(values) > 1 else None


def _value_cell(value: float | None, best: float | None, ci: Sequence[float] | None = None, cls: str = "") -> str:
    if value is None:
        return f'<td class="num {cls}">–</td>'
    mark = " best" if best is not None and value == best else ""
    interval = f'<span class="ci">[{ci[0]:.2f}, {ci[1]:.2f}]</span>' if ci else ""
    return f'<td class="num {cls}{mark}">{value * 100:.1f}{interval}</td>'


def _header(board: Leaderboard) -> str:
    top = ['<th rowspan="2">model</th>']
    bottom = []
    for group, tasks in board.groups:
        span = len(tasks) + (0 if group == OTHER_GROUP else 1)
        top.append(f'<th colspan="{span}" class="group">{html.escape(group)}</th>')
        for task in tasks:
            info = CATALOG.get(task)
            title = html.escape(info.name if info else task)
            bottom.append(f'<th class="task" title="{title}"><span>{html.escape(task)}</span></th>')
        if group != OTHER_GROUP:
            bottom.append('<th class="avg">avg</th>')
    top.append('<th rowspan="2" class="avg">overall</th>')
    return f"<thead><tr>{''.join(top)}</tr><tr>{''.join(bottom)}</tr></thead>"


def _model_row(board: Leaderboard, model: str) -> str:
    cells = [f'<th class="model">{html.escape(model_label(model))}</th>']
    for group, tasks in board.groups:
        for task in tasks:
            cell = board.cell(model, task) or {}
            best = _best(board, lambda m, t=task: (board.cell(m, t) or {}).get("mean"))
            cells.append(_value_cell(cell.get("mean"), best, cell.get("ci95")))
        if group != OTHER_GROUP:
            best = _best(board, lambda m, g=group: board.group_mean(m, g))
            cells.append(_value_cell(board.group_mean(model, group), best, cls="avg"))
    cells.append(_value_cell(board.overall(model), _best(board, board.overall), cls="avg"))
    return f"<tr>{''.join(cells)}</tr>"


def leaderboard_html(board: Leaderboard) -> str:
    """The table: scores x 100 with the 95% interval under each task mean; best per column in bold."""
    rows = "".join(_model_row(board, model) for model in board.models)
    return f'<div class="scroll"><table class="leaderboard" id="leaderboard-table">{_header(board)}<tbody>{rows}</tbody></table></div>'
