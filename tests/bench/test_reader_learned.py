"""The learned second stage of bench/reader/learned.py (screened by crosslab, not shipped): its columns, and the
order it gives among the sentence model's top K."""

from __future__ import annotations

import numpy as np
import pytest

from bench.reader.learned import RANKER_FEATURES, learned, ranker_rows
from ragsvc.reading.cross import reranked
from ragsvc.reading.features import SENTENCE_FEATURES
from ragsvc.reading.forest import Forest


def test_the_rankers_columns_are_each_scores_rank_z_and_gap_among_the_top_k_then_the_sentence_row() -> None:
    lexical = np.asarray([3.0, 2.0, 1.0, 0.5])
    cross = {0: 0.0, 1: 2.0, 2: -1.0, 3: 1.0}
    rows = np.arange(4 * len(SENTENCE_FEATURES), dtype=np.float64).reshape(4, -1)
    table = ranker_rows([0, 1, 2], lexical, cross, rows)  # the top 3 only
    assert table.shape == (3, len(RANKER_FEATURES))
    x = {name: table[:, i] for i, name in enumerate(RANKER_FEATURES)}
    assert x["r_s_score"].tolist() == [3.0, 2.0, 1.0] and x["r_s_rank"].tolist() == [0.0, 1.0, 2.0]
    assert x["r_s_gap"].tolist() == [0.0, -1.0, -2.0]
    assert x["r_x_rank"].tolist() == [1.0, 0.0, 2.0] and x["r_x_gap"].tolist() == [-2.0, 0.0, -3.0]
    assert x["r_s_z"] == pytest.approx([1.2247, 0.0, -1.2247], abs=1e-4)
    assert x["r_zsum_score"] == pytest.approx(x["r_s_z"] + x["r_x_z"])
    assert x["r_zsum_rank"].tolist() == [1.0, 0.0, 2.0]  # candidate 1: 0 + 1.07; candidate 0: 1.22 - 0.27
    assert x["r_k"].tolist() == [3.0, 3.0, 3.0]
    assert table[:, -len(SENTENCE_FEATURES) :].tolist() == rows[:3].tolist()


def _stump(column: str, threshold: float, low: float, high: float) -> Forest:
    """One tree: `low` where the column is <= `threshold`, else `high`."""
    i32 = np.int32
    return Forest(feature=np.asarray([RANKER_FEATURES.index(column), -1, -1], dtype=i32),
                  threshold=np.asarray([threshold, 0.0, 0.0]), left=np.asarray([1, -1, -1], dtype=i32),
                  right=np.asarray([2, -1, -1], dtype=i32), value=np.asarray([0.0, low, high]),
                  roots=np.asarray([0], dtype=i32), depth=1)  # fmt: skip


def test_the_learned_order_is_the_rankers_among_the_top_k_ties_in_the_sentence_order() -> None:
    top = [4, 2, 0, 1, 3]  # the sentence model's order
    lexical = np.asarray([3.0, 2.0, 4.0, 0.0, 5.0])
    cross = {4: -2.0, 2: -1.0, 0: 0.0, 1: 2.0, 3: 3.0}
    rows = np.zeros((5, len(SENTENCE_FEATURES)))
    best_cross = _stump("r_x_rank", 0.5, 1.0, 0.0)  # 1 for the cross-encoder's favourite, 0 for the rest
    assert learned(top, lexical, cross, rows, best_cross, 5, quotes=3) == [3, 4, 2]
    assert learned(top, lexical, cross, rows, best_cross, 3, quotes=3) == [0, 4, 2]  # among the top 3 only
    assert learned(top, lexical, cross, rows, best_cross, 5, quotes=2) == [3, 4]
    assert learned([7], lexical, {7: 0.0}, rows, best_cross, 5, quotes=3) == [7]
    by_z_sum = _stump("r_zsum_rank", 0.5, 1.0, 0.0)
    assert learned(top, lexical, cross, rows, by_z_sum, 5, quotes=1) == reranked(top, lexical, cross, 5, quotes=1)
