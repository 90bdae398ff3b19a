"""The Ray executor (a local 2-CPU Ray instance) writes exactly what the local executors write."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from mmverify.pipelines.score import ScoreConfig, run_score  # noqa: E402
from tests.pipelines.test_score import _config, _rows  # noqa: E402

pytestmark = pytest.mark.slow


def test_ray_results_are_byte_identical_to_local(run_dir, tmp_path):
    run_score(_config(run_dir, tmp_path / "local", workers=1))
    run_score(_config(run_dir, tmp_path / "ray", workers=2, executor="ray"))
    assert (tmp_path / "ray" / "results.jsonl").read_bytes() == (tmp_path / "local" / "results.jsonl").read_bytes()


def test_ray_timeouts_kill_and_replace_actors(slow_manifest, mmmg_instructions, tmp_path):
    out = tmp_path / "out"
    run_score(ScoreConfig(manifest=slow_manifest, out=out, instructions=mmmg_instructions, workers=2, timeout=0.001, executor="ray"))
    assert [r["error"]["code"] for r in _rows(out)] == ["timeout"] * 3
