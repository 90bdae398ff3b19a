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

    # kill part-way (retry if a busy machine let the run finish before the kill landed)
    for attempt in range(3):
        killed = tmp_path / f"killed{attempt}"
        results = killed / "results.jsonl"
        process = _score(manifest, killed)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if results.exists() and results.read_bytes().count(b"\n") >= 2:
                os.kill(process.pid, signal.SIGKILL)
                break
            time.sleep(0.005)
        process.wait(timeout=30)
        if results.exists() and 2 <= results.read_bytes().count(b"\n") < 40:
            break
    else:
        raise AssertionError("could not interrupt the run part-way in three attempts")
    assert _score(manifest, killed).wait(timeout=240) == 0
    assert results.read_bytes() == (reference / "results.jsonl").read_bytes()
