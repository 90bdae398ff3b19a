"""A run's judge usage (``summary.json``'s ``judge_usage``) for people: one set of rows rendered
as an HTML section, a Markdown table and a terminal table, so the three never disagree.

Token sums are shown only where servers reported them: ``–`` is unknown (no reply carried a
``usage`` object), and a partial count says over how many of the replies it runs.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any, Mapping

HEADERS: tuple[str, ...] = ("judge", "roles", "requests", "cache hits", "retries", "failures", "prompt tokens", "completion tokens")


def _tokens(counts: Mapping[str, Any], name: str) -> str:
    value, reported, replies = counts.get(name), int(counts.get("tokens_reported_replies") or 0), int(counts.get("replies") or 0)
    if value is None or not reported:
        return "–"
    return f"{int(value):,}" if reported >= replies else f"{int(value):,} ({reported} of {replies} replies)"


def _cells(name: str, roles: str, counts: Mapping[str, Any]) -> list[str]:
    numbers = [f"{int(counts.get(k) or 0):,}" for k in ("requests", "cache_hits", "retries", "failures")]
    return [name, roles, *numbers, _tokens(counts, "prompt_tokens"), _tokens(counts, "completion_tokens")]


def usage_rows(summary: Mapping[str, Any]) -> list[list[str]]:
    """One row per judge (with the roles it serves), plus a total row when there are several;
    empty when the run asked no judge (or predates judge usage in the summary)."""
    section = summary.get("judge_usage")
    judges = section.get("judges") if isinstance(section, Mapping) else None
    if not isinstance(judges, Mapping) or not judges:
        return []
    roles: dict[str, list[str]] = defaultdict(list)
    for role, identity in (section.get("roles") or {}).items():
        roles[str(identity)].append(str(role))
    rows = [_cells(str(identity), ", ".join(roles.get(str(identity), [])) or "–", counts) for identity, counts in judges.items()]
    if len(rows) > 1 and isinstance(section.get("total"), Mapping):
        rows.append(_cells("total", "", section["total"]))
    return rows


def usage_html(summary: Mapping[str, Any]) -> str:
    """The report's ``Judges`` section ("" when there is nothing to show)."""
    rows = usage_rows(summary)
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" if i < 2 else f'<th class="num">{h}</th>' for i, h in enumerate(HEADERS))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" if i < 2 else f'<td class="num">{html.escape(c)}</td>' for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    note = (
        "Questions sent to each judge during this run (retries apart), answered from the reply cache instead, retried "
        "and failed; tokens as the servers reported them (– unknown)."
    )
    return (
        f'<section id="judges"><h2>Judges</h2><p class="muted">{html.escape(note)}</p>'
        f'<div class="scroll"><table id="judge-usage"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div></section>'
    )


def usage_markdown(summary: Mapping[str, Any]) -> str:
    """A Markdown ``Judge usage`` table to append to the report ("" when there is nothing to show)."""
    rows = usage_rows(summary)
    if not rows:
        return ""
    lines = ["", "## Judge usage", "", "| " + " | ".join(HEADERS) + " |", "|---|---|" + "---:|" * (len(HEADERS) - 2)]
    from ..pipelines.report import markdown_cell

    lines += ["| " + " | ".join(markdown_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def usage_table(summary: Mapping[str, Any]) -> Any:
    """A rich table for the terminal, or None when there is nothing to show."""
    rows = usage_rows(summary)
    if not rows:
        return None
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="judge usage")
    for index, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if index < 2 else "right", overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table
