"""The raw-text JSON checks the reward server runs before decoding a body: counted values and
nesting depth agree with the decoded document, and a scan never starts over inside text it has
already passed (an unclosed string with many escaped quotes once made it quadratic)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from mmverify.pipelines import reward_json
from mmverify.pipelines.reward_json import count_json_values, json_depth

TRICKY = ['"', "\\", "[", "]", "{", "}", ",", ":", "é", "\n", "\u2028", "a"]


def random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["list", "dict", "str", "num", "lit"] if depth < 6 else ["str", "num", "lit"])
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "dict":
        return {"".join(rng.choices(TRICKY, k=rng.randint(0, 5))): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    if kind == "str":
        return "".join(rng.choices(TRICKY, k=rng.randint(0, 8)))
    return rng.choice([0, -1.5, 10**30, True, False, None]) if kind == "lit" else rng.uniform(-1e6, 1e6)


def reference_count(value: Any) -> int:
    """Containers plus the separators between their elements, from the decoded value."""
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    return 1 + max(len(value) - 1, 0) + sum(reference_count(item) for item in value)


def reference_depth(value: Any) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    return 1 + max((reference_depth(item) for item in value), default=0)


@pytest.mark.parametrize("seed", range(300))
def test_counts_and_depths_on_the_raw_text_agree_with_the_decoded_document(seed):
    rng = random.Random(seed)
    value = random_value(rng)
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5, separators=rng.choice([(",", ":"), (", ", ": ")]))
    assert json.loads(text) == value
    for document in (text, text.encode()):
        assert count_json_values(document, 10**6) == 1 + reference_count(value)
        limit = rng.randint(0, 8)
        assert (json_depth(document, limit) > limit) == (reference_depth(value) > limit)


def test_text_after_an_unclosed_string_is_not_counted():
    for tail in ('[,{,' * 50, '\\"[,' * 50, "[,\\", "\\\n[,"):
        document = '[1, "' + tail
        assert count_json_values(document, 10**6) == 3  # the document, '[' and ','
        assert count_json_values(document.encode(), 10**6) == 3
        assert json_depth("[" * 5 + '"' + tail, 2) == 5


@pytest.mark.parametrize("seed", range(50))
def test_a_string_match_that_starts_at_a_quote_never_fails(seed):
    # what keeps a scan linear: each quote opens a match that ends at a closing quote or at the end
    # of the text, so no stretch of text is scanned again from a later quote
    rng = random.Random(seed)
    text = "".join(rng.choices(['"', "\\", "a", "[", ",", "\n"], k=rng.randint(1, 200)))
    for pattern in (reward_json._COUNTED, reward_json._NESTING):
        for kind, sample in ((str, text), (bytes, text.encode())):
            for at in (i for i, char in enumerate(text) if char == '"'):
                match = pattern[kind].match(sample, at)
                assert match is not None and match.lastindex == 1, (text, at)
