"""The ``mmverify`` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Score multimodal generations with per-task verifier programs.",
)
console = Console(stderr=True)
stdout = Console()
EXIT_USAGE = 2  # unusable arguments or an unusable output folder
EXIT_ERROR_ROWS = 3  # score --fail-on-errors: the run completed with error rows


def _fail(message: str) -> None:
    console.print(f"[red]error:[/red] {message}")
    raise typer.Exit(EXIT_USAGE)


def _version(value: bool) -> None:
    if value:
        from . import __version__

        print(f"mmverify {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Score multimodal generations with per-task verifier programs."""


@app.command("doctor")
def doctor_command(
    only_missing: bool = typer.Option(False, "--missing", help="Only the tasks that cannot run here."),
) -> None:
    """Which tasks can run here (models, judges, reference sets), with the fix for each that cannot."""
    from .pipelines.readiness import readiness

    everything = readiness()
    shown = [e for e in everything if not (only_missing and e.ready)]
    stdout.print(_readiness_table(shown, f"tasks ready here: {sum(e.ready for e in everything)} of {len(everything)}"))


@app.command("tasks")
def tasks_command(
    as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the catalog as a Markdown table."),
    group: Optional[str] = typer.Option(None, help="Only tasks of this modality group."),
    explain: Optional[str] = typer.Option(
        None, "--explain", metavar="TASK", help="One task's rule, its published source and each profile's deviations."
    ),
) -> None:
    """List every MMMG task: id, name, modality, method, what it needs, and whether it is implemented."""
    from .tasks.catalog import TASKS, markdown_table

    if explain is not None:
        from .core.registry import UnknownIdError
        from .tasks.parity import explain as explain_task

        try:
            print(explain_task(explain), end="")
        except UnknownIdError as exc:
            _fail(str(exc))
        return

    entries = [t for t in TASKS if group is None or t.group == group]
    if markdown:
        print(markdown_table(tuple(entries)), end="")
        return
    if as_json:
        payload = [
            {
                "id": t.id, "name": t.name, "group": t.group, "method": t.method, "needs": list(t.needs),
                "sources": list(t.source_files), "implemented": t.implemented,
            }
            for t in entries
        ]  # fmt: skip
        stdout.print_json(json.dumps(payload))
        return
    table = Table(title=f"MMMG tasks ({sum(t.implemented for t in entries)}/{len(entries)} implemented)")
    for column in ("id", "name", "group", "method", "needs", "status"):
        table.add_column(column, overflow="fold")
    for t in entries:
        status = "[green]ready[/green]" if t.implemented else "[yellow]not implemented[/yellow]"
        table.add_row(t.id, t.name, t.group, t.method, ", ".join(t.needs) or "—", status)
    stdout.print(table)


def _summary_table(summary: dict[str, Any]) -> Table:
    table = Table(title="summary")
    for column, justify in (("task", "left"), ("mean", "right"), ("95% CI", "left"), ("n", "right"), ("errors", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for task, entry in summary["tasks"].items():
        mean = "–" if entry["mean"] is None else f"{entry['mean']:.3f}"
        ci = "–" if not entry["ci95"] else f"[{entry['ci95'][0]:.3f}, {entry['ci95'][1]:.3f}]"
        table.add_row(task, mean, ci, str(entry["n"]), str(entry["n_error"]))
    overall = summary["overall"]["mean"]
    table.caption = f"overall (macro over tasks): {'–' if overall is None else f'{overall:.3f}'}"
    return table


@app.command("score")
def score_command(
    manifest: Path = typer.Argument(..., exists=True, dir_okay=False, help="Generation manifest (JSON Lines)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (results.jsonl, summary.json).", rich_help_panel="Input"),
    instructions: Optional[Path] = typer.Option(None, help="Instruction set folder (<task>.jsonl, image/, audio/).", rich_help_panel="Input"),
    tasks: Optional[str] = typer.Option(None, help="Comma-separated task ids to score (others are skipped).", rich_help_panel="Input"),
    workers: int = typer.Option(1, min=1, help="1: in-process; N>1: N worker processes (hard per-item timeout).", rich_help_panel="Execution"),
    in_flight: int = typer.Option(
        32, "--batch-items", min=1, rich_help_panel="Execution",
        help="Items scored together (with --workers 1): their model calls share batches on the device; rows are "
        "the same bytes as scored one at a time (1).",
    ),
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
    offline: bool = typer.Option(False, help="Never touch the network (sets HF_HUB_OFFLINE).", rich_help_panel="Models"),
    model: list[str] = typer.Option(
        [], "--model", help="Backend for a capability: capability=backend[@hub-id-or-path] (repeatable).", rich_help_panel="Models"
    ),
    references: list[str] = typer.Option(
        [], "--references", help="Reference set folder: esc50|openmic|gtzan=/path (repeatable; sets MMVERIFY_REFERENCES).", rich_help_panel="Models"
    ),
    device: Optional[str] = typer.Option(None, help="Model device (cpu, cuda, cuda:1, mps); default: best available.", rich_help_panel="Models"),
    precision: Optional[str] = typer.Option(
        None, help="Torch backends' precision: fp32 (default, published parity), bf16 or fp16 (GPU only); sets "
        "MMVERIFY_PRECISION.", rich_help_panel="Models",
    ),
    vlm_base_url: Optional[str] = typer.Option(
        None, "--vlm-base-url", help="OpenAI-compatible endpoint of the VLM judge, e.g. http://127.0.0.1:8000/v1.", rich_help_panel="Judge"
    ),
    vlm_model: Optional[str] = typer.Option(
        None, "--vlm-model", help="Judge model at that endpoint, or transformers:<path-or-hub-id> to run one in-process.", rich_help_panel="Judge"
    ),
    vlm_role: list[str] = typer.Option(
        [], "--vlm-role", help=(
            "Judge for one role: ROLE=MODEL[@URL] (repeatable). Roles: spatial (fallback of spatial_relative and "
            "spatial_absolute), spatial_relative, spatial_absolute, ocr, ocr_second (a different model that also reads "
            "Chinese text), llm. Unset settings come from the parent role, then the default judge."
        ), rich_help_panel="Judge"
    ),
    vlm_concurrency: Optional[int] = typer.Option(None, "--vlm-concurrency", help="Judge requests in flight per endpoint and process (default 8).", rich_help_panel="Judge"),
    vlm_api_key_env: Optional[str] = typer.Option(
        None, "--vlm-api-key-env", help="Environment variable holding the judge's API key (default OPENAI_API_KEY).", rich_help_panel="Judge"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary table.", rich_help_panel="Execution"),
) -> None:
    """Score MANIFEST into OUT; rerunning with the same OUT resumes where it stopped."""
    from .pipelines.score import ScoreConfig
    from .pipelines.thresholds import load_thresholds
    from .tasks.catalog import CATALOG

    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["MMVERIFY_OFFLINE"] = "1"
    if model:
        from .models.hub import ENV_VAR, parse_specs

        try:
            parse_specs(",".join(model))
        except (ValueError, KeyError) as exc:
            _fail(f"--model: {exc}")
        os.environ[ENV_VAR] = ",".join(model)  # worker processes inherit the choice
    if references:
        from .references.sets import ENV_VAR as REFERENCES_VAR, parse_references

        try:
            parse_references(",".join(references))
        except (ValueError, KeyError) as exc:
            _fail(f"--references: {exc}")
        os.environ[REFERENCES_VAR] = ",".join(references)
    if device:
        os.environ["MMVERIFY_DEVICE"] = device
    if precision:
        if precision not in ("fp32", "bf16", "fp16"):
            _fail("--precision must be fp32, bf16 or fp16")
        os.environ["MMVERIFY_PRECISION"] = precision
    from .models.judge import apply_cli_options

    try:  # the environment carries the judge configuration into worker processes
        apply_cli_options(
            base_url=vlm_base_url, model=vlm_model, roles=vlm_role, concurrency=vlm_concurrency, api_key_env=vlm_api_key_env
        )
    except (ValueError, KeyError) as exc:
        _fail(f"{exc}")
    selected = None
    if tasks:
        from .tasks.catalog import SOURCE_FILES

        selected = frozenset(t.strip() for t in tasks.split(",") if t.strip())
        unknown = sorted(selected - set(CATALOG) - SOURCE_FILES)
        if unknown:
            from .core.registry import UnknownIdError

            _fail("; ".join(str(UnknownIdError("task", t, list(CATALOG))) for t in unknown))
    if instructions is not None and not instructions.is_dir():
        _fail(f"--instructions {instructions} is not a folder")
    if data_root is not None and not data_root.is_dir():
        _fail(f"--data-root {data_root} is not a folder")
    if executor not in ("local", "ray"):
        _fail("--executor must be 'local' or 'ray'")
    from .pipelines.summary import AGGREGATIONS
    from .tasks.base import PROFILES

    if profile not in PROFILES:
        _fail(f"--profile must be one of {', '.join(PROFILES)}")
    if aggregate not in AGGREGATIONS:
        _fail(f"--aggregate must be one of {', '.join(AGGREGATIONS)}")
    try:
        threshold_map = load_thresholds(thresholds) if thresholds else {}
    except (ValueError, OSError) as exc:
        _fail(f"--thresholds: {exc}")
    config = ScoreConfig(
        manifest=manifest,
        out=out,
        instructions=instructions,
        tasks=selected,
        workers=workers,
        in_flight=in_flight,
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
    )
    if dry_run:
        _print_dry_run(config)
        return
    outcome = _run_score(config, quiet)
    if fail_on_errors and outcome.errors:
        console.print(f"[red]{outcome.errors} row(s) ended as errors[/red] (--fail-on-errors)")
        raise typer.Exit(EXIT_ERROR_ROWS)


def _print_frequent_errors(latest: Path, most: int = 5) -> None:
    """The most frequent error messages among the current rows, so nobody has to grep for them."""
    from collections import Counter

    from rich.markup import escape

    counts: Counter[tuple[str, str]] = Counter()
    for line in latest.read_text(encoding="utf-8").splitlines():
        error = json.loads(line).get("error")
        if error:
            counts[(error["code"], error["message"])] += 1
    if not counts:
        return
    stdout.print(f"[bold]most frequent errors[/bold] ({sum(counts.values())} error rows):")
    for (code, message), count in counts.most_common(most):
        stdout.print(f"  {count} × [red]{code}[/red]: {escape(message[:300])}")


def _readiness_table(entries: Any, title: str, planned: dict[str, int] | None = None) -> Table:
    from rich.markup import escape

    table = Table(title=title)
    columns = ("task", "planned", "ready", "what is missing and how to get it") if planned is not None else ("task", "ready", "what is missing and how to get it")
    for column in columns:
        table.add_column(column, overflow="fold")
    for entry in entries:
        ready = "[green]yes[/green]" if entry.ready else "[yellow]no[/yellow]"
        fixes = escape("\n".join(entry.fixes())) or "—"
        cells = (entry.task, str(planned.get(entry.task, 0)), ready, fixes) if planned is not None else (entry.task, ready, fixes)
        table.add_row(*cells)
    return table


def _print_dry_run(config: Any) -> None:
    from rich.markup import escape

    from .pipelines.readiness import dry_run

    try:
        report = dry_run(config)
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    stdout.print(_readiness_table(report.tasks, "dry run: planned rows per task", report.planned))
    for task, codes in sorted(report.errors.items()):
        for code, messages in sorted(codes.items()):
            stdout.print(f"[red]{len(messages)} {code}[/red] ({escape(task)}): {escape(messages[0])}")
    total = sum(report.planned.values())
    blocked = sum(report.planned[t.task] for t in report.tasks if not t.ready)
    stdout.print(f"{total} rows would be scored ({blocked} of them need something missing here), "
                 f"{sum(len(m) for c in report.errors.values() for m in c.values())} lines are errors already, "
                 f"{report.filtered} filtered out; nothing was scored")


def _run_score(config: Any, quiet: bool) -> Any:
    """Run a configured score job with a progress bar and print the summary table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from .pipelines.score import count_lines, run_score

    try:
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
        _fail(str(exc))
    except RuntimeError as exc:  # e.g. --executor ray without Ray installed
        _fail(str(exc))
    if not quiet:
        stdout.print(_summary_table(outcome.summary))
        _print_frequent_errors(outcome.latest_path)
        stats = outcome.plan
        console.print(
            f"{outcome.written} rows written to {outcome.results_path} "
            f"({stats.skipped_done} already done, {stats.skipped_filtered} filtered); summary: {outcome.summary_path}"
        )
    return outcome


@app.command("import-mmmg")
def import_mmmg_command(
    output_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Official layout: <task>.jsonl + image/ + audio/."),
    instructions: Path = typer.Option(..., exists=True, file_okay=False, help="Instruction set the outputs answer."),
    samples: Optional[int] = typer.Option(None, min=1, help="Samples per instruction (inferred when omitted)."),
    model: Optional[str] = typer.Option(None, help="Model name for the rows (default: the folder name)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write here (paths relative to it) instead of stdout."),
) -> None:
    """Convert the official MMMG output layout into a generation manifest."""
    from .data.instructions import InstructionSet, InstructionSetError
    from .data.mmmg_import import MMMGImporter, MMMGLayoutError

    importer = MMMGImporter(
        output_dir,
        InstructionSet(instructions),
        samples=samples,
        model=model,
        relative_to=output.resolve().parent if output else None,
    )
    try:  # the whole folder is read and checked first: a failure leaves no partial manifest behind
        if output:
            importer.write_manifest(output)
        else:
            sys.stdout.write(importer.manifest_text())
    except (MMMGLayoutError, InstructionSetError, OSError) as exc:
        _fail(str(exc))
    report = importer.report
    console.print(f"imported {report.lines} generations from {report.files} task files")
    for name in report.skipped_files:
        console.print(f"[yellow]skipped[/yellow] {name}: no instruction file of that name")
    for warning in report.warnings[:20]:
        console.print(f"[yellow]warning[/yellow] {warning}")


@app.command("report")
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
) -> None:
    """Render DIR/summary.json as Markdown (printed, and written to DIR/report.md); --html adds the
    browsable report and the leaderboard CSV."""
    from .pipelines.report import render_markdown

    path = run_dir / "summary.json"
    if not path.is_file():
        _fail(f"{path} not found; run `mmverify score` first")
    text = render_markdown(json.loads(path.read_text(encoding="utf-8")))
    (run_dir / "report.md").write_text(text, encoding="utf-8")
    typer.echo(text, nl=False)
    if html:
        from .reports import write_html_report, write_leaderboard_csv

        page = write_html_report(run_dir, max_media=max_media)
        table = write_leaderboard_csv(run_dir)
        console.print(f"wrote {page} and {table}")


from .commands.calibrate import calibrate_command  # noqa: E402  (commands defined in their own modules)
from .commands.compare import compare_command  # noqa: E402

app.command("calibrate")(calibrate_command)
app.command("compare")(compare_command)


references_app = typer.Typer(no_args_is_help=True, help="Reference sets (ESC-50, OpenMIC-2018, GTZAN) and their indexes.")
app.add_typer(references_app, name="references")


@references_app.command("build")
def references_build(
    references: list[str] = typer.Option([], "--references", help="name=/path (repeatable); default: MMVERIFY_REFERENCES."),
    model: list[str] = typer.Option([], "--model", help="audio_text=backend[@path] to index with (default: clap-hf)."),
    profile: list[str] = typer.Option(
        ["mmmg"], "--profile", help="Build the indexes this scoring profile reads (mmmg: zero-padded clips, strict: "
        "repeat-padded); repeatable.",
    ),
) -> None:
    """Embed every configured reference set once, before scoring (the first ESC-50 build takes
    minutes on a CPU; done here it cannot make the first score rows time out)."""
    from .models.hub import ENV_VAR as MODELS_VAR, get_hub, parse_specs
    from .references.sets import ENV_VAR, SETS, parse_references, reference_set

    if references:
        os.environ[ENV_VAR] = ",".join(references)
    if model:
        parse_specs(",".join(model))
        os.environ[MODELS_VAR] = ",".join(model)
    try:
        configured = parse_references(os.environ.get(ENV_VAR, ""))
    except (ValueError, KeyError) as exc:
        _fail(str(exc))
    if not configured:
        _fail(f"no reference sets configured: pass --references name=/path or set {ENV_VAR} (sets: {', '.join(SETS)})")
    from .core.errors import ScoringError

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .tasks.sound import clap_front_end

    paddings = {"mmmg": "zero", "strict": "repeat"}
    unknown = sorted(set(profile) - set(paddings))
    if unknown:
        _fail(f"--profile must be mmmg or strict, got {', '.join(unknown)}")
    try:
        backend = get_hub().backend("audio_text")
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=False) as bar:
            for chosen in dict.fromkeys(profile):
                embedder = clap_front_end(backend, paddings[chosen])
                for name in configured:
                    for layout in SETS[name].layouts:
                        job = bar.add_task(f"{name} ({layout}, {chosen})", total=None)
                        index = reference_set(name, layout).index(
                            embedder, progress=lambda done, total, job=job: bar.update(job, completed=done, total=total)
                        )
                        bar.update(job, description=f"{name} ({layout}, {chosen}): {len(index.classes())} classes")
    except ScoringError as exc:
        _fail(exc.message)


models_app = typer.Typer(no_args_is_help=True, help="Model backends: what is usable here, and fetching weights.")
app.add_typer(models_app, name="models")


def _backend_rows(names: list[str] | None, load: bool) -> list[tuple[str, ...]]:
    from .models.catalog import BACKEND_INFO, BACKEND_REGISTRY, BACKENDS
    from .models.base import ModelUnavailable

    rows = []
    for info in BACKENDS:
        if names and info.name not in names:
            continue
        backend = BACKEND_REGISTRY.get(info.name)(source=None)
        state = backend.availability()
        ok, reason, device = state.ok, state.reason, "-"
        if ok and load:
            try:
                backend.ensure_loaded()
                device = backend.device
            except ModelUnavailable as exc:
                ok, reason = False, exc.message
            except Exception as exc:  # report, do not crash the listing
                ok, reason = False, f"failed to load: {type(exc).__name__}: {exc}"
        default = " (default)" if info.default_for else ""
        rows.append((info.name, info.capability + default, "yes" if ok else "no", state.location, device, reason))
    unknown = sorted(set(names or []) - set(BACKEND_INFO))
    if unknown:
        from .core.registry import UnknownIdError

        _fail("; ".join(str(UnknownIdError("model backend", n, list(BACKEND_INFO))) for n in unknown))
    return rows


def _print_backends(rows: list[tuple[str, ...]], title: str) -> None:
    table = Table(title=title)
    for column in ("backend", "capability", "usable", "loads from", "device", "why / how to get it"):
        table.add_column(column, overflow="fold")
    from rich.markup import escape

    for name, capability, ok, location, device, reason in rows:
        colour = "green" if ok == "yes" else "yellow"
        table.add_row(name, capability, f"[{colour}]{ok}[/{colour}]", escape(location), device, escape(reason))
    stdout.print(table)


@models_app.command("list")
def models_list(names: Optional[list[str]] = typer.Argument(None, help="Only these backends.")) -> None:
    """Every backend, whether its package and weights are present here (nothing is loaded)."""
    _print_backends(_backend_rows(names, load=False), "model backends")


@models_app.command("check")
def models_check(names: Optional[list[str]] = typer.Argument(None, help="Only these backends.")) -> None:
    """Like `list`, but also loads every usable backend to prove it works (slow for big models)."""
    _print_backends(_backend_rows(names, load=True), "model backends (loaded)")


@models_app.command("fetch")
def models_fetch(names: list[str] = typer.Argument(..., help="Backends whose weights to download.")) -> None:
    """Download weights into the local caches (the only command that uses the network)."""
    from .models.catalog import BACKEND_INFO, BACKEND_REGISTRY

    for name in names:
        if name not in BACKEND_INFO:
            from .core.registry import UnknownIdError

            _fail(str(UnknownIdError("model backend", name, list(BACKEND_INFO))))
        try:
            path = BACKEND_REGISTRY.get(name)(source=None).fetch()
        except Exception as exc:
            _fail(f"{name}: could not fetch ({type(exc).__name__}: {exc})")
        console.print(f"{name}: ready at {path}")


@app.command("demo")
def demo_command(
    out: Path = typer.Option(Path("runs/demo"), "--out", "-o", help="Where to write the demo media and results."),
) -> None:
    """Generate a small example manifest (synthetic images and responses) and score it."""
    from .demo import write_demo

    manifest = write_demo(out)
    console.print(f"wrote example manifest {manifest}")
    from .pipelines.score import ScoreConfig

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _run_score(ScoreConfig(manifest=manifest, out=out / "run", timeout=60.0), quiet=False)


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default; anything else should have --token)."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free port; the chosen one is logged)."),
    token: Optional[str] = typer.Option(
        None, envvar="MMVERIFY_SERVER_TOKEN", help="Require 'Authorization: Bearer TOKEN' (prefer the env variable: argv is visible)."
    ),
    data_root: Optional[Path] = typer.Option(None, help="Media paths resolve under this folder; without it only inline media are accepted."),
    instructions: Optional[Path] = typer.Option(None, help="Instruction set folder, for items that give an instance_id instead of an inline instance."),
    thresholds: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="Thresholds JSON from `calibrate`."),
    tasks: Optional[str] = typer.Option(None, help="Comma-separated task ids this server scores (default: every implemented task)."),
    timeout: float = typer.Option(60.0, min=0.0, help="Per-item time limit in seconds (0: none)."),
    request_timeout: float = typer.Option(300.0, min=0.001, help="A request not answered within this many seconds gets 504."),
    max_body_mb: float = typer.Option(32.0, min=0.001, help="Larger request bodies get 413."),
    max_items: int = typer.Option(256, min=1, help="Requests with more items get 413."),
    batch_wait_ms: float = typer.Option(2.0, min=0.0, help="How long the micro-batcher collects concurrent requests."),
    max_batch: int = typer.Option(64, min=1, help="Most items scored as one batch."),
    on_error: str = typer.Option("raise", help="/get_reward for items that cannot be scored: raise (HTTP 500), zero, or none (null)."),
    offline: bool = typer.Option(False, help="Never touch the network (sets HF_HUB_OFFLINE)."),
    model: list[str] = typer.Option([], "--model", help="Backend for a capability: capability=backend[@hub-id-or-path] (repeatable)."),
    device: Optional[str] = typer.Option(None, help="Model device (cpu, cuda, cuda:1, mps); default: best available."),
    precision: Optional[str] = typer.Option(None, help="Torch backends' precision: fp32 (default), bf16 or fp16 (GPU only)."),
    profile: str = typer.Option("mmmg", help="Scoring rules: mmmg (published evaluator) or strict (this project's corrections)."),
    max_json_values: int = typer.Option(200_000, min=1, help="Bodies holding more JSON values get 413, checked before decoding."),
    max_inflight_mb: float = typer.Option(64.0, min=0.001, help="Request bodies held in memory at once; further requests wait for room."),
    max_waiting: int = typer.Option(256, min=0, help="Requests that may wait for memory room; more get 429 with Retry-After."),
    header_timeout: float = typer.Option(10.0, min=0.001, help="Seconds allowed for a request's headers; slower connections are closed."),
    body_timeout: float = typer.Option(30.0, min=0.001, help="Seconds allowed for a request's body after its headers (408 after)."),
    keep_alive_timeout: float = typer.Option(30.0, min=0.001, help="Idle seconds before a kept-alive connection closes."),
    shutdown_timeout: float = typer.Option(10.0, min=0.0, help="On SIGINT/SIGTERM, seconds requests being scored get before the process exits."),
) -> None:
    """Serve rewards over HTTP: POST /score, POST /get_reward (OpenRLHF), GET /healthz, GET /tasks."""
    try:
        from .pipelines.server import ServerConfig, run
    except ImportError as exc:
        _fail(f"the server needs starlette and uvicorn ({exc}); pip install \"mmverify[serve]\"")
    if data_root is not None and not data_root.is_dir():
        _fail(f"--data-root {data_root} is not a folder")
    if instructions is not None and not instructions.is_dir():
        _fail(f"--instructions {instructions} is not a folder")
    if host not in ("127.0.0.1", "::1", "localhost") and not token:
        console.print(f"[yellow]warning:[/yellow] serving on {host} without --token: anyone who can reach it can use it")
    try:
        import uvicorn  # noqa: F401  (fail before binding, with the extra's name)
        import starlette  # noqa: F401

        config = ServerConfig(
            host=host, port=port, token=token or None, data_root=data_root, instructions=instructions,
            thresholds=thresholds, tasks=[t.strip() for t in tasks.split(",") if t.strip()] if tasks else None,
            item_timeout=timeout or None, request_timeout=request_timeout, max_body_bytes=int(max_body_mb * 1024 * 1024),
            max_items=max_items, batch_wait_ms=batch_wait_ms, max_batch_items=max_batch, on_error=on_error,
            reward_options={
                "models": model or None, "device": device, "offline": offline or None, "profile": profile,
                "precision": precision,
            },
            max_json_values=max_json_values, max_inflight_bytes=int(max_inflight_mb * 1024 * 1024), max_waiting=max_waiting,
            header_timeout=header_timeout, body_timeout=body_timeout, keep_alive_timeout=keep_alive_timeout,
            shutdown_timeout=shutdown_timeout,
        )  # fmt: skip
        run(config)
    except ImportError as exc:
        _fail(f"the server needs starlette and uvicorn ({exc}); pip install \"mmverify[serve]\"")
    except (ValueError, OSError) as exc:
        _fail(str(exc))


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
