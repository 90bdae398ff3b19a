"""summary.json: per-task means with cluster-bootstrap CIs, per-group and overall macro means.

Confidence intervals resample *instructions* (all samples of one instruction move together),
percentile method, seeded per task so adding a task never changes another task's interval.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .. import __version__
from ..core.types import MODALITY_GROUPS
from ..data.jsonsafe import replace_surrogates
from ..tasks.catalog import CATALOG

SUMMARY_SCHEMA_VERSION = 1
BOOTSTRAP_RESAMPLES = 2000
# How error rows enter the means: "apart" leaves them out and counts them (the default: a scorer's
# problem is not the generator's failure); "as_zero" scores them 0, as the published MMMG scripts
# do, for side-by-side comparison with the paper's numbers.
AGGREGATIONS: tuple[str, ...] = ("apart", "as_zero")


def cluster_bootstrap_ci(
    clusters: Mapping[str, Sequence[float]],
    *,
    strata: Mapping[str, str] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
    rng: np.random.Generator,
) -> tuple[float, float] | None:
    """Percentile CI of the mean, resampling clusters with replacement.

    With ``strata`` (cluster -> stratum), clusters are resampled within each stratum and the
    statistic is the mean of the stratum means (equal weight per stratum).  None unless every
    stratum (or, without strata, the whole) has two clusters: resampling one only repeats it, and
    a zero-width interval would claim certainty.
    """
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(clusters):
        groups[strata[name] if strata else ""].append(name)
    if not groups or min(len(names) for names in groups.values()) < 2:
        return None
    stratum_stats = []
    for stratum in sorted(groups):
        names = groups[stratum]
        sums = np.array([float(np.sum(clusters[n])) for n in names])
        counts = np.array([len(clusters[n]) for n in names], dtype=np.float64)
        picks = rng.integers(0, len(names), size=(resamples, len(names)))
        stratum_stats.append(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
    stats = np.mean(stratum_stats, axis=0)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _task_rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(task.encode("utf-8"))])


def _counted(rows: Sequence[Mapping[str, Any]], how: str) -> list[tuple[str, float]]:
    """(instance id, score) of the rows that enter the mean under aggregation ``how``."""
    if how == "as_zero":
        return [(str(r["instance_id"]), float(r["score"]) if r.get("status") == "scored" else 0.0) for r in rows]
    return [(str(r["instance_id"]), float(r["score"])) for r in rows if r.get("status") == "scored"]


def task_summary(task: str, rows: Sequence[Mapping[str, Any]], seed: int, how: str = "apart") -> dict[str, Any]:
    info = CATALOG.get(task)
    scored = [r for r in rows if r.get("status") == "scored"]
    counted = _counted(rows, how)
    clusters: dict[str, list[float]] = defaultdict(list)
    for instance_id, value in counted:
        clusters[instance_id].append(value)
    strata = info.strata(clusters) if info is not None else None
    mean = None
    if counted:
        if strata:
            per_source: dict[str, list[float]] = defaultdict(list)
            for name, values in clusters.items():
                per_source[strata[name]].extend(values)
            mean = float(np.mean([np.mean(v) for _, v in sorted(per_source.items())]))
        else:
            mean = float(np.mean([value for _, value in counted]))
    ci = cluster_bootstrap_ci(clusters, strata=strata, rng=_task_rng(seed, task)) if counted else None
    passed = [r["passed"] for r in scored if r.get("passed") is not None]
    return {
        "name": info.name if info else None,
        "group": info.group if info else None,
        "mean": mean,
        "ci95": list(ci) if ci else None,
        "n": len(rows),
        "n_scored": len(scored),
        "n_error": len(rows) - len(scored),
        "n_instances": len(clusters),
        "pass_rate": float(np.mean(passed)) if passed else None,
        "verifiers": sorted({str(r["verifier"]) for r in rows if r.get("verifier")}),
        "reasons": dict(sorted(Counter(r["reason"] for r in scored if r.get("reason")).items())),
        "errors": dict(sorted(Counter(r["error"]["code"] for r in rows if r.get("error")).items())),
    }


def _macro(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def aggregate(rows: Sequence[Mapping[str, Any]], seed: int = 0, how: str = "apart") -> dict[str, Any]:
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATIONS)}, got {how!r}")
    by_task: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_task[str(row.get("task"))].append(row)
    tasks = {task: task_summary(task, by_task[task], seed, how) for task in sorted(by_task)}
    groups = {}
    for group in MODALITY_GROUPS:
        members = [t for t in tasks.values() if t["group"] == group]
        groups[group] = {
            "mean": _macro(t["mean"] for t in members),
            "tasks_scored": sum(t["mean"] is not None for t in members),
            "tasks_total": sum(info.group == group for info in CATALOG.values()),
        }
    task_means = [t["mean"] for t in tasks.values() if t["group"] is not None]
    return {
        "tasks": tasks,
        "groups": groups,
        "overall": {
            "mean": _macro(task_means),
            "mean_of_groups": _macro(g["mean"] for g in groups.values()),
            "tasks_scored": sum(m is not None for m in task_means),
            "tasks_total": len(CATALOG),
        },
        "n": len(rows),
        "n_error": sum(r.get("status") != "scored" for r in rows),
    }


def summarize(
    rows: Sequence[Mapping[str, Any]],
    *,
    config: Mapping[str, Any] | None = None,
    started: datetime | None = None,
    finished: datetime | None = None,
    seed: int = 0,
    aggregate_errors: str = "apart",
) -> dict[str, Any]:
    """The whole summary document; ``by_model`` appears when rows come from several models (rows
    without a model are listed there as ``"None"``; those of unreadable lines make no model of their own)."""
    summary: dict[str, Any] = {"schema": SUMMARY_SCHEMA_VERSION, **aggregate(rows, seed, aggregate_errors)}
    summary["aggregate"] = aggregate_errors
    summary["profiles"] = sorted({_profile_of(r) for r in rows if r.get("verifier")})
    by_model: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:  # rows without a model (a line too broken to name one, say) under "None"
        by_model[str(row.get("model"))].append(row)
    if len({r.get("model") for r in rows if not _unreadable(r)}) > 1:  # a broken line names no model of its own
        summary["by_model"] = {
            name: aggregate(by_model[name], seed, aggregate_errors) for name in sorted(by_model, key=lambda n: (n == "None", n))
        }
    summary["bootstrap"] = {
        "method": "percentile; instructions resampled as clusters",
        "resamples": BOOTSTRAP_RESAMPLES,
        "level": 0.95,
        "seed": seed,
    }
    summary["package_version"] = __version__
    summary["config"] = dict(config or {})
    summary["started"] = started.isoformat() if started else None
    summary["finished"] = finished.isoformat() if finished else None
    return summary


def judge_usage_section(before: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
    """summary.json's ``judge_usage``: what the judges did since ``before`` (a
    :func:`~mmverify.models.judge_usage.usage_totals` taken when the run started) -- requests sent,
    replies from the cache, retries, failures and reported tokens per judge, in this process and
    in the worker processes that forwarded theirs -- and which judge each configured role uses."""
    from ..models.judge_config import usage_identities
    from ..models.judge_usage import usage_report, usage_since

    try:
        roles = usage_identities()
    except ValueError:  # a malformed judge setting: the counts still stand
        roles = {}
    return usage_report(usage_since(before or {}), roles)


def _unreadable(row: Mapping[str, Any]) -> bool:
    """A row of a manifest line that could not be read, so whose model is unknown rather than none."""
    error = row.get("error")
    return row.get("model") is None and isinstance(error, Mapping) and error.get("code") == "malformed_line"


def _profile_of(row: Mapping[str, Any]) -> str:
    """The profile named in a row's verifier id (``task@version:profile``)."""
    verifier = str(row["verifier"])
    return verifier.rpartition(":")[2] if ":" in verifier else "mmmg"


def write_summary(summary: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    # a lone surrogate (a path or name decoded from bytes that are not UTF-8) cannot be written as UTF-8
    tmp.write_text(replace_surrogates(json.dumps(summary, indent=2, ensure_ascii=False)) + "\n", encoding="utf-8")
    tmp.replace(path)
