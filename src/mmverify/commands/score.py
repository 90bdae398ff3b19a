"""``mmverify score MANIFEST --out RUN``: score a manifest into a run folder, resumably."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..reports.usage import usage_table
from . import options
from .common import EXIT_ERROR_ROWS, check_limit_option, console, fail, os_problem, output_folder, stdout


def _summary_table(summary: dict[str, Any]) -> Table:
    from rich.markup import escape  # task ids are user text: "[/bold]" must print, not parse

    table = Table(title="summary")
    for column, justify in (("task", "left"), ("mean", "right"), ("95% CI", "left"), ("n", "right"), ("errors", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for task, entry in summary["tasks"].items():
        mean = "–" if entry["mean"] is None else f"{entry['mean']:.3f}"
        ci = "–" if not entry["ci95"] else f"[{entry['ci95'][0]:.3f}, {entry['ci95'][1]:.3f}]"
        table.add_row(escape(task), mean, ci, str(entry["n"]), str(entry["n_error"]))
    overall = summary["overall"]["mean"]
    table.caption = f"overall (macro over tasks): {'–' if overall is None else f'{overall:.3f}'}"
    return table


def score_command(
    manifest: Path = typer.Argument(..., exists=True, dir_okay=False, help="Generation manifest (JSON Lines)."),
    out: str = typer.Option(..., "--out", "-o", metavar="PATH", help="Output folder (results.jsonl, summary.json).", rich_help_panel="Input"),
    instructions: Optional[Path] = typer.Option(None, help="Instruction set folder (<task>.jsonl, image/, audio/).", rich_help_panel="Input"),
    tasks: Optional[str] = typer.Option(None, help="Comma-separated task ids to score (others are skipped); an instruction file's name (a_music_attribute) selects the tasks it feeds.", rich_help_panel="Input"),
    workers: int = typer.Option(1, min=1, help="1: in-process; N>1: N worker processes (hard per-item timeout).", rich_help_panel="Execution"),
    in_flight: int = typer.Option(
        32, "--batch-items", min=1, rich_help_panel="Execution",
        help="Model items scored together (in this process, or per worker with --workers N / Ray): their model "
        "calls share batches on the device; rows are the same bytes as scored one at a time (1).",
    ),
    decode_processes: int = options.DECODE_PROCESSES,
    model_process: bool = options.MODEL_PROCESS,
    executor: str = typer.Option("local", help="local (this machine) or ray (a local Ray instance or --ray-address).", rich_help_panel="Execution"),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (default: start a local instance).", rich_help_panel="Execution"),
    gpus_per_worker: float = typer.Option(0.0, min=0.0, help="GPUs each Ray worker requests (model backends on GPU).", rich_help_panel="Execution"),
    timeout: float = typer.Option(300.0, min=0.0, help="Per-item time limit in seconds (0: none).", rich_help_panel="Execution"),
    warmup_timeout: float = typer.Option(
        600.0, min=0.0,
        help="Seconds for worker start-up, task import/build and each task's first use (lazy imports, model loading), "
        "apart from --timeout (0: none).", rich_help_panel="Execution"
    ),
    thresholds: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="Thresholds JSON from `calibrate`.", rich_help_panel="Input"),
    data_root: Optional[Path] = typer.Option(None, help="Refuse media paths that resolve outside this folder.", rich_help_panel="Input"),
    retry_errors: bool = typer.Option(False, help="Rescore rows that ended as errors in an earlier run.", rich_help_panel="Scoring rules"),
    limit: Optional[int] = typer.Option(None, min=1, help="Score at most N entries per task (the first in manifest order).", rich_help_panel="Input"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check the manifest, media and configuration; print planned rows per task and what is "
        "unavailable here; score nothing.", rich_help_panel="Input"
    ),
    append: bool = typer.Option(False, help="OUT holds another manifest's results: keep them and add this manifest's.", rich_help_panel="Input"),
    overwrite: bool = typer.Option(False, help="Discard whatever OUT holds before scoring.", rich_help_panel="Input"),
    fail_on_errors: bool = typer.Option(
        False, help=f"Exit with code {EXIT_ERROR_ROWS} when any current row is an error (for CI pipelines).", rich_help_panel="Scoring rules"
    ),
    profile: str = typer.Option(
        "mmmg", help="Scoring rules: mmmg (the published evaluator's, default) or strict (this project's corrections).", rich_help_panel="Scoring rules"
    ),
    aggregate: str = typer.Option(
        "apart", help="Error rows in the means: apart (reported beside them) or as_zero (counted 0, as the official scripts).", rich_help_panel="Scoring rules"
    ),
    offline: bool = options.OFFLINE,
    model: list[str] = options.MODEL,
    references: list[str] = options.REFERENCES,
    device: Optional[str] = options.DEVICE,
    precision: Optional[str] = options.PRECISION,
    vlm_base_url: Optional[str] = options.VLM_BASE_URL,
    vlm_model: Optional[str] = options.VLM_MODEL,
    vlm_role: list[str] = options.VLM_ROLE,
    vlm_concurrency: Optional[int] = options.VLM_CONCURRENCY,
    vlm_api_key_env: Optional[str] = options.VLM_API_KEY_ENV,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary table.", rich_help_panel="Execution"),
) -> None:
    """Score MANIFEST into OUT; rerunning with the same OUT resumes where it stopped."""
    out_folder = output_folder(out)
    from ..pipelines.score import ScoreConfig
    from ..pipelines.thresholds import load_thresholds
    from ..tasks.catalog import CATALOG

    context = options.apply_context(
        model, references, device, precision, offline, vlm_base_url, vlm_model, vlm_role, vlm_concurrency, vlm_api_key_env
    )
    selected = None
    if tasks is not None:
        from ..tasks.catalog import SOURCE_FILES

        selected = frozenset(t.strip() for t in tasks.split(",") if t.strip())
        if not selected:
            fail(f"--tasks {tasks!r} names no task (leave it out to score every task)")
        unknown = sorted(selected - set(CATALOG) - SOURCE_FILES)
        if unknown:
            from ..core.registry import UnknownIdError

            fail("; ".join(str(UnknownIdError("task", t, list(CATALOG))) for t in unknown))
    check_limit_option("--timeout", timeout)
    check_limit_option("--warmup-timeout", warmup_timeout)
    if instructions is not None and not instructions.is_dir():
        fail(f"--instructions {instructions} is not a folder")
    if data_root is not None and not data_root.is_dir():
        fail(f"--data-root {data_root} is not a folder")
    if executor not in ("local", "ray"):
        fail("--executor must be 'local' or 'ray'")
    from ..pipelines.summary import AGGREGATIONS
    from ..tasks.base import PROFILES

    if profile not in PROFILES:
        fail(f"--profile must be one of {', '.join(PROFILES)}")
    if aggregate not in AGGREGATIONS:
        fail(f"--aggregate must be one of {', '.join(AGGREGATIONS)}")
    try:
        threshold_map = load_thresholds(thresholds) if thresholds else {}
    except (ValueError, OSError) as exc:
        fail(f"--thresholds: {exc}")
    try:
        config = ScoreConfig(
            manifest=manifest,
            out=out_folder,
            instructions=instructions,
            tasks=selected,
            workers=workers,
            in_flight=in_flight,
            decode_processes=decode_processes,
            model_process=model_process,
            timeout=timeout or None,
            warmup_timeout=warmup_timeout or None,
            thresholds=threshold_map,
            data_root=data_root,
            retry_errors=retry_errors,
            executor=executor,
            ray_address=ray_address,
            gpus_per_worker=gpus_per_worker,
            profile=profile,
            aggregate=aggregate,
            append=append,
            overwrite=overwrite,
            limit=limit,
            context=context,
        )
    except ValueError as exc:
        fail(str(exc))
    if dry_run:
        _print_dry_run(config)
        return
    outcome = run_score_job(config, quiet)
    if fail_on_errors and outcome.errors:
        console.print(f"[red]{outcome.errors} row(s) ended as errors[/red] (--fail-on-errors)")
        raise typer.Exit(EXIT_ERROR_ROWS)


def _print_frequent_errors(latest: Path, most: int = 5) -> None:
    """The most frequent error messages among the current rows, so nobody has to grep for them."""
    from collections import Counter

    from rich.markup import escape

    counts: Counter[tuple[str, str]] = Counter()
    with latest.open("rb") as rows:  # lines end at b"\n" only: U+2028 and U+0085 may sit in a row's strings
        for line in rows:
            error = json.loads(line).get("error") if line.strip() else None
            if error:
                counts[(error["code"], error["message"])] += 1
    if not counts:
        return
    stdout.print(f"[bold]most frequent errors[/bold] ({sum(counts.values())} error rows):")
    for (code, message), count in counts.most_common(most):
        stdout.print(f"  {count} × [red]{code}[/red]: {escape(message[:300])}")


def readiness_table(entries: Any, title: str, planned: dict[str, int] | None = None) -> Table:
    from rich.markup import escape

    table = Table(title=title)
    columns = ("task", "planned", "ready", "what is missing and how to get it") if planned is not None else ("task", "ready", "what is missing and how to get it")
    for column in columns:
        table.add_column(column, overflow="fold")
    for entry in entries:
        ready = "[green]yes[/green]" if entry.ready else "[yellow]no[/yellow]"
        fixes = escape("\n".join(entry.fixes())) or "—"
        task = escape(entry.task)
        cells = (task, str(planned.get(entry.task, 0)), ready, fixes) if planned is not None else (task, ready, fixes)
        table.add_row(*cells)
    return table


def _print_dry_run(config: Any) -> None:
    from rich.markup import escape

    from ..pipelines.readiness import dry_run

    try:
        report = dry_run(config)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    stdout.print(readiness_table(report.tasks, "dry run: planned rows per task", report.planned))
    for task, codes in sorted(report.errors.items()):
        for code, messages in sorted(codes.items()):
            stdout.print(f"[red]{len(messages)} {code}[/red] ({escape(task)}): {escape(messages[0])}")
    for note in report.notes:
        stdout.print(f"[yellow]note[/yellow]: {escape(note)}")
    total = sum(report.planned.values())
    blocked = sum(report.planned[t.task] for t in report.tasks if not t.ready)
    stdout.print(f"{total} rows would be scored ({blocked} of them need something missing here), "
                 f"{sum(len(m) for c in report.errors.values() for m in c.values())} lines are errors already, "
                 f"{report.filtered} filtered out; nothing was scored")


def run_score_job(config: Any, quiet: bool) -> Any:
    """Run a configured score job with a progress bar and print the summary table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..pipelines.outdir import check_output_folder
    from ..pipelines.score import count_lines, run_score

    try:
        check_output_folder(config.out)
        config.out.mkdir(parents=True, exist_ok=True)  # an unusable --out fails before a progress bar shows
        if quiet:
            outcome = run_score(config)
        else:
            columns = (
                TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
            )  # fmt: skip
            with Progress(*columns, console=console, transient=False) as progress:
                bar = progress.add_task("score", total=count_lines(config.manifest))
                outcome = run_score(config, progress=lambda n: progress.advance(bar, n))
    except ValueError as exc:  # e.g. a corrupt results file from another tool
        fail(str(exc))
    except RuntimeError as exc:  # e.g. --executor ray without Ray installed
        fail(str(exc))
    except OSError as exc:  # an --out that cannot be created or written (/proc/x, a read-only folder)
        fail(os_problem(exc))
    if not quiet:
        stdout.print(_summary_table(outcome.summary))
        judges = usage_table(outcome.summary)  # None when the run asked no judge
        if judges is not None:
            stdout.print(judges)
        _print_frequent_errors(outcome.latest_path)
        stats = outcome.plan
        console.print(
            f"{outcome.written} rows written to {outcome.results_path} "
            f"({stats.skipped_done} already done, {stats.skipped_filtered} filtered); summary: {outcome.summary_path}"
        )
    if outcome.plan.shared_names:
        console.print(
            f"[yellow]warning:[/yellow] {outcome.plan.shared_names} manifest entries name the task, instance_id, sample "
            f"and model of an earlier line but hold other content (first: {outcome.plan.first_shared}); compare and "
            "calibrate pair rows by those fields and cannot tell them apart: give each generation its own sample",
            highlight=False, soft_wrap=True,
        )
    return outcome
