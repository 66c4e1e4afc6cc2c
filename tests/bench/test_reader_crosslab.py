"""The cross columns and measures of bench/reader/crosslab.py (an offline experiment; no model is run)."""

from __future__ import annotations

import numpy as np

from bench.quality.metrics import auroc
from bench.reader import crosslab
from bench.reader.answerlab import Ctx


def test_the_bootstraps_auroc_is_the_benchmarks_with_ties() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 8, 200).astype(float)  # many ties
    labels = rng.random(200) < 0.4
    expected = auroc(scores.tolist(), labels.tolist())
    assert expected is not None
    assert abs(crosslab._auroc(scores, labels) - expected) < 1e-12


def ctx(owner: int, kind: str, right: bool) -> Ctx:
    return Ctx("c", f"q{owner}", kind, owner, 0, [], right, True, True, ())


def test_oracle_coverage_takes_the_lowest_level_at_which_the_cited_are_right_95_percent() -> None:
    # P: 0.9 right, 0.8 right, 0.7 wrong (unanswerable), 0.6 right, 0.5 wrong; four answerable questions
    ctxs = [ctx(0, "answerable", True), ctx(1, "answerable", True), ctx(2, "unanswerable", False),
            ctx(3, "answerable", True), ctx(4, "answerable", False)]  # fmt: skip
    p = np.asarray([0.9, 0.8, 0.7, 0.6, 0.5])
    assert crosslab.oracle_coverage(p, ctxs, refuse=0.0) == 0.5  # 2 of 4 at P >= 0.8; below, 3 of 4 right at best
    assert crosslab.oracle_coverage(p, ctxs, refuse=0.85) == 0.25  # the refused are never cited


def test_the_paired_bootstrap_measures_each_difference_on_the_same_questions() -> None:
    p = np.asarray([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    good = np.asarray([True, True, False, True, False, False])
    answerable = np.asarray([True, True, True, True, False, True])
    base = crosslab.Answered(p, good, answerable, np.asarray([True, False, False, True, False, False]))
    better = crosslab.Answered(p, good, answerable, np.asarray([True, True, False, True, False, True]))
    compared = crosslab.paired({"c": base, "d": base}, {"c": better, "d": base}, seed=1, rounds=50)
    assert compared["auroc"]["delta"] == compared["answered_and_right"]["delta"] == 0.0
    assert compared["lead_holds_key_fact"]["delta"] == round(2 / 5 / 2, 4)  # two more of five, on one of two corpora
    low, high = compared["lead_holds_key_fact"]["ci95"]
    assert 0.0 <= low <= 0.2 <= high
