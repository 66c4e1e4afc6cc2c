"""The trained reader's forests evaluated with numpy: each row walks every tree to a leaf, going left at a value
equal to the threshold, and the leaves add up."""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsvc.reading.forest import Forest
from ragsvc.reading.trained import Model


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


def test_a_row_alone_gets_the_leaves_it_gets_among_others_on_the_shipped_forests() -> None:
    """One row takes its own walk (`Forest._predict_one`): on the shipped model's forests, each row alone predicts
    exactly what it predicts within a batch, values on a split's threshold included."""
    rng = np.random.default_rng(7)
    model = Model.load()
    for forest in (model.chunks, model.sentences, model.answers):
        splits = forest.feature >= 0
        rows = rng.normal(size=(60, int(forest.feature.max()) + 1)) * 3
        at = rng.integers(0, int(splits.sum()), size=180)
        rows[np.arange(60).repeat(3), forest.feature[splits][at]] = forest.threshold[splits][at]

        together = forest.predict(rows)

        alone = np.concatenate([forest.predict(rows[i : i + 1]) for i in range(len(rows))])
        assert np.array_equal(alone, together)
        assert np.unique(together).size > 30, "the rows reach different leaves"
