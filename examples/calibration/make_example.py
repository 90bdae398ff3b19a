"""Write a small synthetic calibration example: a scored run folder, its manifest and images, human
labels from three annotators, and preference pairs.

Layout (everything under OUT, default examples/calibration/data)::

    manifest.jsonl          80 generations per task, 2 samples per instruction, model "demo-model"
    gen/*.png               one small image per generation (the fill fades in with the score)
    run/                    what `mmverify score manifest.jsonl --out run` leaves behind:
                            results.jsonl, results.latest.jsonl, summary.json (names the manifest)
    labels.csv              task, instance_id, sample, label (0/1), annotator -- no model column
    pairs.jsonl             task, instance_id, chosen_sample, rejected_sample -- no model either

The scores are drawn at random (they are written into the results directly, not computed from the
images: scoring manifest.jsonl gives other scores).  Each annotator says "good" (1) when the score is above the task's planted cut (0.6 for
i_format_border, 0.45 for i_format_background) but errs 10% of the time, so the fitted thresholds
land near the cuts, agreement near 0.9, and some generations disagree with the verifier.  The
preferred sample of a pair is the higher-scored one 85% of the time.

    .venv/bin/python examples/calibration/make_example.py examples/calibration/data
    .venv/bin/mmverify calibrate examples/calibration/data/run \\
        --labels examples/calibration/data/labels.csv --pairs examples/calibration/data/pairs.jsonl \\
        --out runs/calibration
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from mmverify.core.types import Check
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.summary import summarize, write_summary
from mmverify.tasks.catalog import CATALOG

TASKS = {"i_format_border": 0.6, "i_format_background": 0.45}
INSTANCES = {"i_format_border": {"color": "green"}, "i_format_background": {"color": "green", "region": "left half"}}
INSTRUCTIONS = 40
SIZE = 48
GREEN = np.array([0, 128, 0], dtype=np.float64)
MODEL = "demo-model"


def _image(task: str, score: float, seed: list[int]) -> Image.Image:
    """A grey noisy scene whose border (or left half) blends towards green as the score grows."""
    pixels = np.random.default_rng(seed).normal(140, 25, size=(SIZE, SIZE, 3))
    mask = np.zeros((SIZE, SIZE), dtype=bool)
    if task == "i_format_border":
        band = SIZE // 10
        mask[:band], mask[-band:], mask[:, :band], mask[:, -band:] = True, True, True, True
    else:
        mask[:, : SIZE // 2] = True
    pixels[mask] = (1 - score) * pixels[mask] + score * GREEN
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _annotate(task: str, instance_id: str, sample: int, score: float, rng: np.random.Generator) -> list[list]:
    truth = int(score > TASKS[task])
    return [
        [task, instance_id, sample, truth if rng.random() > 0.1 else 1 - truth, annotator]
        for annotator in ("ann1", "ann2", "ann3")
    ]


def _generations(out: Path, rng: np.random.Generator) -> tuple[list[dict], list[dict], list[list], list[dict]]:
    manifest, rows, labels, pairs = [], [], [], []
    for task in TASKS:
        for i in range(INSTRUCTIONS):
            instance_id = f"{task}/{i}"
            scores = rng.beta(2, 2, size=2)
            for sample, score in enumerate(scores):
                path = f"gen/{task}_{i}_{sample}.png"
                _image(task, float(score), [i, sample, len(task)]).save(out / path)
                manifest.append({"task": task, "instance_id": instance_id, "sample": sample, "model": MODEL,
                                 "instance": INSTANCES[task], "parts": [{"type": "image", "path": path}]})  # fmt: skip
                rows.append(make_row(
                    task=task, instance_id=instance_id, sample=sample, model=MODEL, key=f"{task}-{i}-{sample}",
                    line=len(rows) + 1, verifier=f"{task}@{CATALOG[task].version}:mmmg", check=Check(score=float(score)),
                ))  # fmt: skip
                labels += _annotate(task, instance_id, sample, float(score), rng)
            better = int(np.argmax(scores)) if rng.random() > 0.15 else int(np.argmin(scores))
            pairs.append({"task": task, "instance_id": instance_id, "chosen_sample": better, "rejected_sample": 1 - better})
    return manifest, rows, labels, pairs


def main(out: Path) -> None:
    rng = np.random.default_rng(2026)
    (out / "gen").mkdir(parents=True, exist_ok=True)
    (out / "run").mkdir(exist_ok=True)
    manifest, rows, labels, pairs = _generations(out, rng)
    manifest_path = out / "manifest.jsonl"
    manifest_path.write_text("".join(json.dumps(m) + "\n" for m in manifest), encoding="utf-8")
    results = "".join(dumps_row(r) + "\n" for r in rows)
    (out / "run" / "results.jsonl").write_text(results, encoding="utf-8")
    (out / "run" / "results.latest.jsonl").write_text(results, encoding="utf-8")
    write_summary(summarize(rows, config={"manifest": str(manifest_path.resolve())}), out / "run" / "summary.json")
    with open(out / "labels.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["task", "instance_id", "sample", "label", "annotator"])
        writer.writerows(labels)
    (out / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    print(f"wrote {len(rows)} results (run/), {len(manifest)} manifest lines, {len(labels)} labels, {len(pairs)} pairs to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/calibration/data"))
