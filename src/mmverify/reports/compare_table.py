"""The comparison of runs (:func:`mmverify.pipelines.compare.compare_runs`) as a terminal table,
and a line on how its rows were paired: what ``mmverify compare`` and ``mmverify report
--compare`` print."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def fmt_value(value: float | None, signed: bool = False) -> str:
    """A mean or a difference to 3 decimals (``–`` for none); the HTML comparison uses it too."""
    if value is None:
        return "–"
    return f"{float(value):+.3f}" if signed else f"{float(value):.3f}"


def fmt_interval(ci: Sequence[float] | None, signed: bool = False) -> str:
    return "–" if ci is None else f"[{fmt_value(ci[0], signed)}, {fmt_value(ci[1], signed)}]"


def _delta_cell(entry: Mapping[str, Any]) -> str:
    """The difference, coloured and starred when its interval excludes 0."""
    text = fmt_value(entry.get("delta"), signed=True)
    if not entry.get("significant"):
        return text
    colour = "green" if entry["delta"] > 0 else "red"
    return f"[{colour}]{text}*[/{colour}]"


def _add_comparison_rows(table: Any, comparison: Mapping[str, Any], several: bool) -> None:
    from rich.markup import escape  # task ids are user text: "[/bold]" must print, not parse

    if several:
        table.add_row(f"[bold]{escape(comparison['b'])} − {escape(comparison['a'])}[/bold]")
    for task, entry in comparison["tasks"].items():
        table.add_row(
            escape(task), str(entry["n"]), fmt_value(entry["mean_a"]), fmt_value(entry["mean_b"]), _delta_cell(entry), fmt_interval(entry["ci95"]),
            f"{entry['n_error_a']}/{entry['n_error_b']}", f"{entry['only_a']}/{entry['only_b']}",
        )  # fmt: skip
    overall, errors, unmatched = comparison["overall"], comparison["errors"], comparison["unmatched"]
    table.add_row(
        f"[bold]overall[/bold] ({overall['tasks']} tasks)", str(overall["n"]), fmt_value(overall["mean_a"]), fmt_value(overall["mean_b"]),
        _delta_cell(overall), fmt_interval(overall["ci95"]), f"{errors['a']}/{errors['b']}", f"{unmatched['only_a']}/{unmatched['only_b']}",
        end_section=True,
    )  # fmt: skip


def render_compare_table(result: Mapping[str, Any]) -> Any:
    """A rich table of every comparison: per task and overall (``*``: the 95% CI excludes 0)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    comparisons = result["comparisons"]
    several = len(comparisons) > 1
    runs = ", ".join(f"{escape(r['label'])} = {escape(r['path'])}" for r in result["runs"])
    errors = "error rows scored 0" if result["errors"] == "as_zero" else "pairs with an error row left out"
    caption = (
        f"Δ = {'each run' if several else 'B'} − A, paired by generation; * = 95% CI excludes 0; {errors}; "
        "errors, unpaired: rows of A / of the other run; overall = macro mean over the tasks with an interval (two or more paired instructions)"
    )
    table = Table(title=f"score differences ({runs})", caption=caption, box=box.SIMPLE_HEAD, padding=0, pad_edge=False)
    table.add_column("task", overflow="fold", min_width=12)  # a long task id wraps; the numbers keep their width
    for column in ("n", "mean A", "mean B" if not several else "mean run", "Δ", "95% CI", "errors", "unpaired"):
        table.add_column(column, justify="right", no_wrap=True)
    for comparison in comparisons:
        _add_comparison_rows(table, comparison, several)
    return table


def describe_matching(comparison: Mapping[str, Any]) -> str:
    """One line on how rows were paired and what did not pair."""
    keys = ", ".join(comparison["match_on"])
    names = lambda models: ", ".join(str(m) for m in models)  # noqa: E731
    models = f"models {names(comparison['models_a'])} vs {names(comparison['models_b'])}"
    unmatched = comparison["unmatched"]
    line = (
        f"{comparison['b']} vs {comparison['a']}: paired on ({keys}); {models}; {comparison['matched']} pairs, "
        f"{unmatched['only_a']} rows only in {comparison['a']}, {unmatched['only_b']} only in {comparison['b']}"
    )
    examples = unmatched["examples_only_a"] + unmatched["examples_only_b"]
    return f"{line} (e.g. {'; '.join(examples[:3])})" if examples else line
