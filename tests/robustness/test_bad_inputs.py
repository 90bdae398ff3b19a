"""Every kind of bad input ends as one typed row; the run completes and memory stays bounded."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robustness.corpus import all_cases, write_corpus


def test_the_corpus_is_large_and_named_uniquely():
    names = [case.name for case in all_cases()]
    assert len(names) >= 40 and len(set(names)) == len(names)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory) -> tuple[list[dict], list, int]:
    folder = tmp_path_factory.mktemp("corpus")
    manifest, cases = write_corpus(folder)
    out = folder / "out"
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out),
               "--data-root", str(folder), "--workers", "2", "--timeout", "120", "-q"]  # fmt: skip
    process = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return rows, cases, peak_kib


def test_each_bad_input_gets_its_typed_outcome(corpus_run):
    rows, cases, _ = corpus_run
    assert len(rows) == len(cases), "one row per manifest line, none lost"
    problems = []
    for row, case in zip(rows, cases):
        if row["status"] != case.status:
            problems.append(f"{case.name}: status {row['status']} ({row.get('error') or row.get('reason')})")
            continue
        if case.status == "error" and row["error"]["code"] != case.code:
            problems.append(f"{case.name}: error {row['error']}")
        if case.status == "scored":
            if case.code is not None and (row["reason"] != case.code or row["score"] != 0.0):
                problems.append(f"{case.name}: scored {row['score']} reason {row['reason']}")
            if case.code is None and row["reason"] is not None and row["reason"] != "silent_audio":
                problems.append(f"{case.name}: unexpected reason {row['reason']} ({row['evidence']})")
    assert not problems, "\n".join(problems)


def test_no_scorer_crashes_and_memory_stays_bounded(corpus_run):
    rows, _, peak_kib = corpus_run
    assert not [r for r in rows if r["status"] == "error" and r["error"]["code"] in ("internal_error", "worker_crashed", "timeout")]
    assert peak_kib < 1_500_000, f"peak RSS {peak_kib / 1024:.0f} MiB"
