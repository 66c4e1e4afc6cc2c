"""The trained reader's two answer models: an answer it quoted itself with the cross-encoder (extractive, K > 0) is
judged by the extractive answer model and its levels, an LLM's answer (or K = 0) by the answer model and its levels;
the policy's CITE level (server.components.cite_threshold) is the level of the model that judges the answer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench.reader.dataset import PACKED, scored_chunks
from bench.reader.evidence import EVIDENCE_K
from ragsvc.config.settings import Settings
from ragsvc.domain import ScoredChunk, TermCounts
from ragsvc.reading.cross import CrossEncoder
from ragsvc.reading.features import Analysis
from ragsvc.reading.forest import Forest
from ragsvc.reading.relevance import quoted_answer
from ragsvc.reading.trained import Model, TrainedReader
from ragsvc.server.components import build_reader, cite_threshold

CASE = next(
    case
    for case in json.loads((Path(__file__).parent / "data" / "reader-probe.json").read_text())["cases"]
    if case["answerable"] and len(case["quotes"]) > 1
)
LLM_ANSWER = "It is described in the first passage [#1]."  # not one of the reader's quotes
_NONE = np.zeros(0, dtype=np.int32)
ZERO = Forest(feature=_NONE, threshold=np.zeros(0), left=_NONE, right=_NONE, value=np.zeros(0), roots=_NONE, depth=0)


@pytest.fixture(scope="module")
def cross() -> CrossEncoder:
    return CrossEncoder()


@pytest.fixture(scope="module")
def shipped() -> Model:
    return Model.load()


def _reader(model: Model, cross: CrossEncoder | None) -> TrainedReader:
    return TrainedReader(model, rare_share=0.002, pool=EVIDENCE_K, cross=cross, candidates=6 if cross else 0)


def _asked(reader: TrainedReader) -> tuple[Analysis, tuple[ScoredChunk, ...]]:
    analysis = reader.analyse(str(CASE["search"]), str(CASE["question"]), TermCounts(**CASE["counts"]))
    return analysis, reader.pack(analysis, scored_chunks(CASE["evidence"]), limit=PACKED)


def _p_right(model: Model, cross: CrossEncoder | None, answer: str | None = None) -> float:
    """P(right) of the reader's own extractive answer (`answer` None) or of `answer`, as `judge` gives it."""
    reader = _reader(model, cross)
    analysis, evidence = _asked(reader)
    if answer is None:
        answer = quoted_answer(reader.quotes(analysis, evidence, limit=3))
    p = reader.judge(analysis, answer, evidence).p_right
    assert p is not None
    return p


def test_the_shipped_model_has_two_answer_models_with_their_own_levels(shipped: Model) -> None:
    assert shipped.extractive.roots.size and shipped.answers.roots.size
    assert shipped.levels(extractive=True) == (shipped.extractive_cite_threshold, shipped.extractive_refuse_below)
    assert shipped.levels(extractive=False) == (shipped.cite_threshold, shipped.refuse_below)
    assert 0.0 < shipped.extractive_cite_threshold <= 1.0 and 0.0 <= shipped.extractive_refuse_below < 1.0


def test_an_answer_quoted_with_the_cross_encoder_is_judged_by_the_extractive_model(shipped: Model, cross: CrossEncoder) -> None:
    # a forest without trees says P = 0.5 whatever the row: which model judged shows in whether P is 0.5
    assert _p_right(dataclasses.replace(shipped, extractive=ZERO), cross) == 0.5
    assert _p_right(dataclasses.replace(shipped, answers=ZERO), cross) != 0.5
    reader = _reader(shipped, cross)
    analysis, evidence = _asked(reader)
    own = quoted_answer(reader.quotes(analysis, evidence, limit=3))
    assert reader.judge(analysis, own, evidence).p_right == reader.assess(analysis, evidence).score  # the same answer
    # an answer not among its quotes (none is, with the extractive generator) is judged by the same model and levels
    assert _p_right(dataclasses.replace(shipped, extractive=ZERO), cross, LLM_ANSWER) == 0.5
    assert _p_right(dataclasses.replace(shipped, answers=ZERO), cross, LLM_ANSWER) != 0.5


def test_an_llm_answer_and_one_without_the_cross_encoder_are_judged_by_the_answer_model(shipped: Model) -> None:
    for answer in (LLM_ANSWER, None):  # an LLM's answer; the extractive answer without the cross-encoder (K = 0)
        assert _p_right(dataclasses.replace(shipped, answers=ZERO), None, answer) == 0.5
        assert _p_right(dataclasses.replace(shipped, extractive=ZERO), None, answer) != 0.5


def test_whether_the_evidence_answers_is_the_judging_models_refusal_level(shipped: Model, cross: CrossEncoder) -> None:
    def answerable(model: Model, with_cross: CrossEncoder | None) -> bool:
        reader = _reader(model, with_cross)
        analysis, evidence = _asked(reader)
        return reader.assess(analysis, evidence).answerable

    refuses_extractive = dataclasses.replace(shipped, refuse_below=0.0, extractive_refuse_below=1.0)
    assert not answerable(refuses_extractive, cross) and answerable(refuses_extractive, None)
    refuses_others = dataclasses.replace(shipped, refuse_below=1.0, extractive_refuse_below=0.0)
    assert answerable(refuses_others, cross) and not answerable(refuses_others, None)


def test_the_cite_level_is_the_judging_models(shipped: Model, tmp_path: Path) -> None:
    model = dataclasses.replace(shipped, cite_threshold=0.5, extractive_cite_threshold=0.75)
    path = tmp_path / "reader.npz"
    np.savez_compressed(path, **model.arrays())
    trust = Settings.from_env({"RAG_READER_MODEL": str(path)}).trust
    assert cite_threshold(trust, build_reader(trust, extractive=True)) == 75.0  # extractive, K = 6 by default
    assert cite_threshold(trust, build_reader(trust, extractive=False)) == 50.0  # an LLM writes the answers
    no_cross = Settings.from_env({"RAG_READER_MODEL": str(path), "RAG_READER_CROSS_CANDIDATES": "0"}).trust
    assert cite_threshold(no_cross, build_reader(no_cross, extractive=True)) == 50.0
