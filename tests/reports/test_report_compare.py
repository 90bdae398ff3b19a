"""``mmverify report RUN --html --compare OTHER``: the run's page gains the comparison that
``mmverify compare RUN OTHER`` computes (per task and overall, paired bootstrap CIs), printed and
in the page -- which still renders in a real browser without script errors."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from mmverify.commands.report import report_command
from mmverify.core.types import Check
from mmverify.pipelines.compare import compare_runs
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.summary import summarize
from mmverify.reports import render_html, write_html_report
from mmverify.reports.html import compare_with
from mmverify.reports.rundata import load_run

HOSTILE = '<img src=x onerror="alert(1)">'


def _row(task: str, instance: str, score: float | None, line: int) -> dict[str, Any]:
    check = Check(score=score) if score is not None else None
    return make_row(
        task=task, instance_id=instance, sample=0, model="m", key=f"{task}|{instance}", line=line,
        verifier=f"{task}@1:mmmg", check=check, error_code=None if check else "timeout", error_message="slow",
    )  # fmt: skip


def write_run(folder: Path, border: float, structure: float, seed: int = 0) -> Path:
    """Six i_format_border rows at ``border``, four i_structure rows at ``structure``, one error row."""
    rows = [_row("i_format_border", f"b/{i}", border, i + 1) for i in range(6)]
    rows += [_row("i_structure", f"s/{i}", structure if i % 2 else 1.0, i + 7) for i in range(4)]
    rows.append(_row("i_structure", "s/9", None, 11))
    folder.mkdir(parents=True)
    (folder / "results.latest.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows), encoding="utf-8")
    summary = summarize(rows, config={"manifest": None}, seed=seed)
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return write_run(tmp_path / "this", 0.5, 0.0, seed=5), write_run(tmp_path / HOSTILE.replace("/", "_"), 0.8, 0.0)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("report")(report_command)
    app.command("noop")(lambda: None)  # a second command keeps "report" as a sub-command name
    return app


def test_the_page_holds_the_comparison_compare_computes(runs: tuple[Path, Path]) -> None:
    run, other = runs
    comparison = compare_with(run, [other])
    assert comparison == compare_runs([run, other], seed=5)  # the run's own bootstrap seed and aggregation
    text = render_html(load_run(run), comparison=comparison)
    assert '<a href="#compare">Comparison</a>' in text and '<section id="compare">' in text
    assert '<section class="comparison" id="compare-B">' in text and "<h2>B − A</h2>" in text
    border = comparison["comparisons"][0]["tasks"]["i_format_border"]
    assert border["delta"] == pytest.approx(0.3) and border["significant"]
    assert "+0.300" in text and "[+0.300, +0.300]" in text and 'title="95% CI excludes 0">*</span>' in text
    assert f"overall ({comparison['comparisons'][0]['overall']['tasks']} tasks)" in text
    assert "td.delta.up" in text  # the compare page's styles came along
    assert HOSTILE not in text and "&lt;img src=x" in text  # the other run's folder name, escaped
    # the run report itself is all there, before and after
    for section in ('id="overview"', 'id="leaderboard"', 'id="items"', 'id="errors"'):
        assert section in text
    plain = render_html(load_run(run))
    assert 'id="compare' not in plain and "td.delta.up" not in plain and 'href="#compare"' not in plain


def test_several_runs_each_against_this_one(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, other = runs
    third = write_run(tmp_path / "third", 0.5, 1.0)
    page = write_html_report(run, tmp_path / "page.html", compare=[other, third])
    text = page.read_text(encoding="utf-8")
    assert 'id="compare-B"' in text and 'id="compare-C"' in text and "<h2>C − A</h2>" in text
    assert text == write_html_report(run, tmp_path / "again.html", compare=[other, third]).read_text(encoding="utf-8")


def test_command_prints_and_writes_the_comparison(runs: tuple[Path, Path]) -> None:
    run, other = runs
    result = CliRunner().invoke(_app(), ["report", str(run), "--html", "--compare", str(other)])
    assert result.exit_code == 0, result.output
    assert "| i_format_border | image |" in result.stdout and "score differences" in result.stdout
    assert "+0.300*" in result.stdout
    text = (run / "report.html").read_text(encoding="utf-8")
    assert 'id="compare-B"' in text and (run / "leaderboard.csv").is_file()
    assert (run / "report.md").read_text(encoding="utf-8").startswith("# mmverify results")


def test_command_without_compare_matches_the_plain_page(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, _ = runs
    result = CliRunner().invoke(_app(), ["report", str(run), "--html"])
    assert result.exit_code == 0, result.output
    assert (run / "report.html").read_text(encoding="utf-8") == render_html(load_run(run))


def test_unusable_runs_exit_with_a_message(runs: tuple[Path, Path], tmp_path: Path) -> None:
    run, _ = runs
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(_app(), ["report", str(run), "--compare", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "holds neither" in result.output.replace("\n", "")  # (rich wraps lines)
    result = CliRunner().invoke(_app(), ["report", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "summary.json not found" in result.output.replace("\n", "")


@pytest.mark.slow
def test_the_compared_page_renders_in_chromium(runs: tuple[Path, Path], tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no Chromium binary found")
    run, other = runs
    page = write_html_report(run, compare=[other])
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               "--enable-logging=stderr", "--v=0", "--dump-dom", page.resolve().as_uri()]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    dom = done.stdout
    assert 'data-ready="1"' in dom and "data-error" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert not [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert "11 of 11 items" in dom and 'id="compare-B"' in dom and "+0.300" in dom and "<img" not in dom
