"""In-process scoring of manifest-style items (no files written): the building block for rewards.

    from mmverify.api import score_items
    rows = score_items([{"task": "i_structure", "instance": {"order": ["it"]},
                         "parts": [{"type": "image", "path": "a.png"}, {"type": "text", "text": "..."}]}])
    rows[0]["score"]  # 1.0

Each item is one manifest line (dict).  Rows come back in input order with exactly the fields of
results.jsonl, one per item -- or, as in ``mmverify score``, one per task for a line naming an
instruction row that feeds several (``a_music_attribute``: ``a_music_instrument`` and
``a_music_tempo``).  Bad items become ``error`` rows, never exceptions: an item holding a value JSON
cannot (a numpy scalar, a set, NaN in the instance) is its own ``malformed_line`` or
``invalid_instance`` row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from .data.instructions import InstructionSet
from .pipelines.execute import LocalExecutor
from .pipelines.plan import Planner
from .pipelines.reward_batch import unwritable_row
from .pipelines.thresholds import Threshold


def score_items(
    items: Iterable[Mapping[str, Any]],
    *,
    base_dir: str | Path = ".",
    instructions: str | Path | InstructionSet | None = None,
    thresholds: Mapping[str, Threshold] | None = None,
    data_root: str | Path | None = None,
    timeout: float | None = None,
    profile: str = "mmmg",
    in_flight: int = 1,
    decode_processes: int = 0,
) -> list[dict[str, Any]]:
    """Score items in this process; relative media paths resolve against ``base_dir``.
    ``in_flight`` > 1 scores that many items at once, their model calls batched (same rows), their
    media decoded by ``decode_processes`` processes when > 0 (see :mod:`mmverify.core.decoding`)."""
    if instructions is not None and not isinstance(instructions, InstructionSet):
        instructions = InstructionSet(instructions)
    planner = Planner(
        manifest_dir=Path(base_dir),
        instructions=instructions,
        data_root=Path(data_root) if data_root else None,
        thresholds=dict(thresholds or {}),
        profile=profile,
    )
    planned: list[Any] = []
    for number, item in enumerate(items, start=1):
        try:
            text = json.dumps(item)  # NaN passes, escaped, to the manifest parser, which refuses it where it reads it
        except (TypeError, ValueError, RecursionError) as exc:
            planned.append(unwritable_row(number, item, exc))
            continue
        planned.extend(planner.plan_all(number, text))
    return list(LocalExecutor(timeout, in_flight=in_flight, decode_processes=decode_processes).run(planned))
