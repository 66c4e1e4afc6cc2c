"""The cross-encoder (reading.cross): the shipped model scores fixed pairs as its training run recorded, and the
trained reader's extractive quotes are the z-sum re-ranking of the sentence model's top K (none at K=0)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from bench.reader.dataset import PACKED, scored_chunks
from bench.reader.evidence import EVIDENCE_K
from ragsvc.domain import TermCounts
from ragsvc.reading.cross import (
    CROSS_ANSWER_FEATURES,
    NO_LEAD,
    CrossEncoder,
    cross_answer_features,
    reranked,
    shipped_path,
)
from ragsvc.reading.features import Analysis
from ragsvc.reading.trained import MAX_QUOTES, Model, Read, TrainedReader, choose

DATA = Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "cross-probe.json").read_text())
CASES = json.loads((DATA / "reader-probe.json").read_text())["cases"][:4]


@pytest.fixture(scope="module")
def cross() -> CrossEncoder:
    return CrossEncoder()


def test_the_shipped_cross_encoder_scores_the_probes_as_its_training_run_recorded(cross: CrossEncoder) -> None:
    assert hashlib.sha256(shipped_path().read_bytes()).hexdigest() == RECORDED["sha256"] == cross.sha256
    assert shipped_path().stat().st_size <= 30 * 1024 * 1024
    assert sorted(cross.corpora) == sorted(RECORDED["corpora"])
    for question, passage, score in RECORDED["probes"]:
        assert cross.score(question, [passage])[0] == pytest.approx(score, abs=1e-6)
    scores = [score for _, _, score in RECORDED["probes"]]
    assert max(scores) - min(scores) > 1.0  # it tells the probes apart


def test_the_quotes_are_the_best_of_the_top_k_by_the_z_sum() -> None:
    lexical = np.zeros(8)
    lexical[[4, 1, 7]] = [3.0, 2.5, 1.0]  # the sentence model's order: 4, 1, 7
    cross = {4: -1.0, 1: 5.0, 7: 0.0}
    # z-sums: 4: 0.98 - 0.89 = 0.09; 1: 0.39 + 1.40 = 1.79; 7: -1.37 - 0.51 = -1.88
    assert reranked([4, 1, 7], lexical, cross, 3, quotes=3) == [1, 4, 7]
    assert reranked([4, 1, 7], lexical, cross, 3, quotes=2) == [1, 4]
    tied = {4: 2.0, 1: 2.5, 7: 9.0}  # in the top 2, the same spread as the sentence scores, reversed: z-sums 0 and 0
    assert reranked([4, 1, 7], lexical, tied, 2, quotes=3) == [4, 1]  # a tie keeps the sentence model's order
    assert reranked([4, 1, 7], lexical, cross, 1, quotes=3) == [4]


def test_the_z_sum_promotes_a_candidate_the_cross_encoder_prefers_over_a_small_lexical_lead() -> None:
    top = [4, 7, 1, 9]  # the sentence model's order
    lexical = np.zeros(10)
    lexical[[4, 7, 1, 9]] = [2.0, 1.9, 0.5, 0.4]
    cross = {4: -3.0, 7: 2.0, 1: -1.0, 9: 3.0}
    assert reranked(top, lexical, cross, 3, quotes=3) == [7, 4, 1]  # the same three quoted, 7 leads
    assert reranked(top, lexical, cross, 4, quotes=3)[0] == 7
    assert 9 in reranked(top, lexical, cross, 4, quotes=3)  # the fourth candidate is quoted from the top 4
    assert reranked([5], lexical, {5: 0.0}, 3, quotes=3) == [5]


def test_the_cross_columns_read_the_lead_the_quotes_and_the_top_k() -> None:
    top = [0, 1, 2, 3, 4, 5]
    lexical = np.asarray([3.0, 2.0, 1.0, 0.5, 0.2, 0.1])
    cross = {0: 1.0, 1: 4.0, 2: -2.0, 3: 0.0, 4: 6.0, 5: -1.0}
    x = dict(zip(CROSS_ANSWER_FEATURES, cross_answer_features([0, 1, 2], top, lexical, cross), strict=True))
    assert (x["x_lead"], x["x_quoted_max"], x["x_top3_max"], x["x_top6_max"]) == (1.0, 4.0, 4.0, 6.0)
    assert (x["x_lead_gap3"], x["x_lead_gap6"]) == (-3.0, -5.0)
    # the lead's z-sum in the top 3: sentence z 1.2247 (3 among 3, 2, 1), cross z 0 (1 is the mean of 1, 4, -2)
    assert x["x_lead_zsum3"] == pytest.approx(1.2247, abs=1e-4)
    led_by_4 = dict(zip(CROSS_ANSWER_FEATURES, cross_answer_features([4], top, lexical, cross), strict=True))
    assert led_by_4["x_lead_gap6"] == 0.0 and led_by_4["x_lead_zsum3"] == NO_LEAD  # 4 is not in the top 3
    assert cross_answer_features([], [], np.zeros(0), {}) == [NO_LEAD] * len(CROSS_ANSWER_FEATURES)


def _read(reader: TrainedReader, case: dict[str, object]) -> tuple[Analysis, Read]:
    counts = case["counts"]
    assert isinstance(counts, dict)
    analysis = reader.analyse(str(case["search"]), str(case["question"]), TermCounts(**counts))
    evidence = reader.pack(analysis, scored_chunks(case["evidence"]), limit=PACKED)  # type: ignore[arg-type]
    return analysis, reader.read(analysis, evidence)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_reader_quotes_the_re_ranked_top_k_and_at_k_0_the_sentence_order(
    cross: CrossEncoder, case: dict[str, object]
) -> None:
    model = Model.load()
    _, plain = _read(TrainedReader(model, rare_share=0.002, pool=EVIDENCE_K, cross=cross, candidates=0), case)
    assert list(plain.chosen) == choose(plain.found, plain.scores)
    analysis, read = _read(TrainedReader(model, rare_share=0.002, pool=EVIDENCE_K, cross=cross, candidates=6), case)
    top = choose(read.found, read.scores, max_quotes=6)
    scores = cross.score(analysis.search, [read.found[i].quote for i in top])
    by_candidate = dict(zip(top, scores.tolist(), strict=True))
    expected = reranked(top, np.asarray(read.scores), by_candidate, 6, quotes=MAX_QUOTES)
    assert list(read.chosen) == expected and set(expected) <= set(top)
