"""Region + border solid-fill scoring throughput: mmverify vs a straightforward skimage version.

Both score the same 1024x1024 PNG files in the same process, decoding each file themselves:
mmverify through its media module and numba kernels, the baseline with PIL crops, skimage's
structural_similarity against a flat image and a numpy over-fill count (tests/reference).

    .venv/bin/python benchmarks/fill.py [--images 24] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image
from skimage import data, transform

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mmverify.core.media import load_image  # noqa: E402
from mmverify.verifiers.image.fill import NAMED_COLORS, check_solid_border, check_solid_region, region_boxes  # noqa: E402
from tests.reference import fill_skimage as baseline  # noqa: E402

SIZE = 1024
REGIONS = sorted(baseline.REGIONS)
COLORS = sorted(NAMED_COLORS)


def photo(index: int) -> np.ndarray:
    sources = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    image = transform.resize(sources[index % len(sources)], (SIZE, SIZE), anti_aliasing=True)
    return (image * 255).astype(np.uint8)


def make_cases(folder: Path, count: int) -> list[tuple[Path, str, str]]:
    """Half border tasks, half region tasks; fills drawn with mild noise so SSIM is non-trivial."""
    rng = np.random.default_rng(0)
    cases = []
    for i in range(count):
        image = photo(i)
        color = COLORS[i % len(COLORS)]
        if i % 2 == 0:
            where = "border"
            band = round(0.1 * SIZE)
            for sl in (np.s_[:band], np.s_[-band:], np.s_[:, :band], np.s_[:, -band:]):
                image[sl] = NAMED_COLORS[color]
        else:
            where = REGIONS[(i // 2) % len(REGIONS)]
            x0, y0, x1, y1 = region_boxes(where, SIZE, SIZE)[0]
            image[y0:y1, x0:x1] = NAMED_COLORS[color]
        noise = rng.normal(0, 4, image.shape)
        image = np.clip(image + noise, 0, 255).astype(np.uint8)
        path = folder / f"case_{i:03d}.png"
        Image.fromarray(image).save(path)
        cases.append((path, color, where))
    return cases


def score_mmverify(path: Path, color: str, where: str) -> float:
    image = load_image(path)
    check = check_solid_border(image, color) if where == "border" else check_solid_region(image, where, color)
    return check.score


def score_baseline(path: Path, color: str, where: str) -> float:
    with Image.open(path) as image:
        image = image.convert("RGB")
        return baseline.score_border(image, color) if where == "border" else baseline.score_region(image, where, color)


def timed(fn, cases, repeat: int) -> tuple[float, list[float]]:
    best = float("inf")
    scores: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        scores = [fn(*case) for case in cases]
        best = min(best, time.perf_counter() - start)
    return len(cases) / best, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = make_cases(Path(tmp), args.images)
        score_mmverify(*cases[0])  # compile / load the numba kernels outside the timing
        ours, our_scores = timed(score_mmverify, cases, args.repeat)
        theirs, their_scores = timed(score_baseline, cases, args.repeat)
        decode, _ = timed(lambda p, c, w: load_image(p), cases, args.repeat)
    delta = max(abs(a - b) for a, b in zip(our_scores, their_scores))
    print(f"{len(cases)} images {SIZE}x{SIZE} PNG, half border / half region, best of {args.repeat}")
    print(f"{'implementation':<34}{'images/s':>10}")
    print(f"{'skimage baseline (PIL crops)':<34}{theirs:>10.1f}")
    print(f"{'mmverify':<34}{ours:>10.1f}")
    print(f"{'(PNG decode alone)':<34}{decode:>10.1f}")
    print(f"speed-up: {ours / theirs:.1f}x   max |delta score|: {delta:.2e}")


if __name__ == "__main__":
    main()
