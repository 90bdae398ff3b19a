"""Throughput measurement shared by the front-end benchmarks (best of N, wall and CPU time)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Rate:
    """Best-of-repeats throughput: clips per wall second and per process-CPU second."""

    wall: float
    cpu: float

    def __str__(self) -> str:
        return f"{self.wall:9.1f} clips/s   ({self.cpu:8.1f} per CPU-s)"


def synchronize(device: str) -> None:
    """Wait for queued GPU work, so timings cover it."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def measure(run: Callable[[], Any], clips: int, device: str, repeats: int) -> Rate:
    """Clips per second of ``run`` (which handles ``clips`` clips), best of ``repeats`` after a warm-up."""
    run()
    synchronize(device)
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        synchronize(device)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return Rate(clips / best_wall, clips / max(best_cpu, 1e-9))


def in_batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
