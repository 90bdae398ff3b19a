"""Labels and pairs find their results rows, or say why not; label values are checked."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mmverify.calibration.labels import Label, adjudicate, check_label_values, join, load_labels
from mmverify.calibration.matching import MatchingError, RowIndex, require, required_matches
from mmverify.calibration.pairwise import Pair, load_pairs, pairwise_accuracy


def _row(task: str, instance: str, sample: int, score: float | None, model: str | None = None, **components: float) -> dict:
    return {
        "task": task, "instance_id": instance, "sample": sample, "model": model,
        "status": "scored" if score is not None else "error", "score": score, "components": components,
        "line": sample + 1,
    }  # fmt: skip


ROWS = [
    _row("t", "t/0", 0, 0.9, "m1", ssim=0.8),
    _row("t", "t/0", 1, 0.2, "m1"),
    _row("t", "t/1", 0, None, "m1"),  # an error row
    _row("a_music_attribute", "music/0", 0, 0.7, "m1"),
    _row("a_music_exclude", "music/0", 0, 0.1, "m1"),
    _row("u", "u/0", 0, 0.6, "m1"),
    _row("u", "u/0", 0, 0.4, "m2"),
    # second samples, for pairs (a pair compares two different generations)
    _row("t", "t/1", 1, 0.5, "m1"),
    _row("a_music_attribute", "music/0", 1, 0.3, "m1"),
    _row("a_music_exclude", "music/0", 1, 0.2, "m1"),
    _row("u", "u/0", 1, 0.5, "m1"),
    _row("u", "u/0", 1, 0.5, "m2"),
]


@pytest.mark.parametrize(
    "instance, sample, task, model, reason",
    [
        ("t/9", 0, None, None, "no_instance"),
        ("t/0", 7, None, None, "no_sample"),
        ("t/0", 0, "other", None, "task"),
        ("t/0", 0, None, "m9", "model"),
        ("t/1", 0, None, None, "error"),
        ("music/0", 0, None, None, "ambiguous"),  # one instance feeds two tasks
        ("u/0", 0, None, None, "ambiguous"),  # two models
        ("t/0", 0, None, None, None),  # a label without a model matches a row that has one
        ("music/0", 0, "a_music_exclude", None, None),
        ("u/0", 0, None, "m2", None),
    ],
)
def test_every_unmatched_label_gets_its_reason(instance, sample, task, model, reason):
    row, found = RowIndex(ROWS).find(instance, sample, task, model)
    assert found == reason
    assert (row is None) == (reason is not None)


def test_join_counts_matches_and_reasons_with_examples():
    labels = {
        (None, "t/0", 0, None): 1, (None, "t/0", 1, None): 0, (None, "t/9", 0, None): 1, (None, "t/8", 0, None): 1,
        (None, "t/1", 0, None): 0, (None, "u/0", 0, None): 1, ("u", "u/0", 0, "m2"): 0,
    }  # fmt: skip
    joined = join(ROWS, labels, {"t": "ssim"})
    report = joined.matching.as_dict()
    assert report["total"] == 7 and report["matched"] == 2 and report["unmatched"] == 5
    assert report["reasons"]["no_instance"]["count"] == 2
    assert report["reasons"]["no_instance"]["examples"] == ["t/9 sample 0", "t/8 sample 0"]
    assert report["reasons"]["missing_component"]["examples"] == ["t/0 sample 1"]  # that row has no ssim
    assert set(report["reasons"]) == {"no_instance", "error", "ambiguous", "missing_component"}
    assert joined.values == {"t": [0.8], "u": [0.4]}
    assert joined.items["u"] == [{"instance_id": "u/0", "sample": 0, "model": "m2", "line": 1}]
    assert (joined.unmatched, joined.ambiguous, joined.missing_component) == (3, 1, 1)


@pytest.mark.parametrize("total, minimum, needed", [(80, 10, 10), (5, 10, 5), (0, 10, 1), (50, 0, 1)])
def test_required_matches_is_the_minimum_or_everything_when_fewer(total, minimum, needed):
    assert required_matches(total, minimum) == needed


def test_require_names_what_did_not_match_and_why():
    joined = join(ROWS, {(None, "t/9", 0, None): 1, (None, "t/0", 0, None): 1}, {})
    with pytest.raises(MatchingError) as error:
        require(joined.matching.as_dict(), min_matched=10, what="labelled items")
    message = str(error.value)
    assert "need 2" in message and "1 of 2 labelled items matched" in message
    assert "no results row has this instance_id (first: t/9 sample 0)" in message
    require(joined.matching.as_dict(), min_matched=1, what="labelled items")  # one is enough when asked for one


def _write_labels(path: Path, values: list) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance_id", "sample", "label"])
        writer.writerows([[f"t/{i}", 0, v] for i, v in enumerate(values)])
    return path


def test_mixed_label_values_are_refused_with_the_values_found(tmp_path: Path):
    labels = load_labels(_write_labels(tmp_path / "l.csv", [1, "yes", 0, 1]))
    with pytest.raises(ValueError) as error:
        check_label_values(labels)
    assert str(error.value).startswith('label values must be 0/1 (or true/false); found: 0, 1, "yes" (first unusable: "yes" for t/1 sample 0)')


def test_true_and_false_are_binary_labels(tmp_path: Path):
    labels = load_labels(_write_labels(tmp_path / "l.csv", ["true", "False", 1, "0"]))
    assert [label.label for label in check_label_values(labels)] == [1, 0, 1, 0]
    json_labels = tmp_path / "l.jsonl"
    json_labels.write_text('{"instance_id": "t/0", "label": true}\n{"instance_id": "t/1", "label": 0.0}\n')
    assert [label.label for label in check_label_values(load_labels(json_labels))] == [1, 0]


def test_a_csv_written_with_spaces_after_its_commas_reads_as_without(tmp_path: Path):
    spaced = tmp_path / "spaced.csv"
    spaced.write_text("task, instance_id, sample, label\ni_structure, t/0, 0, 1\ni_structure,  t/1 , 1, 0\n")
    assert load_labels(spaced) == [Label("t/0", 0, 1, task="i_structure"), Label("t/1", 1, 0, task="i_structure")]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("instance_id, chosen_sample, rejected_sample\n t/0 , 1, 0\n")
    assert [pair.instance_id for pair in load_pairs(pairs)] == ["t/0"]
    blank = tmp_path / "blank.csv"
    blank.write_text("instance_id,label\n  ,1\n")
    with pytest.raises(ValueError, match="'instance_id' is required"):
        load_labels(blank)


def test_three_level_labels_need_the_three_way_kind(tmp_path: Path):
    labels = load_labels(_write_labels(tmp_path / "l.csv", [0, 1, 2]))
    with pytest.raises(ValueError, match="need --label-kind three-way"):
        check_label_values(labels)
    assert [label.label for label in check_label_values(labels, "three-way")] == [0, 1, 2]
    with pytest.raises(ValueError, match="found: 0.5, 1"):
        check_label_values([Label("t/0", 0, 0.5), Label("t/1", 0, 1)], "three-way")
    with pytest.raises(ValueError, match="label kind"):
        check_label_values(labels, "categorical")


def test_adjudication_after_normalising_counts_true_and_one_as_the_same_vote():
    labels = check_label_values([Label("t/0", 0, True, "a"), Label("t/0", 0, 1, "b"), Label("t/0", 0, "false", "c")])
    assert adjudicate(labels).labels == {(None, "t/0", 0, None): 1}


def test_pairs_without_a_model_match_rows_that_have_one():
    report = pairwise_accuracy(ROWS, [Pair("t/0", 0, 1)])
    assert report["matching"]["matched"] == 1 and report["tasks"]["t"]["accuracy"] == 1.0


@pytest.mark.parametrize(
    "pair, reason",
    [
        (Pair("t/0", 0, 5), "no_sample"),
        (Pair("t/0", 0, 1, chosen_model="m9"), "model"),
        (Pair("t/0", 0, 1, task="zzz"), "task"),
        (Pair("u/0", 0, 1), "ambiguous"),  # two models and the pair names neither
        (Pair("music/0", 0, 1), "ambiguous"),  # two tasks shared by both sides
        (Pair("t/1", 0, 1), "error"),
    ],
)
def test_unmatched_pairs_get_their_reason(pair, reason):
    report = pairwise_accuracy(ROWS, [pair])
    assert report["matching"]["matched"] == 0 and report["unmatched"] == 1
    assert list(report["matching"]["reasons"]) == [reason]


def test_pairs_of_two_models_on_one_instance_compare_across_models():
    report = pairwise_accuracy(ROWS, [Pair("u/0", 0, 0, chosen_model="m2", rejected_model="m1")], policy="strict")
    assert report["matching"]["matched"] == 1 and report["tasks"]["u"]["accuracy"] == 0.0  # 0.4 < 0.6
