"""``mmverify calibrate``: fit per-task thresholds against human labels and report honest agreement."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..pipelines.results import ResultsFile, latest_rows
from .crossval import cross_validate
from .fit import fit_threshold, fit_two_thresholds, predict
from .labels import adjudicate, join, load_labels
from .pairwise import load_pairs, pairwise_accuracy
from .report import write_report
from .stats import cluster_bootstrap, cohen_kappa, correlations

BOOTSTRAP = "percentile bootstrap, instructions resampled as clusters, 2000 resamples, seed 0"


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


def _agreement_ci(correct: np.ndarray, groups: list[str], seed: int) -> list[float] | None:
    ci = cluster_bootstrap(lambda idx: float(correct[idx].mean()), groups, seed=seed)
    return list(ci) if ci else None


def calibrate_task(values: np.ndarray, labels: np.ndarray, groups: list[str], config: CalibrationConfig) -> dict[str, Any]:
    result: dict[str, Any] = {"n": int(values.size), "instructions": len(set(groups))}
    numeric = all(isinstance(v, (int, np.integer)) for v in labels.tolist())
    distinct = set(labels.tolist())
    if numeric and distinct <= {0, 1}:
        directions = (">", "<") if config.direction == "auto" else (config.direction,)
        fits = [fit_threshold(values, labels, d, config.objective) for d in directions]
        fit = max(fits, key=lambda f: (f.value, f.direction == ">"))
        predictions = predict(values, fit.threshold, fit.direction)
        correct = (predictions == labels).astype(np.float64)
        result.update(
            fit={"threshold": fit.threshold, "direction": fit.direction, "objective": fit.objective, "value": fit.value},
            curve={"thresholds": fit.candidates.tolist(), "values": fit.values.tolist()},
            agreement=fit.agreement,
            agreement_ci95=_agreement_ci(correct, groups, config.seed),
            cohen_kappa=cohen_kappa(predictions, labels),
            correlations=correlations(values, labels),
        )
        n_groups = len(set(groups))
        if n_groups >= 2:
            kfold = cross_validate(values, labels, groups, folds=min(config.folds, n_groups), direction=fit.direction, objective=config.objective, seed=config.seed)
            loio = cross_validate(values, labels, groups, folds=None, direction=fit.direction, objective=config.objective)
            result["cv"] = {
                "kfold_folds": kfold.folds,
                "kfold_agreement": kfold.agreement,
                "kfold_ci95": _agreement_ci((kfold.predictions == labels).astype(np.float64), groups, config.seed),
                "kfold_fold_agreements": kfold.fold_agreements,
                "kfold_thresholds": kfold.thresholds,
                "loio_agreement": loio.agreement,
            }
    elif numeric and distinct <= {0, 1, 2}:
        three = fit_two_thresholds(values, labels)
        result.update(three_way={"low": three.low, "high": three.high, "agreement": three.agreement}, correlations=correlations(values, labels))
    else:
        result["note"] = "labels are not 0/1 or 0/1/2: only correlations are reported" if numeric else "categorical labels: no threshold"
        if numeric:
            result["correlations"] = correlations(values, labels)
    return result


def run_calibration(config: CalibrationConfig) -> dict[str, Any]:
    rows = latest_rows(ResultsFile(config.results).load(repair=False))
    adjudicated = adjudicate(load_labels(config.labels))
    joined = join(rows, adjudicated.labels, config.components)
    metrics: dict[str, Any] = {
        "objective": config.objective,
        "direction": config.direction,
        "bootstrap": BOOTSTRAP,
        "labels": {
            "items": len(adjudicated.labels) + len(adjudicated.ties),
            "ties": len(adjudicated.ties),
            "unmatched": joined.unmatched,
            "ambiguous": joined.ambiguous,
            "missing_component": joined.missing_component,
        },
        "inter_annotator": adjudicated.inter_annotator or None,
        "tasks": {},
    }
    thresholds: dict[str, Any] = {}
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for task in sorted(joined.values):
        values = np.asarray(joined.values[task], dtype=np.float64)
        labels = np.asarray(joined.labels[task])
        component = config.components.get(task, "score")
        result = {"component": component, **calibrate_task(values, labels, joined.instances[task], config)}
        metrics["tasks"][task] = result
        if "fit" in result:
            arrays[task] = (values, labels.astype(np.float64))
            thresholds[task] = {
                "component": component,
                "threshold": result["fit"]["threshold"],
                "direction": result["fit"]["direction"],
                "fitted_on": {
                    "results": str(config.results), "labels": str(config.labels), "n": result["n"],
                    "instructions": result["instructions"], "objective": config.objective,
                    "agreement_in_sample": result["agreement"],
                    "agreement_cv": (result.get("cv") or {}).get("kfold_agreement"),
                },
            }  # fmt: skip
    if config.pairs is not None:
        metrics["pairwise"] = pairwise_accuracy(
            rows, load_pairs(config.pairs), policy=config.tie_policy, epsilon=config.epsilon, seed=config.seed
        )
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "thresholds.json").write_text(json.dumps(thresholds, indent=2) + "\n", encoding="utf-8")
    (config.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    write_report(metrics, arrays, config.out)
    return metrics
