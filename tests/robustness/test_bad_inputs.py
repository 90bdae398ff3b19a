"""Every kind of bad input ends as one typed row; the run completes and memory stays bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmverify.pipelines.results import ResultsFile, make_row
from tests.conftest import save_png, scene
from tests.robustness.corpus import INSTRUCTIONS, all_cases, write_corpus, write_instructions


def test_the_corpus_is_large_and_named_uniquely():
    names = [case.name for case in all_cases()]
    assert len(names) >= 40 and len(set(names)) == len(names)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory) -> tuple[list[dict], list, int]:
    folder = tmp_path_factory.mktemp("corpus")
    manifest, cases = write_corpus(folder)
    out = folder / "out"
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out),
               "--data-root", str(folder), "--instructions", str(folder / INSTRUCTIONS),
               "--workers", "2", "--timeout", "120", "-q"]  # fmt: skip
    # The peak of this run's processes alone, measured by a small launcher: on Linux a process
    # forked from this test session starts with the session's resident memory, which its peak
    # (and RUSAGE_CHILDREN) would count -- the more tests ran before, the higher.
    launcher = "import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:]); _, s, u = os.wait4(p.pid, 0); print(u.ru_maxrss); sys.exit(os.waitstatus_to_exitcode(s))"
    environment = {**os.environ, "MMVERIFY_CACHE_DIR": str(folder / "cache")}  # nothing earlier tests cached
    process = subprocess.run([sys.executable, "-c", launcher, *command], capture_output=True, text=True, timeout=600, env=environment)
    assert process.returncode == 0, process.stderr[-3000:]
    peak_kib = int(process.stdout.split()[-1])
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


# -- one unusable line among good ones: scored alone, resumable, nothing lost -----------------------

GOOD = 6  # good lines before the unusable ones


def _good_lines(folder: Path) -> list[str]:
    save_png(folder / "g.png", scene(60, 60))
    return [
        json.dumps({"task": "i_structure", "instance": {"order": ["it"]}, "parts": [{"type": "image", "path": "g.png"}, {"type": "text", "text": f"caption {i}"}]})
        for i in range(GOOD)
    ]


def _unusable_lines() -> list[tuple[str, str]]:
    """(raw line, expected error code) for every value the decoder accepts but the pipeline cannot use."""
    structure = '{"task": "i_structure", "instance": {"order": ["t"]%s}, "parts": [{"type": "text", "text": "hi"}]%s}'
    return [
        (structure % ("", ', "instance_id": "i\\udcff"'), "malformed_line"),
        (structure % ("", ', "sample": ' + "7" * 4400), "malformed_line"),
        (structure % (', "x": NaN', ""), "invalid_instance"),
        (structure % (', "x": -Infinity', ""), "invalid_instance"),
        (structure % (', "x": 1e999', ""), "invalid_instance"),
        (structure % (', "x": "\\ud800"', ""), "invalid_instance"),
        ('{"task": "i_format_border", "instance_id": "i_format_border/' + "1" * 5000 + '", "parts": []}', "unknown_instance"),
    ]


def _score(manifest: Path, out: Path, instructions: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out),
               "--instructions", str(instructions), "--timeout", "120", "-q", *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def mixed_manifest(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """GOOD good lines, every unusable line, then one more good line; returns (manifest, instructions, codes)."""
    instructions = write_instructions(tmp_path)
    unusable = _unusable_lines()
    lines = _good_lines(tmp_path) + [line for line, _ in unusable] + [_good_lines(tmp_path)[0].replace("caption 0", "last")]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest, instructions, [code for _, code in unusable]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_unusable_lines_cost_one_row_each_and_keep_every_other_row(mixed_manifest, tmp_path: Path, workers: str):
    manifest, instructions, codes = mixed_manifest
    process = _score(manifest, tmp_path / "out", instructions, "--workers", workers)
    assert process.returncode == 0, process.stderr[-3000:]
    rows = _rows(tmp_path / "out")
    assert [r["line"] for r in rows] == list(range(1, GOOD + len(codes) + 2)), "one row per line, in manifest order"
    assert all(r["status"] == "scored" and r["score"] == 1.0 for r in rows[:GOOD] + rows[-1:])
    assert [r["error"]["code"] for r in rows[GOOD:-1]] == codes
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_run_stopped_before_an_unusable_line_resumes_past_it(mixed_manifest, tmp_path: Path):
    """Cut the results back to just before the first unusable line (a run killed there): the
    resumed run writes the missing rows and completes; a further run writes nothing."""
    manifest, instructions, codes = mixed_manifest
    out = tmp_path / "out"
    assert _score(manifest, out, instructions).returncode == 0
    complete = (out / "results.jsonl").read_text(encoding="utf-8")
    kept = "".join(complete.splitlines(keepends=True)[:GOOD])
    (out / "results.jsonl").write_text(kept, encoding="utf-8")
    resumed = _score(manifest, out, instructions)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (out / "results.jsonl").read_text(encoding="utf-8") == complete
    again = _score(manifest, out, instructions)
    assert again.returncode == 0 and (out / "results.jsonl").read_text(encoding="utf-8") == complete
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["written"] == 0 and summary["run"]["skipped_done"] == GOOD + len(codes) + 1


def test_a_piped_manifest_is_scored(tmp_path: Path):
    """``head -n N m.jsonl | mmverify score /dev/stdin``: the progress bar must not read the pipe
    before the scorer does, and relative media paths resolve from the working directory."""
    lines = _good_lines(tmp_path)
    command = [sys.executable, "-m", "mmverify.cli", "score", "/dev/stdin", "--out", "piped"]  # progress bar on
    process = subprocess.run(command, input="\n".join(lines[:5]) + "\n", capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    rows = _rows(tmp_path / "piped")
    assert [(r["line"], r["status"], r["score"]) for r in rows] == [(i, "scored", 1.0) for i in range(1, 6)]


def test_planning_failure_costs_one_internal_error_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Whatever goes wrong while planning a line becomes that line's row; the lines around it plan."""
    from mmverify.pipelines import plan as plan_module

    planner = plan_module.Planner(manifest_dir=tmp_path)
    real = plan_module.task_info

    def flaky(task_id: str):  # type: ignore[no-untyped-def]
        if task_id == "a_structure":
            raise RuntimeError("boom")
        return real(task_id)

    monkeypatch.setattr(plan_module, "task_info", flaky)
    lines = ['{"task": "i_structure", "instance": {"order": ["t"]}, "parts": []}',
             '{"task": "a_structure", "instance": {"order": ["t"]}, "parts": []}']  # fmt: skip
    first, second = planner.plan(1, lines[0]), planner.plan(2, lines[1])
    assert isinstance(first, plan_module.WorkItem)
    assert second["status"] == "error" and second["error"]["code"] == "internal_error" and "boom" in second["error"]["message"]


def test_rows_echoing_unpaired_surrogates_are_written_with_a_visible_replacement(tmp_path: Path):
    row = make_row(task="i\udcffx", instance_id="\ud800/1", sample=0, model=None, key="k", line=1, verifier=None,
                   error_code="unknown_task", error_message="no task 'i\udcffx'")  # fmt: skip
    with ResultsFile(tmp_path / "results.jsonl") as results:
        results.append([row])
    (written,) = ResultsFile(tmp_path / "results.jsonl").load()
    assert written["task"] == "i\ufffdx" and written["instance_id"] == "\ufffd/1"
    assert written["error"]["message"] == "no task 'i\ufffdx'"
