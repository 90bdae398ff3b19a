"""``mmverify report DIR [--html] [--compare OTHER ...]``: a run's summary as Markdown, and with
``--html`` the browsable page -- which, given other runs, also shows how each differs from this one."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import console, fail, os_problem, stdout


def report_command(
    run_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="A folder written by `mmverify score`."),
    html: bool = typer.Option(
        False, "--html", help="Also write DIR/report.html (self-contained: media, plots and script embedded; opens "
        "offline) and DIR/leaderboard.csv.",
    ),
    max_media: int = typer.Option(
        200, "--max-media", min=0, help="With --html: items per task whose media are embedded (lowest and highest "
        "scores first); the rest are listed without media.",
    ),
    media_root: Optional[Path] = typer.Option(
        None, "--media-root", exists=True, file_okay=False, help="With --html: embed media from under this folder "
        "instead of the run's --data-root (else the manifest's folder); media named elsewhere are listed, not shown.",
    ),
    compare: list[Path] = typer.Option(
        [], "--compare", help="Another run (folder or results file; repeatable) to compare with this one: each "
        "other run minus this run per task and overall, with paired bootstrap 95% CIs, as `mmverify compare DIR "
        "OTHER...`. Printed, and a section of the --html page.",
    ),
) -> None:
    """Render DIR/summary.json as Markdown (printed, and written to DIR/report.md); --html adds the
    browsable report and the leaderboard CSV; --compare adds the differences to other runs."""
    from ..pipelines.report import render_markdown
    from ..pipelines.runs import read_summary
    from ..reports.usage import usage_markdown

    try:
        summary = read_summary(run_dir, required=True)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    try:
        text = render_markdown(summary) + usage_markdown(summary)
    except (AttributeError, TypeError, KeyError, ValueError) as exc:  # valid JSON of another shape
        fail(f"{run_dir / 'summary.json'} is not a summary `mmverify score` wrote ({type(exc).__name__}: {exc})")
    try:
        (run_dir / "report.md").write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(os_problem(exc))
    typer.echo(text, nl=False)
    comparison = None
    if compare:
        from ..reports.compare_table import describe_matching, render_compare_table
        from ..reports.html import compare_with

        try:
            comparison = compare_with(run_dir, compare, summary)
        except ValueError as exc:
            fail(str(exc))
        stdout.print(render_compare_table(comparison))
        for entry in comparison["comparisons"]:
            console.print(describe_matching(entry), highlight=False, markup=False)
    if html:
        from ..reports import write_html_report, write_leaderboard_csv

        try:
            page = write_html_report(run_dir, max_media=max_media, comparison=comparison, media_root=media_root)
            table = write_leaderboard_csv(run_dir)
        except OSError as exc:
            fail(os_problem(exc))
        except ValueError as exc:  # an unreadable results file
            fail(str(exc))
        console.print(f"wrote {page} and {table}", highlight=False, markup=False, soft_wrap=True)
