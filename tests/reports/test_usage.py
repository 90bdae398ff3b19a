"""A run's judge usage in the HTML page, the Markdown report and the terminal: the same rows, with
unknown token counts shown as unknown and partial ones as partial."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from mmverify.reports import render_html
from mmverify.reports.rundata import load_run
from mmverify.reports.usage import usage_html, usage_markdown, usage_rows, usage_table
from tests.reports.test_report_compare import write_run

HOSTILE = "<script>alert(1)</script>@http://127.0.0.1:1/v1"


def _counts(requests: int, hits: int, reported: int, prompt: int | None, completion: int | None) -> dict:
    return {"requests": requests, "replies": requests, "failures": 0, "retries": 1, "cache_hits": hits,
            "prompt_tokens": prompt, "completion_tokens": completion, "tokens_reported_replies": reported}  # fmt: skip


SECTION = {
    "judges": {
        "qwen@http://127.0.0.1:8000/v1": _counts(12, 3, 12, 12000, 340),
        HOSTILE: _counts(4, 0, 0, None, None),
        "gemini@https://example.invalid/v1": _counts(5, 0, 2, 900, 20),
    },
    "roles": {"default": "qwen@http://127.0.0.1:8000/v1", "spatial": "qwen@http://127.0.0.1:8000/v1", "ocr": HOSTILE},
    "total": _counts(21, 3, 14, 12900, 360),
}


def test_rows_name_roles_and_say_what_is_unknown() -> None:
    rows = {row[0]: row for row in usage_rows({"judge_usage": SECTION})}
    assert rows["qwen@http://127.0.0.1:8000/v1"] == ["qwen@http://127.0.0.1:8000/v1", "default, spatial", "12", "3", "1", "0", "12,000", "340"]
    assert rows[HOSTILE][1] == "ocr" and rows[HOSTILE][6:] == ["–", "–"]  # no reply reported usage: unknown
    assert rows["gemini@https://example.invalid/v1"][6] == "900 (2 of 5 replies)"
    assert rows["total"][2] == "21"
    assert usage_rows({}) == [] and usage_rows({"judge_usage": {"judges": {}, "roles": {}, "total": {}}}) == []


def test_html_section_is_escaped_and_only_there_when_judges_were_asked(tmp_path: Path) -> None:
    text = usage_html({"judge_usage": SECTION})
    assert '<section id="judges">' in text and "<script>" not in text and "&lt;script&gt;" in text
    assert usage_html({}) == ""
    run = write_run(tmp_path / "run", 0.5, 1.0)
    assert 'id="judges"' not in render_html(load_run(run))
    summary = json.loads((run / "summary.json").read_text())
    summary["judge_usage"] = SECTION
    (run / "summary.json").write_text(json.dumps(summary))
    page = render_html(load_run(run))
    assert '<a href="#judges">Judges</a>' in page and '<table id="judge-usage">' in page and "12,000" in page


def test_markdown_and_terminal_tables() -> None:
    markdown = usage_markdown({"judge_usage": SECTION})
    assert "## Judge usage" in markdown and "| qwen@http://127.0.0.1:8000/v1 | default, spatial | 12 | 3 |" in markdown
    assert usage_markdown({}) == "" and usage_table({}) is None
    console = Console(record=True, width=200)
    console.print(usage_table({"judge_usage": SECTION}))
    shown = console.export_text()
    assert "judge usage" in shown and "900 (2 of 5 replies)" in shown and HOSTILE in shown
