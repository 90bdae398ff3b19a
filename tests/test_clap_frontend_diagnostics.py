"""The per-batch diagnostic of benchmarks/clap_frontend.py, run on the CPU with the tiny CLAP.

On the CPU every batch is done once launched, so whether "the previous batch was done" is known
by construction; the GPU run reads the same row to find where queuing waits for the device."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from tests.models.test_clap import build_tiny_clap  # noqa: E402


def test_batch_steps_reports_every_launched_batch_and_leaves_the_backend_as_it_was(tmp_path: Path):
    from clap_frontend import batch_steps

    from mmverify.models.clap_hf import HFClap

    clap = HFClap(source=str(build_tiny_clap(tmp_path / "clap")), device="cpu", batch_size=4, rows="packed")
    clap.ensure_loaded()
    rng = np.random.default_rng(0)
    clips = [0.1 * rng.standard_normal(48_000).astype(np.float32) for _ in range(10)]  # packed: batches of 4, 4 and 2
    before = clap.embed_audio(clips)

    row = batch_steps(clap, clips)

    steps = re.findall(r"#(\d+): launch [\d.]+ ms \(previous done ([^)]+)\), wait [\d.]+ ms", row)
    assert [index for index, _ in steps] == ["0", "1", "2"]
    assert [done for _, done in steps] == ["-/-", "yes/yes", "yes/yes"]  # nothing before the first; CPU batches end as launched
    assert "pinned blocks" not in row  # no pinned memory without CUDA
    wall, outside = (float(x) for x in re.match(r"(\d+) ms for 10 clips, (-?\d+) outside launches and waits; ", row).groups())
    assert 0 <= outside <= wall
    assert clap._launch_audio == HFClap._launch_audio.__get__(clap)  # its own launch again
    np.testing.assert_array_equal(clap.embed_audio(clips), before)
