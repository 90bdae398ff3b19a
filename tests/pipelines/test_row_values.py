"""The values of a results row: any evidence a verifier returns becomes JSON-safe the same way."""

from __future__ import annotations

import enum
import json
import math
import random
from typing import Any, Mapping

import numpy as np

from mmverify.pipelines.results import _clean, make_row


def reference_clean(value: Any) -> Any:
    """The rule, written plainly: mappings to dicts with str keys, sequences to lists, numpy values to
    Python ones, non-finite floats to None, everything else as it is."""
    if isinstance(value, Mapping):
        return {str(key): reference_clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [reference_clean(item) for item in value]
    if hasattr(value, "tolist"):
        return reference_clean(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Level(enum.IntEnum):
    LOW = 1


class Name(str):
    """A str subclass (as a str-valued enum would be)."""


class Ratio(float):
    """A float subclass."""


def random_value(rng: random.Random, depth: int = 0) -> Any:
    leaves = [
        lambda: rng.choice(["", "a", "é", "line\nbreak"]), lambda: rng.randint(-5, 5), lambda: rng.random() > 0.5, lambda: None,
        lambda: rng.choice([0.5, -0.0, math.nan, math.inf, -math.inf, 1e-300]), lambda: Level.LOW, lambda: Name("named"),
        lambda: Ratio(rng.choice([0.25, math.nan, math.inf])), lambda: np.float32(rng.choice([0.1, np.nan, np.inf])),
        lambda: np.int64(rng.randint(0, 9)), lambda: np.bool_(rng.random() > 0.5),
        lambda: np.array([rng.random(), np.nan], dtype=rng.choice([np.float32, np.float64])),
    ]  # fmt: skip
    if depth < 3 and rng.random() < 0.4:
        children = [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        shape = rng.choice(["dict", "list", "tuple"])
        if shape == "dict":
            return {rng.choice(["k", 1, 2.5, ("t",)]) if i else f"key{i}": child for i, child in enumerate(children)}
        return children if shape == "list" else tuple(children)
    return rng.choice(leaves)()


def test_evidence_is_cleaned_as_the_plain_rule_says_on_seeded_random_values():
    rng = random.Random(20261126)
    for _ in range(2000):
        value = random_value(rng)
        cleaned, expected = _clean(value), reference_clean(value)
        assert json.dumps(cleaned, allow_nan=False) == json.dumps(expected, allow_nan=False)
        assert repr(cleaned) == repr(expected)  # the same types too (an IntEnum stays one, as before)


def test_a_row_carries_cleaned_components_and_evidence():
    from mmverify.core.types import Check

    check = Check(score=1.0, passed=True, components={"sim": np.float32(0.5)}, evidence={"bad": math.nan, "pair": (1, np.int64(2))})
    row = make_row(task="t", instance_id="i", sample=0, model=None, key="k", line=1, verifier=None, check=check, passed=True)
    assert row["components"] == {"sim": 0.5} and row["evidence"] == {"bad": None, "pair": [1, 2]}
    assert type(row["components"]["sim"]) is float and type(row["evidence"]["pair"][1]) is int
