"""summary.json counts what the run's judges did: a cold run sends each distinct question once, a
rerun with the warm reply cache sends none and serves them all from the cache -- in one process
and with worker processes, whose counts travel to the parent with their rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmverify.models import hub as hub_module
from mmverify.models.judge_usage import judge_identity
from mmverify.pipelines.score import ScoreConfig, run_score
from tests.conftest import save_png, scene, write_manifest
from tests.vlm_server import MODEL, VLMServer, always, vlm_env, vlm_server  # noqa: F401  (fixtures)

ITEMS = 4  # one distinct question per item (its own object and image)
TOKENS = {"prompt_tokens": 17, "completion_tokens": 4, "total_tokens": 21}


def _manifest(folder: Path) -> Path:
    lines = []
    for i in range(ITEMS):
        save_png(folder / f"g{i}.png", scene(32, 32, seed=i))
        lines.append({"task": "i_object_attribute", "instance": {"object": f"object {i}"}, "parts": [{"type": "image", "path": f"g{i}.png"}]})
    return write_manifest(folder / "manifest.jsonl", lines)


def _usage(manifest: Path, out: Path, workers: int) -> dict:
    outcome = run_score(ScoreConfig(manifest=manifest, out=out, workers=workers, timeout=120.0))
    assert outcome.errors == 0, (out / "results.latest.jsonl").read_text()
    written = json.loads(outcome.summary_path.read_text(encoding="utf-8"))
    assert written["judge_usage"] == outcome.summary["judge_usage"]
    return written["judge_usage"]


@pytest.mark.parametrize(
    "workers, reported", [(1, True), (2, True), (1, False)], ids=["1-worker", "2-workers", "no-usage-reported"]
)
def test_cold_then_warm_cache(tmp_path: Path, vlm_env: VLMServer, monkeypatch: pytest.MonkeyPatch, workers: int, reported: bool):  # noqa: F811
    monkeypatch.setattr(hub_module, "_HUB", None)  # a fresh hub: judges configured by vlm_env
    vlm_env.script(always("I looked.\nAnswer: Yes"))
    vlm_env.usage = TOKENS if reported else None
    manifest = _manifest(tmp_path)
    identity = judge_identity(MODEL, vlm_env.url)

    cold = _usage(manifest, tmp_path / "cold", workers)
    assert vlm_env.count == ITEMS
    assert cold["roles"]["default"] == identity and list(cold["judges"]) == [identity]
    expected_tokens = (ITEMS * 17, ITEMS * 4, ITEMS) if reported else (None, None, 0)
    assert cold["judges"][identity] == {
        "requests": ITEMS, "replies": ITEMS, "failures": 0, "retries": 0, "cache_hits": 0,
        "prompt_tokens": expected_tokens[0], "completion_tokens": expected_tokens[1], "tokens_reported_replies": expected_tokens[2],
    }  # fmt: skip
    assert cold["total"] == cold["judges"][identity]

    warm = _usage(manifest, tmp_path / "warm", workers)  # another folder: every item scored again
    assert vlm_env.count == ITEMS  # nothing new on the wire
    assert warm["judges"][identity] == {
        "requests": 0, "replies": 0, "failures": 0, "retries": 0, "cache_hits": ITEMS,
        "prompt_tokens": None, "completion_tokens": None, "tokens_reported_replies": 0,
    }  # fmt: skip


def test_a_run_without_judges_reports_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BASE_URL", "MODEL"):
        monkeypatch.delenv(f"MMVERIFY_VLM_{name}", raising=False)
    save_png(tmp_path / "g.png", scene(32, 32, seed=1))
    line = {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "g.png"}]}
    usage = run_score(ScoreConfig(manifest=write_manifest(tmp_path / "m.jsonl", [line]), out=tmp_path / "out")).summary["judge_usage"]
    assert usage["judges"] == {} and usage["roles"] == {} and usage["total"]["requests"] == 0
