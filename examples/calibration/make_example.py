"""Write a small synthetic calibration example: results.jsonl, labels.csv (3 annotators), pairs.jsonl.

Scores are drawn at random; each annotator says "good" (1) when the score is above 0.6, but errs 10%
of the time, so the fitted threshold should land near 0.6 and agreement near 0.9.

    .venv/bin/python examples/calibration/make_example.py examples/calibration/data
    .venv/bin/mmverify calibrate examples/calibration/data/results.jsonl \
        --labels examples/calibration/data/labels.csv --pairs examples/calibration/data/pairs.jsonl \
        --out runs/calibration
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from mmverify.core.types import Check
from mmverify.pipelines.results import dumps_row, make_row

TASKS = {"i_format_border": 0.6, "i_format_background": 0.45}


def main(out: Path) -> None:
    rng = np.random.default_rng(2026)
    out.mkdir(parents=True, exist_ok=True)
    rows, labels, pairs = [], [], []
    for task, cut in TASKS.items():
        for i in range(40):
            scores = rng.beta(2, 2, size=2)
            for sample, score in enumerate(scores):
                rows.append(make_row(
                    task=task, instance_id=f"{task}/{i}", sample=sample, model="demo-model", key=f"{task}-{i}-{sample}",
                    line=len(rows) + 1, verifier=f"{task}@1", check=Check(score=float(score)),
                ))  # fmt: skip
                for annotator in ("ann1", "ann2", "ann3"):
                    truth = int(score > cut)
                    labels.append([task, f"{task}/{i}", sample, truth if rng.random() > 0.1 else 1 - truth, annotator])
            better = int(np.argmax(scores)) if rng.random() > 0.15 else int(np.argmin(scores))
            pairs.append({"task": task, "instance_id": f"{task}/{i}", "chosen_sample": better, "rejected_sample": 1 - better})
    (out / "results.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows))
    with open(out / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["task", "instance_id", "sample", "label", "annotator"])
        writer.writerows(labels)
    (out / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    print(f"wrote {len(rows)} results, {len(labels)} labels, {len(pairs)} pairs to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "examples/calibration/data"))
