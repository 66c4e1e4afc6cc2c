"""The trained reader's forests evaluated with numpy: each row walks every tree to a leaf, going left at a value
equal to the threshold, and the leaves add up."""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsvc.reading.forest import Forest


def leaf(value: float) -> dict[str, Any]:
    return {"leaf_value": value}


def split(feature: int, threshold: float, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {"split_feature": feature, "threshold": threshold, "decision_type": "<=", "left_child": left, "right_child": right}


# Three trees: one of depth 2 on features 0 and 1, one that is a single leaf, one of depth 1 on feature 2.
DUMP = {
    "tree_info": [
        {"tree_structure": split(0, 0.5, split(1, 2.0, leaf(1.0), leaf(2.0)), leaf(3.0))},
        {"tree_structure": leaf(0.25)},
        {"tree_structure": split(2, -1.0, leaf(-4.0), leaf(4.0))},
    ]
}


def test_each_row_adds_the_leaves_its_values_lead_to() -> None:
    forest = Forest.from_lightgbm(DUMP)
    rows = np.array(
        [
            [0.0, 0.0, 0.0],  # left, left: 1; 0.25; right: 4
            [0.5, 2.0, -1.0],  # on each threshold: left, left: 1; 0.25; left: -4
            [0.6, 9.0, -2.0],  # right: 3; 0.25; left: -4
            [0.1, 2.5, 7.0],  # left, right: 2; 0.25; right: 4
        ]
    )

    assert forest.depth == 2
    assert forest.predict(rows).tolist() == [5.25, -2.75, -0.75, 6.25]
    assert forest.predict(rows[1:2]).tolist() == [-2.75], "one row alone as among others"
    assert forest.predict(np.zeros((0, 3))).tolist() == []


def test_a_forest_read_back_from_its_arrays_predicts_the_same() -> None:
    forest = Forest.from_lightgbm(DUMP)
    rows = np.random.default_rng(0).normal(size=(50, 3))

    again = Forest.from_arrays(forest.arrays("model"), "model")

    assert np.array_equal(again.predict(rows), forest.predict(rows))
