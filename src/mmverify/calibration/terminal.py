"""What ``calibrate`` prints: how labels and pairs matched, per-task agreement, pairwise accuracy."""

from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .pairwise import describe_policy


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _fmt_ci(ci: list[float] | None) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def matching_line(what: str, matching: Mapping[str, Any]) -> str:
    """``labels: 78 of 80 matched, 2 unmatched (2 no results row has this instance_id)``."""
    line = f"{what}: {matching['matched']} of {matching['total']} matched, {matching['unmatched']} unmatched"
    reasons = ", ".join(f"{entry['count']} {entry['meaning']}" for entry in matching["reasons"].values())
    return f"{line} ({reasons})" if reasons else line


def _threshold_cell(result: Mapping[str, Any]) -> str:
    three = result.get("three_way")
    if three:  # labels 0/1/2: both cuts
        return f"{three['low']:.3f}/{three['high']:.3f}"
    return _fmt((result.get("fit") or {}).get("threshold"))


def agreement_table(metrics: Mapping[str, Any]) -> Table:
    caption = "agreement in-sample; CV: k-fold cross-validated; LOIO: leave one instruction out"
    table = Table(title="calibration", caption=caption)
    table.add_column("task", overflow="fold", min_width=12)  # a long task id wraps; the numbers keep their width
    for column in ("n", "threshold", "agreement", "CV", "LOIO", "disagree"):
        table.add_column(column, justify="right", no_wrap=True)
    for task, result in metrics["tasks"].items():
        cv = result.get("cv") or {}
        disagreements = str(len(result["disagreements"])) if "disagreements" in result else "–"
        table.add_row(
            escape(task), str(result["n"]), _threshold_cell(result), _fmt(result.get("agreement")),
            _fmt(cv.get("kfold_agreement")), _fmt(cv.get("loio_agreement")), disagreements,
        )  # fmt: skip
    return table


def pairwise_table(pairwise: Mapping[str, Any]) -> Table:
    policy = describe_policy(pairwise["policy"], pairwise.get("epsilon"))
    table = Table(title="pairwise accuracy", caption=f"tie policy {policy}")
    table.add_column("task", overflow="fold", min_width=12)  # a long task id wraps; the numbers keep their width
    for column in ("pairs", "accuracy", "95% CI"):
        table.add_column(column, justify="right", no_wrap=True)
    for task, entry in pairwise["tasks"].items():
        table.add_row(escape(task), str(entry["pairs"]), _fmt(entry["accuracy"]), _fmt_ci(entry["ci95"]))
    overall = pairwise.get("overall")
    if overall:
        table.add_row("[bold]all pairs[/bold]", str(overall["pairs"]), _fmt(overall["accuracy"]), _fmt_ci(overall["ci95"]))
    return table


def print_calibration(metrics: Mapping[str, Any], stdout: Console, stderr: Console) -> None:
    """Tables on ``stdout``; matching counts on ``stderr`` (beside the other progress lines)."""
    stderr.print(matching_line("labels", metrics["labels"]["matching"]), markup=False, highlight=False)
    pairwise = metrics.get("pairwise")
    if pairwise:
        stderr.print(matching_line("pairs", pairwise["matching"]), markup=False, highlight=False)
    stdout.print(agreement_table(metrics))
    if pairwise:
        stdout.print(pairwise_table(pairwise))
