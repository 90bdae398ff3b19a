"""Paired comparison of score runs: per-task and overall differences of mean score with bootstrap CIs.

The first run is the baseline A; every further run B is compared with it and the difference is
``B - A``.  Rows are paired by generation:

* ``(task, instance_id, sample)`` when each of the two runs holds rows of a single model (the usual
  case: one run per model, or the same model scored twice under different settings); the model
  names are reported beside the comparison;
* ``(task, instance_id, sample, model)`` otherwise (runs that each hold several models).

``match`` forces either rule ("instance" or "model"; "auto" picks as above).  A rule under which
two rows of one run share a key (``match="instance"`` on a run holding several models) is refused
with the count: no row is dropped silently.  Rows present in only one run are counted, never
paired.  Error rows leave their pair out of the difference and are
counted, unless ``errors_as_zero`` scores them 0 (as ``score --aggregate as_zero`` does).

Intervals are percentile bootstrap intervals that resample *instructions*: all samples of one
instruction move together, and a pair moves as one (a paired bootstrap of the per-generation
differences).  Each task's resamples are seeded from ``(seed, task)`` exactly as the run summary
does, so adding a task never changes another task's interval.  The overall difference is the macro
mean over the tasks present in both runs; its interval resamples instructions within each task
(stratified) and averages the tasks' resampled differences.  Tasks scored as a mean over source
files (``i_ocr_multi_lingual``) resample within each source and weight sources equally, as the
summary does.
"""

from __future__ import annotations

import math
import string
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..tasks.catalog import CATALOG
from .runs import LoadedRun, load_run
from .summary import BOOTSTRAP_RESAMPLES

COMPARE_SCHEMA = 1
MATCH_MODES: tuple[str, ...] = ("auto", "instance", "model")
LEVEL = 0.95
MIN_INSTRUCTIONS = 2  # paired instructions a task (each source of it) needs for an interval and the overall
EXAMPLES = 5  # unmatched generations named per side

Key = tuple[Any, ...]


@dataclass(frozen=True)
class _Pair:
    """One generation scored in both runs; ``None`` marks an error row."""

    instance_id: str
    a: float | None
    b: float | None


def _models(rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
    return sorted({r.get("model") for r in rows}, key=lambda m: (m is not None, m or ""))


def _match_on_model(a: LoadedRun, b: LoadedRun, match: str) -> bool:
    if match == "model":
        return True
    if match == "instance":
        return False
    return not (len(_models(a.rows)) == 1 and len(_models(b.rows)) == 1)


def _key(row: Mapping[str, Any], with_model: bool) -> Key:
    base = (str(row.get("task")), str(row.get("instance_id")), int(row.get("sample") or 0))
    return (*base, row.get("model")) if with_model else base


def _value(row: Mapping[str, Any], errors_as_zero: bool) -> float | None:
    """A scored row's score; an error row's (or a hand-edited row's non-number) counts as one."""
    score = row.get("score")
    if row.get("status") == "scored" and isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
        return float(score)
    return 0.0 if errors_as_zero else None


def _strata(task: str, instances: Sequence[str]) -> dict[str, str] | None:
    info = CATALOG.get(task)
    return info.strata(instances) if info is not None else None


def _task_rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(task.encode("utf-8"))])


def _by_stratum(clusters: Mapping[str, Sequence[float]], strata: Mapping[str, str] | None) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for name in sorted(clusters):
        groups[strata[name] if strata else ""].append(name)
    return groups


def point_mean(clusters: Mapping[str, Sequence[float]], strata: Mapping[str, str] | None = None) -> float:
    """Mean over all values, or with ``strata`` the mean of the strata's pooled means."""
    groups = _by_stratum(clusters, strata)
    means = [np.mean([v for n in names for v in clusters[n]]) for _, names in sorted(groups.items())]
    return float(np.mean(means))


def bootstrap_means(
    clusters: Mapping[str, Sequence[float]],
    strata: Mapping[str, str] | None,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> np.ndarray:
    """``resamples`` bootstrap replicates of :func:`point_mean`, resampling clusters with
    replacement (within each stratum when ``strata`` is given)."""
    replicates = []
    for _, names in sorted(_by_stratum(clusters, strata).items()):
        sums = np.array([float(np.sum(clusters[n])) for n in names])
        counts = np.array([len(clusters[n]) for n in names], dtype=np.float64)
        picks = rng.integers(0, len(names), size=(resamples, len(names)))
        replicates.append(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
    return np.mean(replicates, axis=0)


def percentile_interval(replicates: np.ndarray, level: float = LEVEL) -> list[float]:
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return [float(low), float(high)]


def _excludes_zero(ci: Sequence[float] | None) -> bool:
    return ci is not None and (ci[0] > 0.0 or ci[1] < 0.0)


def _clusters(pairs: Sequence[_Pair], value: Callable[[_Pair], float]) -> dict[str, list[float]]:
    """Values per instruction (the bootstrap's clusters)."""
    clusters: dict[str, list[float]] = defaultdict(list)
    for pair in pairs:
        clusters[pair.instance_id].append(value(pair))
    return clusters


def _task_entry(task: str, pairs: Sequence[_Pair], only_a: int, only_b: int, seed: int) -> tuple[dict[str, Any], np.ndarray | None]:
    """One task's comparison and its bootstrap replicates of the difference (None when nothing pairs)."""
    used = [p for p in pairs if p.a is not None and p.b is not None]
    info = CATALOG.get(task)
    entry: dict[str, Any] = {
        "group": info.group if info else None,
        "n_matched": len(pairs),
        "n": len(used),
        "instructions": len({p.instance_id for p in used}),
        "n_error_a": sum(p.a is None for p in pairs),
        "n_error_b": sum(p.b is None for p in pairs),
        "n_excluded": len(pairs) - len(used),
        "only_a": only_a,
        "only_b": only_b,
        "mean_a": None, "mean_b": None, "delta": None, "ci95": None, "significant": False,
    }  # fmt: skip
    if not used:
        return entry, None
    differences = _clusters(used, lambda p: p.b - p.a)  # type: ignore[operator]
    strata = _strata(task, list(differences))
    entry.update(
        mean_a=point_mean(_clusters(used, lambda p: p.a), strata),  # type: ignore[arg-type,return-value]
        mean_b=point_mean(_clusters(used, lambda p: p.b), strata),  # type: ignore[arg-type,return-value]
        delta=point_mean(differences, strata),
    )
    if min(len(names) for names in _by_stratum(differences, strata).values()) < MIN_INSTRUCTIONS:
        return entry, None  # resampling one instruction (of a task or of a source) only repeats it
    replicates = bootstrap_means(differences, strata, _task_rng(seed, task))
    ci = percentile_interval(replicates)
    entry.update(ci95=ci, significant=_excludes_zero(ci))
    return entry, replicates


def _index(run: LoadedRun, with_model: bool, label: str) -> dict[Key, Mapping[str, Any]]:
    """Rows by pairing key; ``ValueError`` (with the count) when several rows share a key, which
    happens when the key lacks the model and the run holds several models."""
    index: dict[Key, Mapping[str, Any]] = {}
    shared: list[Key] = []
    for row in run.rows:
        key = _key(row, with_model)
        if key in index:
            shared.append(key)
        index[key] = row
    if shared:
        models = _models(run.rows)
        names = ", ".join(str(m) for m in models)
        rule = "(task, instance_id, sample" + (", model)" if with_model else ")")
        why = f"it holds {len(models)} models ({names}), so" if len(models) > 1 and not with_model else "in it"
        raise ValueError(
            f"run {label} ({run.source}): {why} {len(shared)} rows share their {rule} with another row "
            f"(first: {_describe_key(shared[0])}); pairing on {rule} would silently pair only one row of each such key"
            + ("; pair by model (--match model, or --match auto)" if not with_model else "")
        )
    return index


def _describe_key(key: Key) -> str:
    text = f"{key[1]} sample {key[2]}"
    return f"{text} model {key[3]}" if len(key) > 3 else text


def _overall(entries: Mapping[str, Mapping[str, Any]], replicates: Mapping[str, np.ndarray]) -> dict[str, Any]:
    tasks = sorted(replicates)
    if not tasks:
        return {"tasks": 0, "n": 0, "mean_a": None, "mean_b": None, "delta": None, "ci95": None, "significant": False}
    ci = percentile_interval(np.mean([replicates[t] for t in tasks], axis=0))
    return {
        "tasks": len(tasks),
        "n": sum(entries[t]["n"] for t in tasks),
        "mean_a": float(np.mean([entries[t]["mean_a"] for t in tasks])),
        "mean_b": float(np.mean([entries[t]["mean_b"] for t in tasks])),
        "delta": float(np.mean([entries[t]["delta"] for t in tasks])),
        "ci95": ci,
        "significant": _excludes_zero(ci),
    }


def compare_pair(
    a: LoadedRun, b: LoadedRun, *, seed: int = 0, errors_as_zero: bool = False, match: str = "auto", labels: tuple[str, str] = ("A", "B")
) -> dict[str, Any]:
    """Compare run ``b`` with the baseline ``a`` (difference ``b - a``); ``labels`` name them in errors."""
    if match not in MATCH_MODES:
        raise ValueError(f"match must be one of {', '.join(MATCH_MODES)}, got {match!r}")
    with_model = _match_on_model(a, b, match)
    rows_a, rows_b = _index(a, with_model, labels[0]), _index(b, with_model, labels[1])
    pairs: dict[str, list[_Pair]] = defaultdict(list)
    for key in sorted(rows_a.keys() & rows_b.keys(), key=str):  # a fixed order: sums are bit-identical
        pairs[key[0]].append(_Pair(key[1], _value(rows_a[key], errors_as_zero), _value(rows_b[key], errors_as_zero)))
    missing_b = sorted(rows_a.keys() - rows_b.keys(), key=str)
    missing_a = sorted(rows_b.keys() - rows_a.keys(), key=str)
    only: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key in missing_b:
        only[key[0]][0] += 1
    for key in missing_a:
        only[key[0]][1] += 1
    tasks: dict[str, dict[str, Any]] = {}
    replicates: dict[str, np.ndarray] = {}
    for task in sorted(pairs.keys() | only.keys()):
        entry, reps = _task_entry(task, pairs.get(task, []), *only.get(task, (0, 0)), seed)
        tasks[task] = entry
        if reps is not None:
            replicates[task] = reps
    return {
        "match_on": ["task", "instance_id", "sample", "model"] if with_model else ["task", "instance_id", "sample"],
        "models_a": _models(a.rows), "models_b": _models(b.rows),
        "matched": sum(len(p) for p in pairs.values()),
        "unmatched": {
            "only_a": len(missing_b), "only_b": len(missing_a),
            "examples_only_a": [_describe_key(k) for k in missing_b[:EXAMPLES]],
            "examples_only_b": [_describe_key(k) for k in missing_a[:EXAMPLES]],
        },
        "errors": {
            "a": sum(t["n_error_a"] for t in tasks.values()),
            "b": sum(t["n_error_b"] for t in tasks.values()),
            "pairs_excluded": sum(t["n_excluded"] for t in tasks.values()),
        },
        "tasks": tasks,
        "overall": _overall(tasks, replicates),
    }  # fmt: skip


def _labels(count: int) -> list[str]:
    letters = string.ascii_uppercase
    return [letters[i] if i < len(letters) else f"R{i + 1}" for i in range(count)]


def _run_info(label: str, run: LoadedRun) -> dict[str, Any]:
    return {
        "label": label,
        "path": str(run.path),
        "source": str(run.source),
        "rows": len(run.rows),
        "duplicates": run.duplicates,
        "models": _models(run.rows),
    }


def compare_loaded(
    runs: Sequence[LoadedRun], *, seed: int = 0, errors_as_zero: bool = False, match: str = "auto"
) -> dict[str, Any]:
    """The comparison document for runs already read (see :func:`compare_runs`)."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    labels = _labels(len(runs))
    comparisons = []
    for label, run in zip(labels[1:], runs[1:]):
        entry = compare_pair(runs[0], run, seed=seed, errors_as_zero=errors_as_zero, match=match, labels=(labels[0], label))
        comparisons.append({"a": labels[0], "b": label, **entry})
    return {
        "schema": COMPARE_SCHEMA,
        "kind": "mmverify.compare",
        "difference": "B - A: each run minus the first (baseline) run",
        "runs": [_run_info(label, run) for label, run in zip(labels, runs)],
        "errors": "as_zero" if errors_as_zero else "apart",
        "match": match,
        "bootstrap": {
            "method": "percentile; paired; instructions resampled as clusters (within tasks for the overall)",
            "resamples": BOOTSTRAP_RESAMPLES,
            "level": LEVEL,
            "seed": seed,
        },
        "comparisons": comparisons,
    }


def compare_runs(
    runs: Sequence[Path], *, seed: int = 0, errors_as_zero: bool = False, match: str = "auto"
) -> dict[str, Any]:
    """Compare every run with the first one; a plain JSON-able dict.

    ``runs`` are run folders (``results.latest.jsonl`` is read) or results files.  Layout::

        {"schema", "kind", "difference", "runs": [{"label", "path", "source", "rows", "duplicates",
         "models"}], "errors": "apart"|"as_zero", "match", "bootstrap": {...},
         "comparisons": [{"a", "b", "match_on", "models_a", "models_b", "matched",
                          "unmatched": {"only_a", "only_b", "examples_only_a", "examples_only_b"},
                          "errors": {"a", "b", "pairs_excluded"},
                          "tasks": {task: {"group", "n_matched", "n", "instructions", "n_error_a",
                                           "n_error_b", "n_excluded", "only_a", "only_b", "mean_a",
                                           "mean_b", "delta", "ci95", "significant"}},
                          "overall": {"tasks", "n", "mean_a", "mean_b", "delta", "ci95", "significant"}}]}
    """
    return compare_loaded([load_run(path) for path in runs], seed=seed, errors_as_zero=errors_as_zero, match=match)
