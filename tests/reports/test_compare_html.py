"""The ``mmverify compare --html`` page: every task with its difference, the settings, no external
resources, escaped strings and identical bytes for identical inputs."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mmverify.commands.compare import compare_command
from mmverify.pipelines.compare import compare_runs
from mmverify.reports.compare_html import delta_interval_svg, write_compare_html
from tests.pipelines.test_compare import _row as compare_row, _write_run

HOSTILE = '<img src=x onerror="alert(1)">&'
HOSTILE_TASK = f"t{HOSTILE}"
HOSTILE_MODEL = f"m{HOSTILE}"


def _row(task: str, instance: str, score: float | None, model: str) -> dict[str, Any]:
    return compare_row(task, instance, score, model=model)


def _runs(tmp_path: Path) -> list[Path]:
    """Baseline A and run B: i_format_border rises by 0.3 everywhere, the hostile task is unchanged
    (one error row in B), and i_structure has a row only in A."""
    a_rows, b_rows = [], []
    for i in range(6):
        a_rows.append(_row("i_format_border", f"b/{i}", 0.5, "base"))
        b_rows.append(_row("i_format_border", f"b/{i}", 0.8, HOSTILE_MODEL))
        a_rows.append(_row(HOSTILE_TASK, f"h/{i}", 0.25 * (i % 3), "base"))
        b_rows.append(_row(HOSTILE_TASK, f"h/{i}", 0.25 * (i % 3) if i else None, HOSTILE_MODEL))
    a_rows.append(_row("i_structure", "s/0", 1.0, "base"))
    return [_write_run(tmp_path / "a", a_rows), _write_run(tmp_path / "b", b_rows)]


@pytest.fixture
def page(tmp_path: Path) -> tuple[dict[str, Any], str]:
    result = compare_runs(_runs(tmp_path), seed=7)
    path = write_compare_html(result, tmp_path / "out" / "compare.html")
    return result, path.read_text(encoding="utf-8")


def _row_html(text: str, task: str) -> str:
    match = re.search(rf'<tr data-task-row="{re.escape(task)}">(.*?)</tr>', text)
    assert match is not None, task
    return match.group(1)


def test_every_task_is_listed_with_its_difference(page: tuple[dict[str, Any], str]) -> None:
    result, text = page
    tasks = result["comparisons"][0]["tasks"]
    assert set(tasks) == {"i_format_border", HOSTILE_TASK, "i_structure"}
    for task, entry in tasks.items():
        row = _row_html(text, html.escape(task))
        expected = "–" if entry["delta"] is None else f"{entry['delta']:+.3f}"
        assert re.search(rf'<td class="num delta[^"]*">{re.escape(expected)}', row), (task, row)
    border = _row_html(text, "i_format_border")
    assert "+0.300" in border and 'title="95% CI excludes 0">*</span>' in border and "[+0.300, +0.300]" in border
    assert "0.500" in border and "0.800" in border
    hostile = _row_html(text, html.escape(HOSTILE_TASK))
    assert "+0.000" in hostile and "excludes 0" not in hostile and "0/1" in hostile  # the error row in B
    assert "1/0" in _row_html(text, "i_structure")  # unpaired row of A
    overall = result["comparisons"][0]["overall"]
    assert f"overall ({overall['tasks']} tasks)" in text and f"{overall['delta']:+.3f}" in text


def test_page_names_runs_models_and_settings(page: tuple[dict[str, Any], str]) -> None:
    result, text = page
    for run in result["runs"]:
        assert html.escape(run["path"]) in text
    assert "base" in text and "<th>seed</th><td>7</td>" in text
    assert "<th>match rule</th><td>auto</td>" in text and "(apart)" in text


def test_page_fetches_nothing(page: tuple[dict[str, Any], str]) -> None:
    _, text = page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:|//)""", text, re.IGNORECASE)
    assert "<link" not in text and "@import" not in text and "url(" not in text


def test_hostile_names_are_escaped(page: tuple[dict[str, Any], str]) -> None:
    _, text = page
    assert HOSTILE not in text and "<img" not in text
    assert "t&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in text
    assert "m&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in text


def test_same_inputs_give_identical_bytes(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    first = write_compare_html(compare_runs(runs, seed=3), tmp_path / "one.html").read_bytes()
    second = write_compare_html(compare_runs(runs, seed=3), tmp_path / "two.html").read_bytes()
    assert first == second


def test_interval_is_drawn_around_zero() -> None:
    svg = delta_interval_svg(0.25, [0.1, 0.4])
    assert '<line x1="60.0" y1="0"' in svg  # the zero tick is in the middle of the [-1, 1] axis
    assert 'x1="66.0" y1="7.0" x2="84.0"' in svg and 'cx="75.0"' in svg and "#2e8b57" in svg
    assert "#c0392b" in delta_interval_svg(-0.5, [-0.9, -0.1]) and 'x1="0.0" y1="7.0"' in delta_interval_svg(-2.0, [-3.0, 0.5])


def test_command_writes_the_page(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("compare")(compare_command)
    app.command("noop")(lambda: None)  # a second command keeps "compare" as a sub-command name
    a, b = _runs(tmp_path)
    out = tmp_path / "report" / "cmp.html"
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--html", str(out), "--aggregate", "as_zero"])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'data-task-row="i_format_border"' in text and "(as_zero)" in text


@pytest.mark.slow
def test_page_renders_in_chromium(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium binary found")
    page = write_compare_html(compare_runs(_runs(tmp_path)), tmp_path / "compare.html")
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               "--dump-dom", page.resolve().as_uri()]  # fmt: skip
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    assert dom.count("<tr data-task-row=") == 3 and "<img" not in dom
    assert "+0.300" in dom and "<svg" in dom
