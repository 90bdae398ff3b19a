"""Static calibration report: one figure per task (objective vs threshold with the chosen point and
the range of thresholds chosen across CV folds, score histograms per human label, reliability
diagram) and an HTML page with the figures and tables.  No server, no JavaScript."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Mapping

import numpy as np


def _figure(task: str, result: Mapping[str, Any], values: np.ndarray, labels: np.ndarray, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    fit = result["fit"]
    curve = result["curve"]
    ax = axes[0]
    ax.plot(curve["thresholds"], curve["values"], color="#3366aa", lw=1.5, label=fit["objective"])
    if result.get("cv"):
        lo, hi = min(result["cv"]["kfold_thresholds"]), max(result["cv"]["kfold_thresholds"])
        ax.axvspan(lo, hi, color="#f0a030", alpha=0.25, label="thresholds chosen in CV folds")
    ax.axvline(fit["threshold"], color="#cc3333", ls="--", label=f"chosen {fit['threshold']:.3f}")
    ax.set_xlabel(f"threshold on {result['component']} ({fit['direction']})")
    ax.set_ylabel(fit["objective"])
    ax.set_title(f"{task}: {fit['objective']} vs threshold")
    ax.legend(fontsize=7, loc="lower center")

    ax = axes[1]
    bins = np.linspace(float(values.min()), float(values.max()) + 1e-9, 21)
    for label, colour in zip(sorted(set(labels.tolist())), ("#cc3333", "#33aa55", "#3366aa")):
        ax.hist(values[labels == label], bins=bins, alpha=0.55, color=colour, label=f"human label {label:g}")
    ax.axvline(fit["threshold"], color="black", ls="--", lw=1)
    ax.set_xlabel(result["component"])
    ax.set_ylabel("generations")
    ax.set_title("scores by human label")
    ax.legend(fontsize=7)

    ax = axes[2]
    edges = np.linspace(0.0, 1.0, 11) if values.min() >= 0 and values.max() <= 1 else np.linspace(values.min(), values.max() + 1e-9, 11)
    which = np.clip(np.digitize(values, edges) - 1, 0, len(edges) - 2)
    centres, rates, counts = [], [], []
    for b in range(len(edges) - 1):
        members = which == b
        if members.any():
            centres.append(float(values[members].mean()))
            rates.append(float(labels[members].mean()))
            counts.append(int(members.sum()))
    ax.plot([edges[0], edges[-1]], [0, 1], color="grey", lw=0.8, ls=":")
    ax.plot(centres, rates, marker="o", color="#3366aa")
    for x, y, n in zip(centres, rates, counts):
        ax.annotate(str(n), (x, y), fontsize=6, xytext=(2, 3), textcoords="offset points")
    ax.set_xlabel(f"mean {result['component']} in bin")
    ax.set_ylabel("fraction labelled 1")
    ax.set_title("reliability")
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # no version/timestamp: reproducible files
    plt.close(fig)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    return html.escape(str(value))


def write_report(metrics: Mapping[str, Any], arrays: Mapping[str, tuple[np.ndarray, np.ndarray]], out: Path) -> Path:
    """Write ``out/report.html`` plus one PNG per binary task; returns the HTML path."""
    out.mkdir(parents=True, exist_ok=True)
    rows, figures = [], []
    for task, result in metrics["tasks"].items():
        cv = result.get("cv") or {}
        rows.append(
            "<tr>" + "".join(
                f"<td>{_fmt(v)}</td>"
                for v in (
                    task, result.get("n"), result.get("instructions"), result.get("component"),
                    (result.get("fit") or {}).get("threshold"), (result.get("fit") or {}).get("direction"),
                    result.get("agreement"), result.get("agreement_ci95"), cv.get("kfold_agreement"),
                    cv.get("kfold_ci95"), cv.get("loio_agreement"), result.get("cohen_kappa"),
                    (result.get("correlations") or {}).get("spearman"),
                )
            ) + "</tr>"
        )  # fmt: skip
        if result.get("fit") and task in arrays:
            name = f"{task}.png"
            _figure(task, result, *arrays[task], out / name)
            figures.append(f"<h3>{html.escape(task)}</h3><img src='{name}' alt='{html.escape(task)} calibration plots'>")
    header = "".join(
        f"<th>{h}</th>"
        for h in ("task", "n", "instructions", "component", "threshold", "dir", "agreement (in-sample)", "95% CI",
                  "CV agreement", "CV 95% CI", "LOIO agreement", "Cohen κ", "Spearman")
    )  # fmt: skip
    inter = metrics.get("inter_annotator") or {}
    notes = (
        f"<p>{metrics['labels']['items']} labelled items, {metrics['labels']['ties']} left out as ties, "
        f"{metrics['labels']['unmatched']} without a scored row. Inter-annotator: "
        f"{_fmt(inter.get('pairwise_agreement'))} pairwise agreement, α = {_fmt(inter.get('krippendorff_alpha_nominal'))} "
        f"over {inter.get('items', 0)} multiply-labelled items.</p>"
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>mmverify calibration</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child{{text-align:left}}img{{max-width:100%}}</style>
</head><body>
<h1>Calibration report</h1>
<p>Thresholds are fitted exactly (every midpoint between distinct scores) maximising <b>{html.escape(metrics['objective'])}</b>.
In-sample agreement is optimistic; CV columns fit on some instructions and test on others (folds group whole
instructions). Intervals: {html.escape(metrics['bootstrap'])}.</p>
{notes}
<table><tr>{header}</tr>{''.join(rows)}</table>
{''.join(figures)}
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
