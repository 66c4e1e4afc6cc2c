from __future__ import annotations

import pytest

from ragsvc.domain import Action, Chunk, RefusalReason, ScoredChunk
from ragsvc.reading import Judgement
from ragsvc.validation import (
    DISCLAIMER,
    MARKER,
    SOURCE_ID_MARKER,
    AnswerPolicy,
    MarkerScanner,
    normalize_source_ids,
    primary_tag,
    strip_invalid_markers,
    uncited_sentences,
)

CONTEXT = (
    ScoredChunk(Chunk("guide", 0, "Hotel expenses are reimbursed up to 180 euros per night.", tags=("finance",)), 0.8),
    ScoredChunk(Chunk("guide", 1, "Flights are booked through the travel desk.", tags=("finance", "travel")), 0.6),
)
POLICY = AnswerPolicy(confidence_threshold=60, default_llm_score=50)


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
    assert verdict.action is Action.CITE and verdict.route_reason == "" and verdict.primary_tag == ""


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


@pytest.mark.parametrize(
    "text",
    [
        "Hotels are reimbursed up to 180 euros per night [#1]. The documents do not contain information about taxis.",
        "Hotels are reimbursed up to 180 euros per night [#1], but I don't have information about taxis.",
        "I don't have information about taxis. Flights are booked through the travel desk [#2].",
    ],
)
def test_a_valid_cited_claim_with_a_note_of_what_is_missing_is_a_grounded_partial_answer(text: str) -> None:
    verdict = POLICY.judge(text, CONTEXT)
    assert verdict.grounded and verdict.refusal is RefusalReason.NONE and verdict.partial
    assert verdict.citations


def test_the_missing_part_lowers_the_confidence() -> None:
    claim = "Hotels are reimbursed up to 180 euros per night [#1]."
    whole = POLICY.judge(claim, CONTEXT)
    partial = POLICY.judge(claim + " The documents do not contain information about taxis or trains.", CONTEXT)
    assert not whole.partial and partial.partial
    assert partial.confidence.overall < whole.confidence.overall


@pytest.mark.parametrize(
    "text",
    [
        "I don't have enough information to answer [#1].",  # a cited refusal claims nothing
        "According to [#1], the documents do not contain information about taxis.",
        "There is not enough evidence [#1]. The passages are insufficient information [#2].",
    ],
)
def test_the_refusal_phrase_refuses_an_answer_without_a_valid_cited_claim(text: str) -> None:
    verdict = POLICY.judge(text, CONTEXT)
    assert not verdict.grounded and verdict.refusal is RefusalReason.UNSUPPORTED_ANSWER and not verdict.partial


def test_an_invalid_marker_refuses_even_beside_a_valid_claim() -> None:
    verdict = POLICY.judge("Hotels cost up to 180 euros [#1]. Taxis are free [#9].", CONTEXT)
    assert verdict.refusal is RefusalReason.INVALID_CITATIONS and not verdict.partial


def test_low_confidence_routes_by_the_primary_tag() -> None:
    verdict = POLICY.judge("Quantum chromodynamics governs reimbursement [#2].", CONTEXT)
    assert verdict.grounded and verdict.confidence.overall < 60
    assert verdict.action is Action.ROUTE
    assert verdict.primary_tag == "finance"
    assert verdict.route_reason == (
        f"Confidence {verdict.confidence.overall:.0f} is under {POLICY.confidence_threshold:.0f}, "
        "the least an answer is cited with"
    )


@pytest.mark.parametrize(("threshold", "action"), [(64.0, Action.CITE), (64.5, Action.ROUTE)])
def test_cite_or_route_at_the_threshold(threshold: float, action: Action) -> None:
    policy = AnswerPolicy(confidence_threshold=threshold, default_llm_score=50)
    verdict = policy.judge("Hotel expenses are reimbursed up to 180 euros per night [#1].", CONTEXT, llm_score=0.0)
    assert (verdict.confidence.retrieval, verdict.confidence.coverage, verdict.confidence.llm) == (0.8, 1.0, 0.0)
    assert verdict.confidence.overall == pytest.approx(30 * 0.8 + 40 * 1.0)  # 64
    assert verdict.action is action


def test_stripping_invalid_markers_keeps_valid_ones_and_adds_the_disclaimer() -> None:
    text = strip_invalid_markers("Up to 180 euros [#1], flights by rocket [#7].", (7,))
    assert text == f"Up to 180 euros [#1], flights by rocket.\n\n{DISCLAIMER}"


def test_primary_tag_is_the_most_common() -> None:
    assert primary_tag([("a", "b"), ("b",), ()]) == "b"
    assert primary_tag([(), ()]) == ""
    assert primary_tag([("x",), ("y",)]) == "x"


def test_scanner_finds_markers_split_across_deltas_once() -> None:
    scanner = MarkerScanner()
    found = [scanner.feed(d) for d in ["Hotels [", "#", "1", "] and [#2", "]. Again [#1]", " [#3]"]]
    assert found == [[], [], [], [1], [2], [3]]


# The SOURCE_ID citation style: [SourceId: doc:chunk] markers map to the packed chunks deterministically.
SOURCE_IDS = [scored.chunk.source_id for scored in CONTEXT]  # ["guide:0", "guide:1"]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("a [SourceId: guide:0] b [SourceId:guide:1] c [SourceId:  doc-abc_1.v2:12]", ["guide:0", "guide:1", "doc-abc_1.v2:12"]),
        ("[SourceId: guide] [SourceId guide:0] [sourceid: guide:0] [SourceId: gu ide:0] [SourceId:   guide:0]", []),
    ],
)
def test_source_id_markers_are_strict_too(text: str, ids: list[str]) -> None:
    assert SOURCE_ID_MARKER.findall(text) == ids


def test_source_ids_normalise_to_the_markers_of_their_packed_chunks() -> None:
    text = "Flights via the desk [SourceId: guide:1]; hotels 180 euros [SourceId: guide:0] [SourceId: guide:1]."
    assert normalize_source_ids(text, CONTEXT) == "Flights via the desk [#2]; hotels 180 euros [#1] [#2]."


def test_an_unknown_source_id_is_an_invalid_citation_and_a_bare_marker_cites_nothing() -> None:
    text = "Hotels 180 euros [SourceId: guide:0], rockets [SourceId: other:3], taxis [#2]."
    normalised = normalize_source_ids(text, CONTEXT)
    assert normalised == "Hotels 180 euros [#1], rockets [#0], taxis [2]."
    verdict = POLICY.judge(normalised, CONTEXT)
    assert not verdict.grounded and verdict.refusal is RefusalReason.INVALID_CITATIONS
    assert [c.marker for c in verdict.citations] == [1] and verdict.invalid_markers == (0,)


def test_a_source_id_answer_is_judged_like_the_same_answer_with_markers() -> None:
    with_ids = POLICY.judge(
        normalize_source_ids("Hotel expenses are reimbursed up to 180 euros per night [SourceId: guide:0].", CONTEXT), CONTEXT
    )
    with_markers = POLICY.judge("Hotel expenses are reimbursed up to 180 euros per night [#1].", CONTEXT)
    assert with_ids == with_markers and with_ids.grounded


def test_scanner_finds_source_ids_split_across_deltas() -> None:
    scanner = MarkerScanner(source_ids=SOURCE_IDS)
    deltas = (
        "Desk [Sour",
        "ceId: gui",
        "de:1] and [#1] [SourceId: x:9] ",
        "[SourceId: guide:1]",
        " hotels [SourceId:",
        " guide:0]",
    )
    # guide:1 is marker 2 (once), guide:0 marker 1; [#1] is not a marker in this style, x:9 names no chunk.
    assert [scanner.feed(d) for d in deltas] == [[], [], [2], [], [], [1]]


def test_strict_refuses_any_uncited_sentence() -> None:
    cited = "Hotel expenses are reimbursed up to 180 euros per night. [#1] Flights are booked centrally [#2]."
    assert uncited_sentences(cited) == []
    assert POLICY.judge(cited, CONTEXT, strict=True).grounded
    partly = "Hotel expenses are reimbursed up to 180 euros per night [#1]. Taxis are always free."
    assert uncited_sentences(partly) == ["Taxis are always free."]
    assert POLICY.judge(partly, CONTEXT).grounded, "normal strictness accepts an answer with a valid citation"
    verdict = POLICY.judge(partly, CONTEXT, strict=True)
    assert not verdict.grounded and verdict.refusal is RefusalReason.UNSUPPORTED_ANSWER


@pytest.mark.parametrize("answerability", [0.0, 0.4, 1.0])
def test_without_a_self_score_the_third_component_is_the_mean_of_support_answerability_and_agreement(
    answerability: float,
) -> None:
    judgement = Judgement(support=0.6)
    text = "Hotel expenses are reimbursed up to 180 euros per night [#1]."
    verdict = POLICY.judge(text, CONTEXT, judgement=judgement, answerability=answerability)
    assert verdict.confidence.llm == pytest.approx(100 * (0.6 + answerability + 1) / 3), (
        "the answer leads with [#1], the chunk retrieval ranked best"
    )
    second = "Flights are booked through the travel desk [#2]. Hotel expenses are reimbursed up to 180 euros [#1]."
    led_by_second = POLICY.judge(second, CONTEXT, judgement=judgement, answerability=answerability)
    assert led_by_second.confidence.llm == pytest.approx(100 * (0.6 + answerability) / 3)
    assert POLICY.judge(text, CONTEXT, judgement=judgement, llm_score=85.0).confidence.llm == 85.0, "a model's own score"


def test_a_reader_that_estimates_it_makes_the_confidence_the_probability_the_answer_is_right() -> None:
    text = "Hotel expenses are reimbursed up to 180 euros per night [#1]."
    sure = POLICY.judge(text, CONTEXT, judgement=Judgement(support=0.2, p_right=0.93), llm_score=10.0)
    assert sure.confidence.overall == pytest.approx(93.0), "neither the support nor a model's self-score moves it"
    unsure = POLICY.judge(text, CONTEXT, judgement=Judgement(support=1.0, p_right=0.3))
    assert unsure.confidence.overall == pytest.approx(30.0) and unsure.action is Action.ROUTE
