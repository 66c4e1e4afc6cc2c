from __future__ import annotations

import pytest

from ragsvc.domain import Action, Chunk, RefusalReason, ScoredChunk
from ragsvc.validation import MARKER, AnswerPolicy, MarkerScanner

CONTEXT = (
    ScoredChunk(Chunk("guide", 0, "Hotel expenses are reimbursed up to 180 euros per night.", tags=("finance",)), 0.8),
    ScoredChunk(Chunk("guide", 1, "Flights are booked through the travel desk.", tags=("finance", "travel")), 0.6),
)
POLICY = AnswerPolicy(confidence_threshold=60, default_llm_score=50, admin_email="admin@example.com")


@pytest.mark.parametrize("text", ["[1]", "[ #1 ]", "[#1a]", "vec![1]", "[#]", "[#1234]", "[# 1]"])
def test_only_strict_markers_count(text: str) -> None:
    assert MARKER.findall(text) == []


def test_strict_markers_are_found() -> None:
    assert MARKER.findall("a [#1] b [#12], c[#999].") == ["1", "12", "999"]


def test_grounded_answer_is_cited_and_confident() -> None:
    verdict = POLICY.judge("Hotel expenses are reimbursed up to 180 euros per night [#1].", CONTEXT)
    assert verdict.grounded and verdict.refusal is RefusalReason.NONE
    assert [c.marker for c in verdict.citations] == [1]
    assert verdict.confidence.coverage == 1.0
    assert verdict.confidence.retrieval == pytest.approx(0.8)
    assert verdict.confidence.overall == pytest.approx(30 * 0.8 + 40 * 1.0 + 30 * 50 / 100)
    assert verdict.action is Action.CITE and verdict.route is None


def test_unknown_marker_is_invalid_and_never_a_citation() -> None:
    verdict = POLICY.judge("Reimbursed up to 180 euros [#1] and flights by rocket [#7].", CONTEXT)
    assert not verdict.grounded and verdict.refusal is RefusalReason.INVALID_CITATIONS
    assert verdict.invalid_markers == (7,)
    assert [c.marker for c in verdict.citations] == [1]


@pytest.mark.parametrize(
    "text",
    ["Hotel expenses are reimbursed up to 180 euros.", "I don't have information about that [#1].", ""],
)
def test_uncited_or_refusing_answers_are_unsupported(text: str) -> None:
    verdict = POLICY.judge(text, CONTEXT)
    assert not verdict.grounded and verdict.refusal is RefusalReason.UNSUPPORTED_ANSWER
    assert verdict.action is Action.ROUTE


def test_low_confidence_routes_to_the_primary_tag_with_admin_fallback() -> None:
    verdict = POLICY.judge("Quantum chromodynamics governs reimbursement [#2].", CONTEXT)
    assert verdict.grounded and verdict.confidence.overall < 60
    assert verdict.action is Action.ROUTE
    assert verdict.route is not None
    assert verdict.route.tag == "finance" and verdict.route.fallback
    assert verdict.route.owner_email == "admin@example.com"


def test_scanner_finds_markers_split_across_deltas_once() -> None:
    scanner = MarkerScanner()
    found = [scanner.feed(d) for d in ["Hotels [", "#", "1", "] and [#2", "]. Again [#1]", " [#3]"]]
    assert found == [[], [], [], [1], [2], [3]]
