"""Static calibration report: one self-contained HTML file (figures embedded as PNG data URIs, no
JavaScript, nothing fetched).

Sections: how labels and pairs matched the results (with the reasons for what did not); per task
the fit and agreement table; pairwise accuracy with its tie policy; per task one figure (objective
vs threshold with the chosen point and the range of thresholds chosen across CV folds, score
histograms per human label, reliability diagram); and the generations where verifier and humans
disagree, with thumbnails of their images when the manifest is known.
"""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..reports.style import content_policy
from .pairwise import describe_policy
from .thumbnails import Media, png_data_uri

DISAGREEMENTS_SHOWN = 200  # per task; the full list is in metrics.json


def _plot_curve(ax: Any, task: str, result: Mapping[str, Any]) -> None:
    fit, curve = result["fit"], result["curve"]
    ax.plot(curve["thresholds"], curve["values"], color="#3366aa", lw=1.5, label=fit["objective"])
    if result.get("cv"):
        cv = result["cv"]
        directions = cv.get("kfold_directions") or [fit["direction"]] * len(cv["kfold_thresholds"])
        same = [t for t, d in zip(cv["kfold_thresholds"], directions) if d == fit["direction"]]  # others are on another curve
        other = len(directions) - len(same)
        if same:
            note = f" ({other} other fold(s) chose {'<' if fit['direction'] == '>' else '>'})" if other else ""
            ax.axvspan(min(same), max(same), color="#f0a030", alpha=0.25, label=f"thresholds chosen in CV folds{note}")
    ax.axvline(fit["threshold"], color="#cc3333", ls="--", label=f"chosen {fit['threshold']:.3f}")
    ax.set_xlabel(f"threshold on {result['component']} ({fit['direction']})")
    ax.set_ylabel(fit["objective"])
    ax.set_title(f"{task}: {fit['objective']} vs threshold")
    ax.legend(fontsize=7, loc="lower center")


def _plot_histograms(ax: Any, result: Mapping[str, Any], values: np.ndarray, labels: np.ndarray) -> None:
    bins = np.linspace(float(values.min()), float(values.max()) + 1e-9, 21)
    for label, colour in zip(sorted(set(labels.tolist())), ("#cc3333", "#33aa55", "#3366aa")):
        ax.hist(values[labels == label], bins=bins, alpha=0.55, color=colour, label=f"human label {label:g}")
    ax.axvline(result["fit"]["threshold"], color="black", ls="--", lw=1)
    ax.set_xlabel(result["component"])
    ax.set_ylabel("generations")
    ax.set_title("scores by human label")
    ax.legend(fontsize=7)


def _plot_reliability(ax: Any, result: Mapping[str, Any], values: np.ndarray, labels: np.ndarray) -> None:
    unit = values.min() >= 0 and values.max() <= 1
    edges = np.linspace(0.0, 1.0, 11) if unit else np.linspace(values.min(), values.max() + 1e-9, 11)
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


def figure_png(task: str, result: Mapping[str, Any], values: np.ndarray, labels: np.ndarray) -> bytes:
    """The task's three calibration plots as PNG bytes (no timestamp or version inside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    _plot_curve(axes[0], task, result)
    _plot_histograms(axes[1], result, values, labels)
    _plot_reliability(axes[2], result, values, labels)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.3f}, {value[1]:.3f}]"
    return html.escape(str(value))


def _table(header: list[str], rows: list[list[Any]], raw_columns: tuple[int, ...] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{v if i in raw_columns else _fmt(v)}</td>" for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _matching_section(title: str, matching: Mapping[str, Any] | None, what: str) -> str:
    if not matching:
        return ""
    summary = f"<p><b>{html.escape(title)}</b>: {matching['matched']} of {matching['total']} {what} matched a scored results row.</p>"
    if not matching["reasons"]:
        return summary
    rows = [[entry["count"], entry["meaning"], "; ".join(entry["examples"])] for entry in matching["reasons"].values()]
    return summary + _table(["not matched", "why", "first ones"], rows)


def _tasks_table(metrics: Mapping[str, Any]) -> str:
    rows = []
    for task, result in metrics["tasks"].items():
        fit, cv, three = result.get("fit") or {}, result.get("cv") or {}, result.get("three_way")
        threshold = f"{three['low']:.3f} / {three['high']:.3f}" if three else fit.get("threshold")
        rows.append([
            task, result.get("n"), result.get("instructions"), result.get("component"), threshold,
            fit.get("direction"), result.get("agreement"), result.get("agreement_ci95"), cv.get("kfold_agreement"),
            cv.get("kfold_ci95"), cv.get("loio_agreement"), result.get("cohen_kappa"),
            (result.get("correlations") or {}).get("spearman"), len(result["disagreements"]) if "disagreements" in result else None,
        ])  # fmt: skip
    header = [
        "task", "n", "instructions", "component", "threshold", "dir", "agreement (in-sample)", "95% CI",
        "CV agreement", "CV 95% CI", "LOIO agreement", "Cohen κ", "Spearman", "disagreements",
    ]  # fmt: skip
    return _table(header, rows)


def _pairwise_section(pairwise: Mapping[str, Any] | None) -> str:
    if not pairwise:
        return ""
    rows = [[task, entry["pairs"], entry["accuracy"], entry["ci95"]] for task, entry in pairwise["tasks"].items()]
    if pairwise.get("overall"):
        overall = pairwise["overall"]
        rows.append(["all pairs", overall["pairs"], overall["accuracy"], overall["ci95"]])
    policy = html.escape(describe_policy(pairwise["policy"], pairwise.get("epsilon")))
    return (
        "<h2>Pairwise accuracy</h2><p>Fraction of preference pairs in which the verifier scores the "
        f"human-preferred generation higher. Tie policy: <b>{policy}</b>.</p>"
        + _matching_section("Pairs", pairwise.get("matching"), "pairs")
        + _table(["task", "pairs", "accuracy", "95% CI"], rows)
    )


def _media_cell(item: Mapping[str, Any], media: Mapping[int, Media]) -> str:
    found = media.get(item.get("line")) if isinstance(item.get("line"), int) else None
    if found is None:
        return "–"
    images = "".join(f"<img class='thumb' src='{uri}' alt='generated image'>" for uri in found.images)
    paths = "<br>".join(html.escape(p) for p in found.paths + found.problems)
    return f"<div class='media'>{images}" + (f"<div class='paths'>{paths}</div>" if paths else "") + "</div>"


def _disagreement_rows(result: Mapping[str, Any], media: Mapping[int, Media]) -> list[list[Any]]:
    fit = result["fit"]
    rule = f"{result['component']} {fit['direction']} {fit['threshold']:.3f}"
    return [
        [
            item["instance_id"], item["sample"], item.get("model"), item["value"], html.escape(rule),
            "pass" if item["verdict"] else "fail", "good (1)" if item["label"] else "bad (0)", _media_cell(item, media),
        ]
        for item in result["disagreements"][:DISAGREEMENTS_SHOWN]
    ]


def _disagreements_section(metrics: Mapping[str, Any], media: Mapping[int, Media]) -> str:
    parts = []
    header = ["instance", "sample", "model", "value", "rule", "verifier", "humans", "media"]
    for task, result in metrics["tasks"].items():
        listed = result.get("disagreements")
        if not listed:
            continue
        shown = min(len(listed), DISAGREEMENTS_SHOWN)
        note = f" (first {shown} of {len(listed)}; all are in metrics.json)" if shown < len(listed) else ""
        parts.append(f"<h3>{html.escape(task)}: {len(listed)} disagreements{note}</h3>")
        parts.append(_table(header, _disagreement_rows(result, media), raw_columns=(4, 7)))
    if not parts:
        return ""
    hint = "" if media else "<p>Give the scored manifest (<code>--manifest</code>) to see thumbnails of the generated images.</p>"
    return "<h2>Where verifier and humans disagree</h2>" + hint + "".join(parts)


def _figures(metrics: Mapping[str, Any], arrays: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> str:
    figures = []
    for task, result in metrics["tasks"].items():
        if result.get("fit") and task in arrays:
            uri = png_data_uri(figure_png(task, result, *arrays[task]))
            figures.append(f"<h3>{html.escape(task)}</h3><img src='{uri}' alt='{html.escape(task)} calibration plots'>")
    return "".join(figures)


def _notes(metrics: Mapping[str, Any]) -> str:
    inter = metrics.get("inter_annotator") or {}
    labels = metrics["labels"]
    return (
        f"<p>{labels['items']} labelled items, {labels['ties']} left out as ties. Inter-annotator: "
        f"{_fmt(inter.get('pairwise_agreement'))} pairwise agreement, α = {_fmt(inter.get('krippendorff_alpha_nominal'))} "
        f"over {inter.get('items', 0)} multiply-labelled items.</p>"
    )


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;font-size:13px;margin:0.5em 0}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}td:first-child{text-align:left}"
    "img{max-width:100%}img.thumb{width:96px;margin:2px}.media{text-align:left}.paths{font-size:11px;color:#555}"
)


def render_report(metrics: Mapping[str, Any], arrays: Mapping[str, tuple[np.ndarray, np.ndarray]], media: Mapping[int, Media] | None = None) -> str:
    """The whole report as one HTML document."""
    media = media or {}
    return f"""<!doctype html>
<html><head><meta charset="utf-8">{content_policy()}<title>mmverify calibration</title>
<style>{STYLE}</style>
</head><body>
<h1>Calibration report</h1>
<p>Thresholds are fitted exactly (every midpoint between distinct scores) maximising <b>{html.escape(metrics['objective'])}</b>.
In-sample agreement is optimistic; CV columns fit on some instructions and test on others (folds group whole
instructions). Intervals: {html.escape(metrics['bootstrap'])}.</p>
{_notes(metrics)}
{_matching_section("Labels", metrics["labels"].get("matching"), "labelled items")}
<h2>Agreement per task</h2>
{_tasks_table(metrics)}
{_pairwise_section(metrics.get("pairwise"))}
{_figures(metrics, arrays)}
{_disagreements_section(metrics, media)}
</body></html>
"""


def write_report(
    metrics: Mapping[str, Any], arrays: Mapping[str, tuple[np.ndarray, np.ndarray]], out: Path, media: Mapping[int, Media] | None = None
) -> Path:
    """Write ``out/report.html`` (self-contained: figures and thumbnails are embedded); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(render_report(metrics, arrays, media), encoding="utf-8", errors="replace")  # a lone surrogate in a label
    return path
