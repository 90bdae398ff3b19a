"""benchmarks/gpu_run.sh, run the way a GPU machine runs it but on tiny workloads on this CPU.

A machine with a GPU is lent to few sessions, for minutes: the script that measures there must
not be found broken then.  Its ``QUICK=1`` mode runs every benchmark of a part on tiny inputs; the
assertions are about what it runs and reports, never about speed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpu_run(part: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    no_wheels = out.parent / "no-wheels"  # this Python has every package: nothing to install
    no_wheels.mkdir(exist_ok=True)
    variables = {**os.environ, "PYTHON": sys.executable, "DEVICE": "cpu", "QUICK": "1", "OUT": str(out), "WHEELS": str(no_wheels), **env}
    return subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu_run.sh"), part], cwd=REPO, env=variables, capture_output=True, text=True
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "part, logs, lines",
    [
        ("models", ["clap_frontend", "whisper_frontend", "clip_models", "dreamsim_batching"], ["torch front end", "alone = in batch"]),
        ("score", ["batched_scoring"], ["mmverify score --workers 1", "together/backend"]),
    ],
)
def test_each_part_runs_every_benchmark_and_leaves_its_log(tmp_path: Path, part: str, logs: list[str], lines: list[str]):
    result = gpu_run(part, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in logs:
        assert f"=== {name} exit 0" in result.stdout
        assert (tmp_path / f"{name}.log").stat().st_size > 0
    for line in lines:
        assert line in result.stdout
    assert (tmp_path / "machine.txt").read_text().strip()


@pytest.mark.slow
def test_a_failing_benchmark_fails_the_part_and_a_missing_package_stops_it_first(tmp_path: Path):
    broken = gpu_run("scoring", tmp_path / "broken", DEVICE="no-such-device")
    assert broken.returncode == 1 and "=== batched_scoring exit 1" in broken.stdout
    assert "error rows" in (tmp_path / "broken" / "batched_scoring.log").read_text()  # not rates of failed rows

    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "dreamsim.py").write_text("raise ImportError('not here')\n")  # as on a machine without it
    missing = gpu_run("models", tmp_path / "missing", PYTHONPATH=str(shadow))
    assert missing.returncode == 1 and "a package the benchmarks need is missing" in missing.stderr
    assert "===" not in missing.stdout  # nothing ran
