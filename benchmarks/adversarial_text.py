"""Time of the text scans a long adversarial text used to make quadratic, beside the expressions
they replace (the published ones), at growing sizes.

    python3 benchmarks/adversarial_text.py            # sizes 10,000 and 40,000; now also at 160,000

Each row is one input shape that made an expression try every opener to the end of the text; the
figures are seconds for one call (best of three).  Runs with any Python that has the project's
dependencies (mmverify is imported from ./src).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mmverify.tasks.reasoning import first_between_marks  # noqa: E402
from mmverify.verifiers.image.svg import find_svg  # noqa: E402
from mmverify.verifiers.structure import modality_sequence  # noqa: E402
from mmverify.verifiers.text.brackets import drop_bracketed  # noqa: E402
from mmverify.verifiers.text.format import titles  # noqa: E402


def _joined(parts: list[tuple[str, str]]) -> str:
    """The modality sequence's text as it was kept: one string grown part by part, in a closure."""
    pending = ""

    def grow(text: str) -> None:
        nonlocal pending
        pending += text

    for _, text in parts:
        grow(text)
    return pending


CASES: list[tuple[str, Callable[[int], object], Callable[[object], object], Callable[[object], object]]] = [
    ("Whisper brackets, '(' * n", lambda n: "(" * n,
     lambda t: re.sub(r"\(([^)]+?)\)", "", re.sub(r"[<\[][^>\]]*[>\]]", "", t)), lambda t: drop_bracketed(t)),
    ("<<pattern>>, '<' * n", lambda n: "<" * n, lambda t: re.search(r"<<(.*?)>>", t), lambda t: first_between_marks(t, False)),
    ("IFEval title, '<' * n", lambda n: "<" * n, lambda t: re.findall(r"<<[^\n]+>>", t), titles),
    ("SVG in an instruction, '<svg ' * n/5", lambda n: "<svg " * (n // 5),
     lambda t: re.search(r"<svg\b.*</svg\s*>", t, re.I | re.S), find_svg),
    ("modality sequence, n text parts of 10", lambda n: [("text", "x" * 10)] * n, _joined, modality_sequence),
]


def best_of(call: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,40000", help="comma-separated sizes timed before and now")
    parser.add_argument("--largest", type=int, default=160_000, help="a size timed now only")
    args = parser.parse_args()
    sizes, ours_only = tuple(int(text) for text in args.sizes.split(",") if text), args.largest
    print(f"{'input':44} {'size':>8} {'before s':>9} {'now s':>9}")
    for name, make, before, now in CASES:
        for size in (*sizes, ours_only):
            data = make(size)
            old = best_of(lambda: before(data), 1) if before is not None and size in sizes else None
            new = best_of(lambda: now(data))
            print(f"{name:44} {size:>8} {'-' if old is None else f'{old:.3f}':>9} {new:>9.4f}", flush=True)


if __name__ == "__main__":
    main()
