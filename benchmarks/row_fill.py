"""How full batches are when inputs sit in the row their content picks (``rows=content``).

Runs the project's own row placement (:class:`mmverify.models.rows.RowQueue`) on seeded random
inputs, with no model and no clock, in two settings:

- *during a run*: ``n`` items in flight, each waiting with one input; a batch takes one input per
  wanted row, and every item it answers is back with a new input before the next batch starts --
  a run whose model is the slow part.  (Where preparing items is the slow part, the scheduler
  starts a batch once twice a batch waits, see ``models/batching.py``: the ``n=2x`` figure.)
- *a bulk call*: ``n`` inputs at once and no more (a Reward call, or the end of a run): as many
  batches as the most inputs any one row is wanted by.

Packed rows fill every batch; these are the fractions rows by content reach, the price of their
guarantee (an input gives the same bytes whatever else shares its batch).

    python3 benchmarks/row_fill.py
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mmverify.models.rows import RowQueue, Waiting, content_digest  # noqa: E402


def _add(queue: RowQueue, rng: random.Random) -> None:
    value = rng.getrandbits(62)
    queue.add(Waiting(value, None, content_digest(value)))


def fill_during_a_run(rows: int, in_flight: int, batches: int, seed: int) -> float:
    rng = random.Random(seed)
    queue = RowQueue(rows)
    for _ in range(in_flight):
        _add(queue, rng)
    taken = 0
    for _ in range(batches):
        layer = queue.layer()
        taken += len(layer)
        for _ in layer:  # the items answered come back with new inputs
            _add(queue, rng)
    return taken / (batches * rows)


def fill_of_a_bulk_call(rows: int, inputs: int, calls: int, seed: int) -> float:
    rng = random.Random(seed)
    batches = 0
    for _ in range(calls):
        queue = RowQueue(rows)
        for _ in range(inputs):
            _add(queue, rng)
        batches += sum(1 for _ in queue.layers())
    return inputs * calls / (batches * rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="8,16,32,128", help="batch sizes, comma-separated")
    parser.add_argument("--ratios", default="1,2,4,8", help="inputs in flight per row, comma-separated")
    parser.add_argument("--batches", type=int, default=2000, help="batches simulated per run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ratios = [int(r) for r in args.ratios.split(",")]
    print("fill of a batch with rows by content (packed: 1.00); n = inputs in flight or in the call")
    print(f"{'rows':>5}  " + "  ".join(f"{f'n={r}x run':>10} {f'n={r}x bulk':>10}" for r in ratios))
    for rows in (int(r) for r in args.rows.split(",")):
        cells = []
        for ratio in ratios:
            run = fill_during_a_run(rows, ratio * rows, args.batches, args.seed)
            bulk = fill_of_a_bulk_call(rows, ratio * rows, max(1, args.batches // (4 * ratio)), args.seed)
            cells.append(f"{run:10.2f} {bulk:10.2f}")
        print(f"{rows:5d}  " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
