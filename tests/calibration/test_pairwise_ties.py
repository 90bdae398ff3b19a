"""Pairwise tie policies: "difference up to epsilon" holds for the decimal numbers as written
(0.4 - 0.3 is exactly 0.1 for it), judged against exact decimal arithmetic; a pair of one
generation with itself is refused."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from mmverify.calibration.pairwise import Pair, load_pairs, pair_credit


def _exact_credit(chosen: float, rejected: float, epsilon: float) -> float:
    """The epsilon policy in exact decimal arithmetic on the numbers as written."""
    difference = Decimal(repr(chosen)) - Decimal(repr(rejected))
    if abs(difference) <= Decimal(repr(epsilon)):
        return 0.5
    return 1.0 if difference > 0 else 0.0


def test_the_reviewers_grid_cases_are_all_ties():
    tenths = [i / 10 for i in range(11)]
    exact = [(a, b) for a in tenths for b in tenths if round(a - b, 10) == 0.1]
    assert len(exact) == 10 and all(pair_credit(a, b, "epsilon", 0.1) == 0.5 for a, b in exact)  # 0.4 vs 0.3 gave 1.0
    hundredths = [(a / 100, (a - 2) / 100) for a in range(2, 101)]
    assert all(pair_credit(a, b, "epsilon", 0.02) == 0.5 for a, b in hundredths)  # 69 of 99 gave 1.0
    assert all(pair_credit(b, a, "epsilon", 0.02) == 0.5 for a, b in hundredths)


@pytest.mark.parametrize("step, epsilons", [(10, (0.1, 0.2, 0.3)), (100, (0.01, 0.02, 0.05, 0.07)), (1000, (0.001, 0.003))])
def test_epsilon_policy_matches_exact_decimal_arithmetic_on_decimal_grids(step, epsilons):
    grid = [i / step for i in range(0, step + 1, max(1, step // 100))]
    for epsilon in epsilons:
        for a in grid:
            for b in grid:
                assert pair_credit(a, b, "epsilon", epsilon) == _exact_credit(a, b, epsilon), (a, b, epsilon)


def test_epsilon_policy_on_large_scores_and_just_outside_the_band():
    for base in (1.0, 100.0, 12345.0):
        for k in range(1, 50):
            a, b = base + k / 100, base + (k - 2) / 100  # written differences of 0.02
            assert pair_credit(a, b, "epsilon", 0.02) == _exact_credit(round(a, 2), round(b, 2), 0.02) == 0.5
    assert pair_credit(0.33, 0.3, "epsilon", 0.02) == 1.0 and pair_credit(0.3, 0.33, "epsilon", 0.02) == 0.0
    assert pair_credit(0.5 + 2e-9, 0.48, "epsilon", 0.02) == 1.0  # a real excess is not forgiven
    assert pair_credit(0.52, 0.5, "half") == 1.0 and pair_credit(0.5, 0.5, "strict") == 0.0  # other policies: exact equality


def test_a_pair_of_one_generation_with_itself_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="chosen and rejected are the same generation"):
        Pair("a", 0, 0)
    with pytest.raises(ValueError, match="same generation"):
        Pair("a", 1, 1, chosen_model="m", rejected_model="m")
    assert Pair("a", 0, 0, chosen_model="m1", rejected_model="m2").chosen_sample == 0  # two models' sample 0
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"instance_id": "a", "chosen_sample": 0, "rejected_sample": 1}) + "\n"
                    + json.dumps({"instance_id": "a", "chosen_sample": 2, "rejected_sample": 2}) + "\n")  # fmt: skip
    with pytest.raises(ValueError, match="pairs.jsonl record 2: a: chosen and rejected are the same generation"):
        load_pairs(path)


def test_a_pair_whose_sides_match_one_row_is_refused():
    """A side without a model matches the one model's row that the other side names."""
    from mmverify.calibration.pairwise import pairwise_accuracy

    row = {"task": "t", "instance_id": "a", "sample": 0, "model": "m", "status": "scored", "score": 0.5, "key": "k"}
    other = {**row, "sample": 1, "key": "k1", "score": 0.2}
    with pytest.raises(ValueError, match="chosen and rejected are the same generation"):
        pairwise_accuracy([row, other], [Pair("a", 0, 0, chosen_model="m")])
    assert pairwise_accuracy([row, other], [Pair("a", 0, 1, chosen_model="m")])["overall"]["accuracy"] == 1.0


def test_a_component_that_is_no_number_is_a_missing_component():
    from mmverify.calibration.labels import component_value

    row = {"score": 0.5, "components": {"ssim": [0.1, 0.2], "ok": True, "inf": float("inf"), "good": 0.25}}
    assert [component_value(row, name) for name in ("ssim", "ok", "inf", "good", "score", "absent")] == [None, None, None, 0.25, 0.5, None]
    assert component_value({"score": float("nan"), "components": None}, "score") is None
    assert component_value({"score": 1, "components": "junk"}, "ssim") is None


def test_unreadable_label_and_pair_files_name_the_file_and_line(tmp_path: Path):
    from mmverify.calibration.labels import load_labels
    from mmverify.calibration.matching import RowIndex

    latin = tmp_path / "labels.csv"
    latin.write_bytes("instance_id,sample,label\ncafé/0,0,1\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"labels.csv: not UTF-8 text"):
        load_labels(latin)
    numbered = tmp_path / "labels.jsonl"
    numbered.write_text('{"instance_id": 0, "sample": 0, "label": 1}\n')
    with pytest.raises(ValueError, match=r"labels.jsonl:1: 'instance_id' must be a string, got 0"):
        load_labels(numbered)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"instance_id": "a", "chosen_sample": 0, "rejected_sample": 1}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"pairs.jsonl:2: invalid JSON"):
        load_pairs(pairs)
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text(json.dumps({"instance_id": "a", "chosen_sample": 0, "rejected_sample": 1, "chosen_model": "m "}) + "\n")
    assert load_pairs(spaced)[0].chosen_model == "m"  # trimmed, as labels' columns are
    with pytest.raises(ValueError, match=r"results row a \(line 3\): sample 'x' is not an integer"):
        RowIndex([{"instance_id": "a", "sample": "x", "line": 3}])
