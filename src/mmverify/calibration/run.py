"""``mmverify calibrate``: fit per-task thresholds against human labels and report honest agreement.

The results come from a run folder (its ``results.latest.jsonl``) or a results file.  Labels and
preference pairs must match enough scored rows (``min_matched``, or all of them when there are
fewer); otherwise the run stops with the counts and, per reason, the first items that did not
match, instead of writing empty thresholds.

Labels 0/1/2 (``label_kind="three-way"``) get two thresholds, ``low`` and ``high``: verdict 0 below
``low``, 2 above ``high``, 1 between.  Their ``thresholds.json`` entry holds both and, for
``score --thresholds``, ``threshold = high`` with direction ``>``: ``passed`` means verdict 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..pipelines.runs import load_run
from .crossval import cross_validate, cross_validate_three_way, predict_three_way
from .fit import fit_direction, fit_two_thresholds, predict
from .labels import (
    LABEL_KINDS, Adjudication, Joined, adjudicate, check_label_values, check_samples_given, join, load_labels, resolve_items,
)
from .matching import require
from .pairwise import TIE_POLICIES, load_pairs, pairwise_accuracy
from .report import write_report
from .stats import cluster_bootstrap, cohen_kappa, correlations
from .thumbnails import Media, media_for_rows

BOOTSTRAP = "percentile bootstrap, instructions resampled as clusters, 2000 resamples, seed {seed}"


@dataclass
class CalibrationConfig:
    results: Path
    labels: Path
    out: Path
    components: Mapping[str, str] = field(default_factory=dict)  # task -> component (default "score")
    direction: str = ">"  # ">", "<" or "auto" (whichever fits better in-sample)
    objective: str = "agreement"
    folds: int = 5
    seed: int = 0
    pairs: Path | None = None  # preference pairs for pairwise accuracy
    tie_policy: str = "half"
    epsilon: float = 0.0
    min_matched: int = 10  # labelled items (and pairs) that must match a scored row; all when fewer
    label_kind: str = "binary"  # "binary" (0/1, true/false) or "three-way" (0/1/2)
    manifest: Path | None = None  # for media in the report; default: the one the run folder records

    def __post_init__(self) -> None:
        if self.min_matched < 0:
            raise ValueError("min_matched must be >= 0")
        if self.label_kind not in LABEL_KINDS:
            raise ValueError(f"label kind must be one of {', '.join(LABEL_KINDS)}, got {self.label_kind!r}")
        if self.tie_policy not in TIE_POLICIES:
            raise ValueError(f"tie policy must be one of {', '.join(TIE_POLICIES)}")
        if self.label_kind == "three-way" and (self.direction != ">" or self.objective != "agreement"):
            raise ValueError(
                "--label-kind three-way fits two thresholds for agreement with higher scores meaning higher labels; "
                "it takes neither --direction nor --objective"
            )


def _agreement_ci(correct: np.ndarray, groups: list[str], seed: int) -> list[float] | None:
    ci = cluster_bootstrap(lambda idx: float(correct[idx].mean()), groups, seed=seed)
    return list(ci) if ci else None


def _cv(values: np.ndarray, labels: np.ndarray, groups: list[str], config: CalibrationConfig) -> dict[str, Any]:
    """k-fold and leave-one-instruction-out agreement.  Everything is fitted on the training folds,
    the direction included when it is "auto" (chosen afresh in each fold)."""
    n_groups = len(set(groups))
    if config.label_kind == "three-way":
        kfold = cross_validate_three_way(values, labels, groups, folds=min(config.folds, n_groups), seed=config.seed)
        loio = cross_validate_three_way(values, labels, groups, folds=None)
    else:
        kfold = cross_validate(values, labels, groups, folds=min(config.folds, n_groups), direction=config.direction, objective=config.objective, seed=config.seed)
        loio = cross_validate(values, labels, groups, folds=None, direction=config.direction, objective=config.objective)
    result = {
        "kfold_folds": kfold.folds,
        "kfold_agreement": kfold.agreement,
        "kfold_ci95": _agreement_ci((kfold.predictions == labels).astype(np.float64), groups, config.seed),
        "kfold_fold_agreements": kfold.fold_agreements,
        "kfold_thresholds": kfold.thresholds,
        "loio_agreement": loio.agreement,
    }
    if kfold.directions is not None:
        result["kfold_directions"] = kfold.directions
    return result


def _binary(values: np.ndarray, labels: np.ndarray, groups: list[str], config: CalibrationConfig) -> tuple[dict[str, Any], np.ndarray]:
    """The threshold fit, its agreement statistics, and the verdicts it gives."""
    fit = fit_direction(values, labels, config.direction, config.objective)
    predictions = predict(values, fit.threshold, fit.direction)
    correct = (predictions == labels).astype(np.float64)
    result: dict[str, Any] = {
        "fit": {"threshold": fit.threshold, "direction": fit.direction, "objective": fit.objective, "value": fit.value},
        "curve": {"thresholds": fit.candidates.tolist(), "values": fit.values.tolist()},
        "agreement": fit.agreement,
        "agreement_ci95": _agreement_ci(correct, groups, config.seed),
        "cohen_kappa": cohen_kappa(predictions, labels),
        "correlations": correlations(values, labels),
    }
    if len(set(groups)) >= 2:
        result["cv"] = _cv(values, labels, groups, config)
    return result, predictions


def _three_way(values: np.ndarray, labels: np.ndarray, groups: list[str], config: CalibrationConfig) -> dict[str, Any]:
    """The two-threshold fit (labels 0/1/2) and its agreement, in-sample and cross-validated."""
    three = fit_two_thresholds(values, labels)
    correct = (predict_three_way(values, three.low, three.high) == labels).astype(np.float64)
    result: dict[str, Any] = {
        "three_way": {"low": three.low, "high": three.high, "agreement": three.agreement},
        "agreement": three.agreement,
        "agreement_ci95": _agreement_ci(correct, groups, config.seed),
        "correlations": correlations(values, labels),
    }
    if len(set(groups)) >= 2:
        result["cv"] = _cv(values, labels, groups, config)
    return result


def calibrate_task(
    values: np.ndarray, labels: np.ndarray, groups: list[str], config: CalibrationConfig, items: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One task's fit and statistics; with ``items`` (the generations, in order) binary fits also
    list the disagreements: generations whose verdict differs from the human label."""
    result: dict[str, Any] = {"n": int(values.size), "instructions": len(set(groups))}
    if config.label_kind == "three-way":
        result.update(_three_way(values, labels.astype(np.int64), groups, config))
        return result
    fitted, predictions = _binary(values, labels.astype(np.int64), groups, config)
    result.update(fitted)
    if items is not None:
        result["disagreements"] = _disagreements(items, values, labels, predictions, result["fit"]["threshold"])
    return result


def _disagreements(items: list[dict[str, Any]], values: np.ndarray, labels: np.ndarray, verdicts: np.ndarray, threshold: float) -> list[dict[str, Any]]:
    """Generations whose verdict differs from the human label, farthest from the threshold first."""
    listed = [
        {**item, "value": float(value), "label": int(label), "verdict": int(verdict)}
        for item, value, label, verdict in zip(items, values, labels, verdicts)
        if verdict != label
    ]
    return sorted(listed, key=lambda entry: -abs(entry["value"] - threshold))


def _labels_metrics(adjudicated: Adjudication, joined: Joined) -> dict[str, Any]:
    return {
        "items": len(adjudicated.labels) + len(adjudicated.ties),
        "ties": len(adjudicated.ties),
        "unmatched": joined.unmatched,
        "ambiguous": joined.ambiguous,
        "missing_component": joined.missing_component,
        "matching": joined.matching.as_dict(),
    }


def _threshold_entry(result: Mapping[str, Any], component: str, config: CalibrationConfig) -> dict[str, Any]:
    if "three_way" in result:  # score --thresholds reads threshold/direction: passed = verdict 2
        three = result["three_way"]
        cuts = {
            "threshold": three["high"], "direction": ">", "label_kind": "three-way", "low": three["low"], "high": three["high"],
            "passed_means": f"verdict 2 ({component} above high); verdict 0 below low, 1 between",
        }  # fmt: skip
    else:
        cuts = {"threshold": result["fit"]["threshold"], "direction": result["fit"]["direction"]}
    return {
        "component": component,
        **cuts,
        "fitted_on": {
            "results": str(config.results), "labels": str(config.labels), "n": result["n"],
            "instructions": result["instructions"], "objective": config.objective,
            "agreement_in_sample": result["agreement"],
            "agreement_cv": (result.get("cv") or {}).get("kfold_agreement"),
        },
    }  # fmt: skip


def _report_media(manifest: Path | None, metrics: Mapping[str, Any]) -> dict[int, Media]:
    """Thumbnails for the generations the report lists, when the manifest is known."""
    listed = [{**item, "task": task} for task, entry in metrics["tasks"].items() for item in entry.get("disagreements", [])]
    if manifest is None or not listed:
        return {}
    return media_for_rows(manifest, listed)


def _load_joined(rows: list[Mapping[str, Any]], source: Path, config: CalibrationConfig) -> tuple[Adjudication, Joined]:
    loaded = check_label_values(load_labels(config.labels), config.label_kind)
    check_samples_given(loaded, rows, str(config.labels))
    labels = resolve_items(loaded, rows)
    adjudicated = adjudicate(labels)
    if not adjudicated.labels:
        raise ValueError(f"{config.labels}: no labelled item has a majority label ({len(adjudicated.ties)} ties)")
    joined = join(rows, adjudicated.labels, config.components)
    matching = joined.matching.as_dict()
    require(matching, min_matched=config.min_matched, what="labelled items", source=str(source), hint=_hint(joined, rows))
    return adjudicated, joined


def _hint(joined: Joined, rows: list[Mapping[str, Any]]) -> str:
    """What the results hold, for the reasons a user can fix in the labels file."""
    failures = joined.matching.failures
    hints = []
    if failures["model"]:
        models = sorted({str(r.get("model")) for r in rows})
        hints.append(f"the results hold model(s): {', '.join(models[:5])}{' ...' if len(models) > 5 else ''}")
    if failures["ambiguous"]:
        hints.append("a labels file can name the generation exactly with 'task' and 'model' columns")
    return "; ".join(hints)


def _pairwise(rows: list[Mapping[str, Any]], source: Path, config: CalibrationConfig) -> dict[str, Any] | None:
    if config.pairs is None:
        return None
    report = pairwise_accuracy(rows, load_pairs(config.pairs), policy=config.tie_policy, epsilon=config.epsilon, seed=config.seed)
    require(report["matching"], min_matched=config.min_matched, what="preference pairs", source=str(source))
    return report


def run_calibration(config: CalibrationConfig) -> dict[str, Any]:
    """Fit, evaluate and write ``thresholds.json``, ``metrics.json`` and ``report.html``.

    Raises ``ValueError`` (:class:`~.matching.MatchingError` for matching) before anything is
    written when the inputs cannot support a calibration."""
    if config.manifest is not None and not config.manifest.is_file():
        raise ValueError(f"manifest {config.manifest} is not a file")
    run = load_run(config.results)
    rows = run.rows
    adjudicated, joined = _load_joined(rows, run.source, config)
    pairwise = _pairwise(rows, run.source, config)
    metrics: dict[str, Any] = {
        "objective": config.objective,
        "direction": config.direction,
        "label_kind": config.label_kind,
        "bootstrap": BOOTSTRAP.format(seed=config.seed),
        "results": {"path": str(config.results), "read": str(run.source), "rows": len(rows)},
        "labels": _labels_metrics(adjudicated, joined),
        "inter_annotator": adjudicated.inter_annotator or None,
        "tasks": {},
    }
    thresholds: dict[str, Any] = {}
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for task in sorted(joined.values):
        values = np.asarray(joined.values[task], dtype=np.float64)
        labels = np.asarray(joined.labels[task])
        component = config.components.get(task, "score")
        try:
            fitted = calibrate_task(values, labels, joined.instances[task], config, joined.items[task])
        except ValueError as exc:
            raise ValueError(f"task {task}: {exc}") from None
        result = {"component": component, **fitted}
        metrics["tasks"][task] = result
        if "fit" in result:
            arrays[task] = (values, labels.astype(np.float64))
        thresholds[task] = _threshold_entry(result, component, config)
    if not thresholds:  # never an empty thresholds.json
        raise ValueError(f"{config.labels}: no task could be calibrated")
    if pairwise is not None:
        metrics["pairwise"] = pairwise
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "thresholds.json").write_text(json.dumps(thresholds, indent=2) + "\n", encoding="utf-8")
    (config.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    write_report(metrics, arrays, config.out, media=_report_media(config.manifest or run.manifest, metrics))
    return metrics
