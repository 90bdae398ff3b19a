"""A real ``mmverify score`` process killed with SIGKILL mid-run resumes to the uninterrupted file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


from tests.conftest import save_png, scene, write_manifest


def _manifest(tmp_path: Path) -> Path:
    lines = []
    for i in range(40):
        image = scene(400, 400, seed=i)
        image[:40], image[-40:], image[:, :40], image[:, -40:] = (0, 128, 0), (0, 128, 0), (0, 128, 0), (0, 128, 0)
        save_png(tmp_path / f"g{i}.png", image)
        lines.append({"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": f"g{i}.png"}]})
    return write_manifest(tmp_path / "m.jsonl", lines)


def _score(manifest: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "mmverify.cli", "score", str(manifest), "--out", str(out), "--workers", "2", "-q"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkill_then_resume_gives_the_same_file(tmp_path: Path):
    manifest = _manifest(tmp_path)
    reference = tmp_path / "reference"
    assert _score(manifest, reference).wait(timeout=240) == 0

    killed = tmp_path / "killed"
    results = killed / "results.jsonl"
    process = _score(manifest, killed)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if results.exists() and results.read_bytes().count(b"\n") >= 5:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    process.wait(timeout=30)
    partial = results.read_bytes().count(b"\n")
    assert 5 <= partial < 40, "the run should have been killed part-way"
    assert _score(manifest, killed).wait(timeout=240) == 0
    assert results.read_bytes() == (reference / "results.jsonl").read_bytes()
