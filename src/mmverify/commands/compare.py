"""``mmverify compare RUN_A RUN_B [RUN_C ...]``: paired differences of mean score between runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from .common import console as stderr
from .common import fail, os_problem, stdout


def compare_command(
    runs: list[Path] = typer.Argument(..., help="Run folders (results.latest.jsonl is read) or results files; the first is the baseline."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the comparison as JSON to this file."),
    html_out: Optional[Path] = typer.Option(None, "--html", help="Also write the comparison as one self-contained HTML page to this file."),
    seed: int = typer.Option(0, help="Bootstrap seed (intervals are deterministic for a given seed)."),
    aggregate: str = typer.Option(
        "apart", help="Error rows: apart (their pairs are left out and counted) or as_zero (scored 0, as `score --aggregate as_zero`)."
    ),
    match: str = typer.Option(
        "auto", help="Pair rows by task+instance+sample (instance), also by model (model), or auto: by model only when a run holds several models."
    ),
) -> None:
    """Per-task and overall differences of mean score (each run minus the first), paired bootstrap 95% CIs."""
    from ..pipelines.compare import MATCH_MODES, compare_runs
    from ..pipelines.summary import AGGREGATIONS
    from ..reports.compare_table import describe_matching, render_compare_table

    if len(runs) < 2:
        fail("compare needs at least two runs (a baseline and one to compare with it)")
    if aggregate not in AGGREGATIONS:
        fail(f"--aggregate must be one of {', '.join(AGGREGATIONS)}")
    if match not in MATCH_MODES:
        fail(f"--match must be one of {', '.join(MATCH_MODES)}")
    try:
        result = compare_runs(runs, seed=seed, errors_as_zero=aggregate == "as_zero", match=match)
    except ValueError as exc:
        fail(str(exc))
    stdout.print(render_compare_table(result))
    for comparison in result["comparisons"]:
        stderr.print(describe_matching(comparison), highlight=False, markup=False)
    try:
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            stderr.print(f"wrote {json_out}", highlight=False, markup=False, soft_wrap=True)
        if html_out is not None:
            from ..reports.compare_html import write_compare_html

            write_compare_html(result, html_out)
            stderr.print(f"wrote {html_out}", highlight=False, markup=False, soft_wrap=True)
    except OSError as exc:  # --json / --html somewhere that cannot be written
        fail(os_problem(exc))
