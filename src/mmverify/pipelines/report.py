"""Render a summary as Markdown (tables people can paste into a paper or a PR).

Task ids, groups and reasons are user text: every cell goes through :func:`markdown_cell`, so a
``|`` cannot add a column, a newline cannot end the row and ``<script>`` stays text.
"""

from __future__ import annotations

from typing import Any, Mapping

_MARKDOWN_ESCAPES = {
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\", "`": "\\`", "*": "\\*", "[": "\\[",
    "]": "\\]", "\r": " ", "\n": " ",
}  # fmt: skip


def markdown_cell(value: object) -> str:
    """``value`` as text for one Markdown table cell: HTML characters as entities, ``|`` and the
    characters Markdown would format (\\ ` * [ ]) backslash-escaped, line breaks as spaces; ``_`` is
    left alone (GitHub Markdown does not emphasise inside words, and task ids are full of them)."""
    return "".join(_MARKDOWN_ESCAPES.get(char, char) for char in str(value))


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def counted(number: int, noun: str) -> str:
    """``1 error``, ``2 errors``, ``0 errors``."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def render_markdown(summary: Mapping[str, Any], title: str = "mmverify results") -> str:
    lines = [f"# {markdown_cell(title)}", ""]
    overall = summary.get("overall", {})
    lines += [
        f"Overall (macro over tasks): **{_fmt(overall.get('mean'))}** "
        f"— {overall.get('tasks_scored', 0)} of {overall.get('tasks_total', 0)} tasks scored; "
        f"{counted(summary.get('n', 0), 'generation')}, {counted(summary.get('n_error', 0), 'error')}.",
        "",
        "| group | mean | tasks scored |",
        "|---|---:|---:|",
    ]
    for group, entry in summary.get("groups", {}).items():
        lines.append(f"| {markdown_cell(group)} | {_fmt(entry['mean'])} | {entry['tasks_scored']}/{entry['tasks_total']} |")
    lines += [
        "",
        "| task | group | mean | 95% CI | pass rate | n | scored | errors | notes |",
        "|---|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for task, entry in summary.get("tasks", {}).items():
        notes = markdown_cell(", ".join(f"{k}×{v}" for k, v in {**entry.get("errors", {}), **entry.get("reasons", {})}.items()))
        lines.append(
            f"| {markdown_cell(task)} | {markdown_cell(entry.get('group') or '?')} | {_fmt(entry['mean'])} | {_ci(entry.get('ci95'))} | "
            f"{_fmt(entry.get('pass_rate'), 2)} | {entry['n']} | {entry['n_scored']} | {entry['n_error']} | {notes} |"
        )
    boot = summary.get("bootstrap")
    if boot:
        lines += ["", f"CIs: {boot['method']}, {boot['resamples']} resamples, seed {boot['seed']}."]
    return "\n".join(lines) + "\n"
