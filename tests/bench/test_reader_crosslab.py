"""The cross columns and measures of bench/reader/crosslab.py (an offline experiment; no model is run)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from bench.quality.metrics import auroc
from bench.reader import crosslab
from bench.reader.answerlab import Ctx
from bench.reader.learned import RANKER_FEATURES
from ragsvc.reading.cross import reranked
from ragsvc.reading.features import SENTENCE_FEATURES


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


def test_the_grids_reranking_weighs_the_cross_score_and_is_the_shipped_one_at_weight_1() -> None:
    top = [4, 2, 0, 1, 3]  # the sentence model's order
    lexical = np.asarray([3.0, 2.0, 4.0, 0.0, 5.0])  # by candidate
    cross = {4: -2.0, 2: -1.0, 0: 0.0, 1: 2.0, 3: 3.0}
    assert crosslab.rerank(top, lexical, cross, 5, 1.0) == reranked(top, lexical, cross, 5, quotes=3)
    assert crosslab.rerank(top, lexical, cross, 5, None) == [3, 1, 0]  # the cross score alone
    assert crosslab.rerank(top, lexical, cross, 3, None) == [0, 2, 4]  # among the top 3 only
    assert crosslab.rerank(top, lexical, cross, 5, 1000.0) == [3, 1, 0]  # a heavy weight: the cross order
    assert crosslab.rerank(top, lexical, cross, 5, 0.001)[0] == 4  # a light one: the sentence model's lead
    assert crosslab.grid_name(6, 1.0) == "z6" and crosslab.grid_name(15, None) == "k15wx"


def test_the_loco_pick_of_each_corpus_is_the_best_on_the_others() -> None:
    def entry(right: float, auroc: float) -> dict[str, float | int]:
        return {"answered_and_right": right, "auroc": auroc, "cited": 0, "cite_right": 0, "unanswerable_cited": 0}

    per = {  # arm -> corpus -> (answered and right, AUROC)
        "rerank6": {"a": (0.5, 0.8), "b": (0.5, 0.8), "c": (0.9, 0.8)},
        "rerank_k8w1": {"a": (0.9, 0.8), "b": (0.6, 0.8), "c": (0.5, 0.8)},
    }
    results = {arm: {"oof": {"per_corpus": {c: entry(*v) for c, v in by.items()}}} for arm, by in per.items()}
    one = crosslab.Answered(
        np.asarray([0.9, 0.1]), np.asarray([True, False]), np.asarray([True, True]), np.asarray([True, False])
    )
    answers = {(arm, "oof"): dict.fromkeys("abc", one) for arm in per}
    chosen = crosslab.loco(results, answers, "oof", "rerank6", seed=1)
    # a: on b and c rerank6 0.70 > 0.55; b: 0.70 = 0.70, AUROC tied, the first; c: k8w1 0.75 > 0.50
    assert {c: p["arm"] for c, p in chosen["picks"].items()} == {"a": "rerank6", "b": "rerank6", "c": "rerank_k8w1"}
    assert not chosen["same_pick_every_fold"]
    assert chosen["per_corpus"]["c"]["answered_and_right"] == 0.5


def test_the_rankers_training_rows_are_the_top_k_of_readings_with_a_key_fact_among_them() -> None:
    width = len(SENTENCE_FEATURES)

    def reading(labels: list[int], top: list[int]) -> crosslab.Reading:
        n = len(labels)
        packed = SimpleNamespace(labels=np.asarray(labels), rows=np.ones((n, width)))
        return crosslab.Reading(None, 0, packed, np.arange(n, 0, -1, dtype=float), top, {i: float(i) for i in top})  # type: ignore[arg-type]

    readings = [
        reading([0, 0, 0, 1], [0, 1, 2, 3]),  # its fact is 4th: in the top 4, not in the top 3
        reading([1, 0, 0], [0, 1, 2]),
        reading([1], [0]),  # one candidate: nothing to order
        reading([0, 0], [0, 1]),  # no fact
    ]
    rows, labels, groups = crosslab.ranker_data(readings, 3)
    assert groups == [3] and labels.tolist() == [1, 0, 0] and rows.shape == (3, len(RANKER_FEATURES))
    rows, labels, groups = crosslab.ranker_data(readings, 4)
    assert groups == [4, 3] and labels.tolist() == [0, 0, 0, 1, 1, 0, 0]
