"""DreamSim image similarity: pairs per second, one pair per forward vs many, through mmverify's backend.

Runs with any Python that has torch and dreamsim (mmverify is imported from ./src).  It writes
random-init weights in the layout of dreamsim's releases -- the default ``ensemble`` (DINO, CLIP
and OpenCLIP ViT-B/16 backbones) or ``--type open_clip_vitb32`` -- with narrow backbones by default,
dreamsim's real ViT-B sizes with ``--full``; nothing else is written or downloaded.  Seeded
synthetic images of assorted sizes go through the backend (each resized to 224x224 there):

- *one by one*: batch shape 1, one call per pair;
- *batched*: batch shape ``--batch-size``, all pairs in one call;

and a pair scored alone on the batched backend (padded to its batch shape) is checked to give the
bytes it got inside the batch.  Timings are the best of ``--repeats``.

    python3 benchmarks/dreamsim_batching.py --pairs 32
    python3 benchmarks/dreamsim_batching.py --full --device cuda --pairs 1024 --batch-size 64
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from batched_scoring import best_rate  # noqa: E402  (this folder: best of --repeats timings)

NARROW_WIDTH = 64


def synth_pairs(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A picture and a shifted, re-tinted copy of it: similar, never identical."""
    rng = np.random.default_rng(5)
    pairs = []
    for _ in range(count):
        height, width = int(rng.integers(160, 400)), int(rng.integers(160, 400))
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        edited = np.roll(image, int(rng.integers(1, 20)), axis=1)
        edited[..., int(rng.integers(0, 3))] //= 2
        pairs.append((image, edited))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--type", default="ensemble", choices=("ensemble", "open_clip_vitb32"), help="DreamSim type")
    parser.add_argument("--full", action="store_true", help="dreamsim's ViT-B backbones (else narrow ones)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rows", default="auto", choices=("auto", "content", "packed"), help="where inputs sit in a batch (auto: by content on a CPU)")
    parser.add_argument("--check", type=int, default=8, help="pairs scored alone on the batched backend, for the identity check")
    args = parser.parse_args()

    from mmverify.envfix import install_torchvision_op_stubs

    install_torchvision_op_stubs()  # dreamsim imports torchvision
    from mmverify.models.dreamsim import DreamSimBackend
    from mmverify.testing.dreamsim_release import narrow_backbones, write_release

    width = None if args.full else NARROW_WIDTH
    pairs = synth_pairs(args.pairs)
    with tempfile.TemporaryDirectory() as tmp, narrow_backbones(width):
        folder = write_release(Path(tmp) / "dreamsim", args.type, width)
        source = f"{args.type}@{folder}"
        single = DreamSimBackend(source=source, device=args.device, batch_size=1)
        batched = DreamSimBackend(source=source, device=args.device, batch_size=args.batch_size, rows=args.rows)
        single.similarity(pairs[:1]), batched.similarity(pairs[:1])  # loads outside the timing
        one_rate, one_scores = best_rate(lambda: [single.similarity([pair])[0] for pair in pairs], len(pairs), args.repeats)
        batch_rate, batch_scores = best_rate(lambda: batched.similarity(pairs), len(pairs), args.repeats)
        alone = [batched.similarity([pair])[0] for pair in pairs[: args.check]]
    size = "ViT-B" if args.full else f"narrow ({NARROW_WIDTH}-wide)"
    print(f"{args.pairs} image pairs, DreamSim {args.type} with {size} random-init backbones on {args.device}, "
          f"batch shape {args.batch_size}, rows {args.rows}, best of {args.repeats}")  # fmt: skip
    print(f"{'one by one':>16} {'batched':>16} {'speed-up':>9}  alone = in batch  max |delta| vs batch shape 1")
    identical = alone == batch_scores[: args.check]
    delta = float(np.max(np.abs(np.asarray(one_scores) - np.asarray(batch_scores))))
    print(f"{one_rate:9.1f} pairs/s {batch_rate:9.1f} pairs/s {batch_rate / one_rate:8.2f}x  {'yes' if identical else 'NO':>16}  {delta:.2g}")


if __name__ == "__main__":
    main()
