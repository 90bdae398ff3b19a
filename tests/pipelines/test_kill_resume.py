"""A real ``mmverify score`` process killed with SIGKILL at random points, again and again, resumes
to exactly the file an uninterrupted run writes: nothing lost, nothing duplicated."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import save_png, scene, write_manifest

ITEMS = 40


def _manifest(tmp_path: Path) -> Path:
    lines = []
    for i in range(ITEMS):
        image = scene(400, 400, seed=i)
        image[:40], image[-40:], image[:, :40], image[:, -40:] = (0, 128, 0), (0, 128, 0), (0, 128, 0), (0, 128, 0)
        save_png(tmp_path / f"g{i}.png", image)
        lines.append({"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": f"g{i}.png"}]})
    return write_manifest(tmp_path / "m.jsonl", lines)


def _score(manifest: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out), "--workers", "2", "-q"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _kill_after(manifest: Path, out: Path, rows: int) -> bool:
    """Start a run and SIGKILL it once the file holds ``rows`` more complete rows; False if it finished first."""
    results = out / "results.jsonl"
    target = _lines(results) + rows
    process = _score(manifest, out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if _lines(results) >= target:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            return True
        time.sleep(0.002)
    process.wait(timeout=30)
    return False


@pytest.mark.slow
def test_repeated_sigkills_at_random_points_then_resume(tmp_path: Path):
    manifest = _manifest(tmp_path)
    reference = tmp_path / "reference"
    assert _score(manifest, reference).wait(timeout=240) == 0
    expected = (reference / "results.jsonl").read_bytes()

    rng = random.Random(7)
    out = tmp_path / "killed"
    kills = 0
    for _ in range(8):
        if _lines(out / "results.jsonl") >= ITEMS - 3:
            break
        kills += _kill_after(manifest, out, rng.randint(1, 4))
        partial = (out / "results.jsonl").read_bytes()
        assert expected.startswith(partial[: partial.rfind(b"\n") + 1]), "complete rows are a prefix of the reference"
    assert kills >= 3, "the run should have been interrupted several times"
    assert _score(manifest, out).wait(timeout=240) == 0
    assert (out / "results.jsonl").read_bytes() == expected


def test_a_kill_mid_run_resumes_to_the_same_file(tmp_path: Path):
    manifest = _manifest(tmp_path)
    reference = tmp_path / "reference"
    assert _score(manifest, reference).wait(timeout=240) == 0
    for attempt in range(3):  # a busy machine may finish the run before the kill lands
        out = tmp_path / f"killed{attempt}"
        if _kill_after(manifest, out, 2) and _lines(out / "results.jsonl") < ITEMS:
            break
    else:
        raise AssertionError("could not interrupt the run part-way in three attempts")
    assert _score(manifest, out).wait(timeout=240) == 0
    assert (out / "results.jsonl").read_bytes() == (reference / "results.jsonl").read_bytes()
