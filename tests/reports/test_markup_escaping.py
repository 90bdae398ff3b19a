"""User text (task ids, instance ids, model names, reasons) is text in every table: rich markup
such as ``[/bold]`` prints as written instead of crashing the terminal tables, and in Markdown
reports ``|``, ``<`` and ``>`` cannot add columns or inject HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from mmverify.calibration.terminal import agreement_table, pairwise_table
from mmverify.cli import app
from mmverify.pipelines.report import render_markdown
from mmverify.reports.usage import usage_markdown
from tests.conftest import write_manifest

MARKUP = "i_fmt[/bold][red]x"
HTML = "<script>alert(1)</script>|x"


def _printed(renderable) -> str:
    console = Console(width=400, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_score_and_report_keep_task_ids_with_markup_and_html_as_text(tmp_path: Path):
    manifest = write_manifest(tmp_path / "m.jsonl", [
        {"task": MARKUP, "instance_id": "a/1", "sample": 0, "parts": [{"type": "text", "text": "hi"}]},
        {"task": HTML, "instance_id": "a/<b>2", "sample": 0, "parts": [{"type": "text", "text": "hi"}]},
    ])  # fmt: skip
    run = tmp_path / "run"
    scored = CliRunner().invoke(app, ["score", str(manifest), "--out", str(run)])
    assert scored.exception is None or isinstance(scored.exception, SystemExit), scored.exception  # no MarkupError
    assert MARKUP in scored.output and "<script>alert(1)</script>|x" in scored.output  # the summary table, as written
    assert (run / "summary.json").is_file()
    reported = CliRunner().invoke(app, ["report", str(run)])
    assert reported.exit_code == 0, reported.output
    markdown = (run / "report.md").read_text()
    assert "<script>" not in markdown and "&lt;script&gt;alert(1)&lt;/script&gt;\\|x" in markdown
    task_rows = [line for line in markdown.splitlines() if line.startswith("| ") and "×" in line]
    assert len(task_rows) == 2
    for line in task_rows:  # 9 columns: 10 unescaped pipes
        assert len(re.findall(r"(?<!\\)\|", line)) == 10, line


def test_markdown_cells_escape_what_markdown_or_html_would_interpret():
    from mmverify.pipelines.report import markdown_cell

    assert markdown_cell("a|b") == "a\\|b"
    assert markdown_cell("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;"
    assert markdown_cell("a & b\nc") == "a &amp; b c"
    assert markdown_cell("[link](http://x) *em* `code` \\") == "\\[link\\](http://x) \\*em\\* \\`code\\` \\\\"
    assert markdown_cell("i_format_border") == "i_format_border"  # ids stay readable
    summary = {
        "overall": {"mean": 0.5, "tasks_scored": 1, "tasks_total": 1}, "n": 1, "n_error": 0,
        "groups": {"g|<b>": {"mean": 0.5, "tasks_scored": 1, "tasks_total": 1}},
        "tasks": {"t": {"group": "g|<b>", "mean": 0.5, "ci95": None, "pass_rate": None, "n": 1, "n_scored": 1, "n_error": 0,
                        "errors": {}, "reasons": {"too <long>|": 1}}},
    }  # fmt: skip
    text = render_markdown(summary)
    assert "<b>" not in text and "<long>" not in text and "g\\|&lt;b&gt;" in text and "too &lt;long&gt;\\|×1" in text


def test_judge_usage_markdown_escapes_model_names():
    summary = {"judge_usage": {"judges": {"m|<i>": {"requests": 1}}, "roles": {"vlm": "m|<i>"}}}
    text = usage_markdown(summary)
    assert "<i>" not in text and "m\\|&lt;i&gt;" in text


def test_calibration_tables_print_task_ids_with_markup():
    metrics = {"tasks": {MARKUP: {"n": 4, "fit": {"threshold": 0.5}, "agreement": 1.0, "cv": {}, "disagreements": []}}}
    assert MARKUP in _printed(agreement_table(metrics))
    pairwise = {"policy": "half", "epsilon": None, "tasks": {MARKUP: {"pairs": 2, "accuracy": 1.0, "ci95": None}}, "overall": None}
    assert MARKUP in _printed(pairwise_table(pairwise))


def test_calibrate_command_prints_a_task_id_with_markup(tmp_path: Path):
    from mmverify.core.types import Check
    from mmverify.pipelines.results import dumps_row, make_row

    rows = [make_row(task=MARKUP, instance_id=f"x/{i}", sample=0, model=None, key=f"k{i}", line=i + 1, verifier="v",
                     check=Check(score=i / 10)) for i in range(6)]  # fmt: skip
    results = tmp_path / "results.jsonl"
    results.write_text("".join(dumps_row(r) + "\n" for r in rows))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"instance_id": f"x/{i}", "label": int(i > 2)}) + "\n" for i in range(6)))
    outcome = CliRunner().invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(tmp_path / "cal")])
    assert outcome.exit_code == 0, outcome.output
    assert MARKUP in outcome.output
