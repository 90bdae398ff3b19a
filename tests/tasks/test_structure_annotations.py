"""i_structure / a_structure: an unusable `order` annotation is the data's typed error."""

from __future__ import annotations

import pytest

from mmverify.pipelines.reward import Reward


@pytest.mark.parametrize("order", [5, True, [], {}, {"t": 1}, [""], ["tx"], [["t"]]])
def test_an_unusable_order_is_an_invalid_instance(order):
    [row] = Reward("i_structure")([({"order": order}, ["just text"])]).rows
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", row
    assert "non-empty list of strings of t/i/a" in row["error"]["message"]


@pytest.mark.parametrize("order,score", [("t", 1.0), (["it", "t"], 1.0), (["i"], 0.0)])
def test_a_usable_order_scores(order, score):
    assert Reward("i_structure")([({"order": order}, ["just text"])]).scores == [score]
