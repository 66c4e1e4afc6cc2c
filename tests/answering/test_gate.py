"""The gate: no model is called when there is no evidence, or none good enough."""

from __future__ import annotations

from ragsvc.answering.gate import Gate
from ragsvc.config import TrustSettings
from ragsvc.domain import Chunk, RefusalReason, Retrieval, ScoredChunk


def scored(score: float) -> ScoredChunk:
    return ScoredChunk(Chunk("doc", 0, "text"), score)


def test_the_gate_refuses_without_evidence_or_below_its_score() -> None:
    gate = Gate(TrustSettings(score_gate=0.3))
    assert gate.refusal(Retrieval()) is RefusalReason.NO_CHUNKS
    assert gate.refusal(Retrieval(rejected=(scored(0.2),))) is RefusalReason.SCORE_GATE, "nothing passed the threshold"
    assert gate.refusal(Retrieval(hits=(scored(0.29),))) is RefusalReason.SCORE_GATE
    assert gate.refusal(Retrieval(hits=(scored(0.3),))) is None, "a score equal to the gate passes"
    assert gate.refusal(Retrieval(hits=(scored(0.9), scored(0.1)))) is None, "the best hit decides"
