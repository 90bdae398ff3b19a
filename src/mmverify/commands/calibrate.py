"""``mmverify calibrate RUN --labels LABELS --out DIR``: thresholds fitted on human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import console as stderr
from .common import fail, os_problem, output_folder, stdout


def _components(items: list[str]) -> dict[str, str]:
    mapping = {}
    for item in items:
        task, sep, name = item.partition("=")
        if not sep or not task or not name:
            fail(f"--component must look like task=component, got {item!r}")
        mapping[task] = name
    return mapping


def calibrate_command(
    results: Path = typer.Argument(..., exists=True, help="A `mmverify score` output folder (its results.latest.jsonl is read) or a results file."),
    labels: Path = typer.Option(..., exists=True, dir_okay=False, help="Human labels (CSV or JSONL)."),
    out: str = typer.Option(..., "--out", "-o", metavar="PATH", help="Where thresholds.json, metrics.json and report.html go."),
    component: list[str] = typer.Option([], help="task=component to threshold instead of the score (repeatable)."),
    direction: str = typer.Option(">", help="'>' (pass above), '<' (pass below) or 'auto'."),
    objective: str = typer.Option("agreement", help="agreement, balanced_accuracy, youden or f1."),
    folds: int = typer.Option(5, min=2, help="Cross-validation folds (grouped by instruction)."),
    pairs: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="Preference pairs for pairwise accuracy."),
    tie_policy: str = typer.Option("half", help="Pairs with equal scores: strict, half or epsilon."),
    epsilon: float = typer.Option(0.0, min=0.0, help="Tie band for --tie-policy epsilon."),
    min_matched: int = typer.Option(10, min=0, help="Fail unless this many labelled items (and pairs) match a scored row; all of them when fewer."),
    label_kind: str = typer.Option("binary", help="Label values: binary (0/1 or true/false) or three-way (0/1/2: two thresholds; score --thresholds passes verdict 2)."),
    manifest: Optional[Path] = typer.Option(None, exists=True, dir_okay=False, help="The scored manifest, for thumbnails in the report (default: the one the run folder records)."),
) -> None:
    """Fit per-task thresholds on human labels; report in-sample and cross-validated agreement."""
    from ..calibration.fit import OBJECTIVES
    from ..calibration.labels import LABEL_KINDS
    from ..calibration.pairwise import TIE_POLICIES
    from ..calibration.run import CalibrationConfig, run_calibration
    from ..calibration.terminal import print_calibration

    out_folder = output_folder(out)
    if direction not in (">", "<", "auto"):
        fail("--direction must be '>', '<' or 'auto'")
    if objective not in OBJECTIVES:
        fail(f"--objective must be one of {', '.join(OBJECTIVES)}")
    if tie_policy not in TIE_POLICIES:
        fail(f"--tie-policy must be one of {', '.join(TIE_POLICIES)}")
    if epsilon and tie_policy != "epsilon":  # else it would be ignored without a word
        fail(f"--epsilon is the tie band of --tie-policy epsilon, not of {tie_policy}: add --tie-policy epsilon")
    if label_kind not in LABEL_KINDS:
        fail(f"--label-kind must be one of {', '.join(LABEL_KINDS)}")
    try:
        config = CalibrationConfig(
            results=results, labels=labels, out=out_folder, components=_components(component), direction=direction,
            objective=objective, folds=folds, pairs=pairs, tie_policy=tie_policy, epsilon=epsilon,
            min_matched=min_matched, label_kind=label_kind, manifest=manifest,
        )  # fmt: skip
        metrics = run_calibration(config)
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:  # an --out that cannot be created or written
        fail(os_problem(exc))
    print_calibration(metrics, stdout, stderr)
    stderr.print(f"wrote {out_folder / 'thresholds.json'}, {out_folder / 'metrics.json'}, {out_folder / 'report.html'}", highlight=False, markup=False, soft_wrap=True)
