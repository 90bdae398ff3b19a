"""docs/PARITY.md, the parity entries and the task catalog agree; every named evidence test exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmverify.cli import app
from mmverify.tasks.base import PROFILES
from mmverify.tasks.catalog import CATALOG
from mmverify.tasks.parity import COMMITS, ENTRIES, STATUSES, entries
from mmverify.tasks.parity_docs import explain, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_every_catalog_task_has_exactly_one_entry():
    tasks = [entry.task for entry in ENTRIES]
    assert len(tasks) == len(set(tasks))
    assert set(tasks) == set(CATALOG)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.task)
def test_entries_are_well_formed_and_their_evidence_exists(entry):
    assert entry.status in STATUSES
    assert entry.official_file in COMMITS and ":" in entry.official or entry.status == "not verifiable"
    assert entry.module.startswith("mmverify.tasks.")
    assert entry.evidence, "every entry names the tests that prove it"
    for test in entry.evidence:
        assert (ROOT / test.split("::")[0]).is_file(), test
    for deviation in entry.deviations:
        assert deviation.profile in (*PROFILES, "both") and deviation.rule and deviation.reason


def test_parity_document_is_generated_from_the_entries():
    document = ROOT / "docs" / "PARITY.md"
    assert document.read_text(encoding="utf-8") == markdown(), "regenerate: python -m mmverify.tasks.parity > docs/PARITY.md"
    for task in CATALOG:
        assert f"| `{task}` |" in document.read_text(encoding="utf-8")


def test_explain_names_source_status_and_both_profiles():
    for task, entry in entries().items():
        text = explain(task)
        assert entry.official in text and f"status (profile mmmg): {entry.status}" in text
        assert "profile mmmg:" in text and "profile strict:" in text


def test_tasks_explain_command():
    result = CliRunner().invoke(app, ["tasks", "--explain", "i_object_exclude"])
    assert result.exit_code == 0 and "IObjectExclude" in result.output
    wrong = CliRunner().invoke(app, ["tasks", "--explain", "i_object_exlude"])
    assert wrong.exit_code == 2 and "i_object_exclude" in wrong.output  # did you mean
