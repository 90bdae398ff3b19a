"""The ``mmverify`` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .commands.common import EXIT_ERROR_ROWS, EXIT_USAGE, console, fail, output_folder, stdout  # noqa: F401  (EXIT_*: part of the CLI's API)
from .commands import options
from .commands.score import readiness_table, run_score_job

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Score multimodal generations with per-task verifier programs.",
)
_fail = fail  # the commands defined in this module say it this way


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
) -> None:
    """Which tasks can run here (models, judges, reference sets), with the fix for each that cannot;
    the options are score's, so a configuration can be checked before scoring with it."""
    from .pipelines.readiness import readiness

    options.apply_context(model, references, device, precision, offline, vlm_base_url, vlm_model, vlm_role, vlm_concurrency, vlm_api_key_env)

    everything = readiness()
    shown = [e for e in everything if not (only_missing and e.ready)]
    stdout.print(readiness_table(shown, f"tasks ready here: {sum(e.ready for e in everything)} of {len(everything)}"))


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
        from .tasks.parity_docs import explain as explain_task

        try:
            print(explain_task(explain), end="")
        except UnknownIdError as exc:
            _fail(str(exc))
        return

    groups = sorted({t.group for t in TASKS})
    if group is not None and group not in groups:
        from .core.registry import UnknownIdError

        _fail(f"{UnknownIdError('group', group, groups)} Groups: {', '.join(groups)}")
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
        status = "[green]implemented[/green]" if t.implemented else "[yellow]not implemented[/yellow]"
        table.add_row(t.id, t.name, t.group, t.method, ", ".join(t.needs) or "—", status)
    stdout.print(table)


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


from .commands.calibrate import calibrate_command  # noqa: E402  (commands defined in their own modules)
from .commands.compare import compare_command  # noqa: E402
from .commands.report import report_command  # noqa: E402
from .commands.score import score_command  # noqa: E402
from .commands.serve import serve_command  # noqa: E402

app.command("score")(score_command)
app.command("serve")(serve_command)
app.command("calibrate")(calibrate_command)
app.command("compare")(compare_command)
app.command("report")(report_command)


references_app = typer.Typer(no_args_is_help=True, help="Reference sets (ESC-50, OpenMIC-2018, GTZAN) and their indexes.")
app.add_typer(references_app, name="references")


@references_app.command("build")
def references_build(
    references: list[str] = typer.Option([], "--references", help="name=/path (repeatable); default: MMVERIFY_REFERENCES."),
    model: list[str] = typer.Option([], "--model", help="audio_text=backend\\[@path] to index with (default: clap-hf)."),
    profile: list[str] = typer.Option(
        ["mmmg"], "--profile", help="Build the indexes this scoring profile reads (mmmg: zero-padded clips, strict: "
        "repeat-padded); repeatable.",
    ),
) -> None:
    """Embed every configured reference set once, before scoring (the first ESC-50 build takes
    minutes on a CPU; done here it cannot make the first score rows time out)."""
    from .models.hub import get_hub
    from .pipelines.context import ScoringContext, install
    from .references.sets import ENV_VAR, SETS, parse_references, reference_set

    try:
        context = ScoringContext(models=model, references=references)
    except ValueError as exc:
        _fail(str(exc))
    install(context)
    try:
        configured = parse_references(context.settings.get(ENV_VAR, ""))
    except (ValueError, KeyError) as exc:
        _fail(str(exc))
    if not configured:
        _fail(f"no reference sets configured: pass --references name=/path or set {ENV_VAR} (sets: {', '.join(SETS)})")
    missing = [f"{name}={root}" for name, root in configured.items() if not Path(root).is_dir()]
    if missing:
        _fail(f"reference folder not found: {', '.join(missing)}")
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
    from .models.base import DownloadError
    from .models.catalog import BACKEND_INFO, BACKEND_REGISTRY

    for name in names:
        if name not in BACKEND_INFO:
            from .core.registry import UnknownIdError

            _fail(str(UnknownIdError("model backend", name, list(BACKEND_INFO))))
        try:
            path = BACKEND_REGISTRY.get(name)(source=None).fetch()
        except DownloadError as exc:
            _fail(f"{name}: {exc}")
        except Exception as exc:
            _fail(f"{name}: could not fetch ({type(exc).__name__}: {exc})")
        console.print(f"{name}: ready at {path}")


@app.command("demo")
def demo_command(
    out: str = typer.Option("runs/demo", "--out", "-o", metavar="PATH", help="Where to write the demo media and results."),
) -> None:
    """Generate a small example manifest (synthetic images and responses) and score it."""
    from .demo import write_demo

    folder = output_folder(out)
    manifest = write_demo(folder)
    console.print(f"wrote example manifest {manifest}", highlight=False, markup=False, soft_wrap=True)
    from .pipelines.score import ScoreConfig

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run_score_job(ScoreConfig(manifest=manifest, out=folder / "run", timeout=60.0), quiet=False)


def main() -> None:  # pragma: no cover
    from .core.exits import freeze_at_exit
    from .core.stacks import dump_stacks_on_sigusr1

    dump_stacks_on_sigusr1()  # kill -USR1 PID: where a long or stuck run is, without stopping it
    freeze_at_exit()  # a command that loaded models ends a second sooner
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
