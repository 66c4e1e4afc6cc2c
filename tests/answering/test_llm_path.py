"""The LLM path of one answer against scripted LLM servers on real sockets, which record what was asked, when:
the citation policy (drop the sentences invalid markers back, or re-run strictly), the template's stop sequences,
and the order of the calls around an answer (no side call before its first token; the self-score and follow-ups
after its text is complete; nothing beside an answer on a one-slot server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from ragsvc.domain import (
    Answer,
    CallPurpose,
    CitationPolicy,
    QueryClass,
    Retrieval,
    RetrievalQuery,
    ScoredChunk,
    TextDelta,
)
from ragsvc.prompts import PromptTemplate, TemplateRegistry
from ragsvc.reading import Analysis, Judgement
from ragsvc.reading.rules import RuleReader
from tests.answering.test_pipeline import QUESTION, FixedRetriever, answer_of, make_pipeline, run
from tests.generation.backends import BACKENDS, OPENAI, Backend
from tests.support.openai_server import replies_by_prompt

CITED = "Hotel nights are reimbursed up to 180 euros [#1]."
DRAFT = CITED + " Taxis are free [#7]."
RERUN = "Up to 180 euros per night are reimbursed [#1]."
SCORE_PROMPT = "Evaluate how well"
FOLLOW_UPS_PROMPT = "follow-up questions"
CLASSIFY_PROMPT = "Classify this query"
SIDE_REPLIES = {SCORE_PROMPT: "85", FOLLOW_UPS_PROMPT: "What about meals?\nAnd flights?", CLASSIFY_PROMPT: "PROCEDURAL"}


def prompt_of(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def kind_of(body: dict[str, Any]) -> str:
    """Which call a chat request is: a side call by its prompt, else the answer."""
    prompt = prompt_of(body)
    return next(
        (
            name
            for name, marker in (("score", SCORE_PROMPT), ("follow-ups", FOLLOW_UPS_PROMPT), ("classify", CLASSIFY_PROMPT))
            if marker in prompt
        ),
        "answer",
    )


def chats(server: Any, backend: Backend = OPENAI) -> list[Any]:
    return [r for r in server.requests if r.path == backend.chat_path]


# The citation policy


async def test_drop_invalid_keeps_the_validly_cited_claims_without_a_rerun(caplog: pytest.LogCaptureFixture) -> None:
    async with OPENAI.server(deltas=replies_by_prompt([DRAFT], {})) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, citation_policy=CitationPolicy.DROP_INVALID, hallucination_retries=2)
            with caplog.at_level(logging.WARNING, logger="ragsvc.citation_policy"):
                events = await run(pipeline)
    answer = answer_of(events)
    assert answer.text == CITED and answer.grounded and [c.marker for c in answer.citations] == [1]
    assert answer.flags.citations_dropped and answer.flags.hallucination_detected and answer.flags.mitigation_applied
    assert len(chats(server)) == 1, "no re-run: a valid cited claim remained"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer.text, "the stream showed what stays"
    assert any("[#7]" in record.getMessage() and "req-1" in record.getMessage() for record in caplog.records)


async def test_strict_reruns_the_draft_with_the_strict_prompt() -> None:
    async with OPENAI.server(deltas=replies_by_prompt([DRAFT, RERUN], {})) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, citation_policy=CitationPolicy.STRICT, hallucination_retries=1)
            answer = answer_of(await run(pipeline))
    first, rerun = chats(server)
    assert "MUST ONLY" in rerun.body["messages"][0]["content"] and "MUST ONLY" not in first.body["messages"][0]["content"]
    assert answer.text == RERUN and answer.grounded and not answer.flags.citations_dropped
    assert answer.flags.mitigation_applied


async def test_drop_invalid_reruns_only_when_no_valid_claim_remains() -> None:
    async with OPENAI.server(deltas=replies_by_prompt(["Taxis are free [#7].", RERUN], {})) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, citation_policy=CitationPolicy.DROP_INVALID, hallucination_retries=1)
            answer = answer_of(await run(pipeline))
    assert len(chats(server)) == 2 and answer.text == RERUN and answer.grounded
    assert not answer.flags.citations_dropped


async def test_the_policy_is_the_requests_else_the_templates_else_the_servers() -> None:
    templates = TemplateRegistry()
    templates.put(PromptTemplate("lenient-cites", "", citation_policy=CitationPolicy.DROP_INVALID))
    question = dataclasses.replace(QUESTION, template_id="lenient-cites")
    async with OPENAI.server(deltas=replies_by_prompt([DRAFT, DRAFT, RERUN, DRAFT, DRAFT], {})) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(
                generator, templates=templates, citation_policy=CitationPolicy.STRICT, hallucination_retries=1
            )
            by_template = answer_of(await run(pipeline, question))
            by_request = answer_of(await run(pipeline, dataclasses.replace(question, citation_policy=CitationPolicy.STRICT)))
            by_server = answer_of(await run(pipeline))
    assert by_template.text == CITED and by_template.flags.citations_dropped
    assert by_request.text == RERUN and not by_request.flags.citations_dropped
    assert not by_server.grounded and by_server.refusal.value == "invalid_citations", "strict, and the re-run was no better"
    assert len(chats(server)) == 1 + 2 + 2


# Stop sequences


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
async def test_the_templates_stop_sequences_reach_the_llm_with_the_answer_and_its_rerun(backend: Backend) -> None:
    templates = TemplateRegistry()
    templates.put(PromptTemplate("ends", "", stop=("END", "\n\nQ:")))
    templates.put(PromptTemplate("runs-on", "", stop=()))
    replies = replies_by_prompt([CITED, DRAFT, RERUN, CITED], {SCORE_PROMPT: "85"})
    async with backend.server(deltas=replies) as server:
        async with contextlib.aclosing(backend.generator(server)) as generator:
            pipeline = make_pipeline(
                generator,
                templates=templates,
                hallucination_retries=1,
                llm_self_score=True,
                citation_policy=CitationPolicy.STRICT,
            )
            await run(pipeline)
            await run(pipeline, dataclasses.replace(QUESTION, template_id="ends"))
            await run(pipeline, dataclasses.replace(QUESTION, template_id="runs-on"))

    def stop_of(body: dict[str, Any]) -> list[str] | None:
        return (body if backend is OPENAI else body["options"]).get("stop")

    sent = [(kind_of(r.body), stop_of(r.body)) for r in chats(server, backend)]
    assert sent == [
        ("answer", ["\n\n[Question]"]),
        ("score", None),  # the built-in's stop (R-002-07); none for a side call
        ("answer", ["END", "\n\nQ:"]),
        ("answer", ["END", "\n\nQ:"]),
        ("score", None),  # the draft, then its re-run
        ("answer", None),
        ("score", None),
    ]


# The order of the calls around an answer


class SlowRetriever(FixedRetriever):
    """Finds its hits after 0.3 s."""

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        await asyncio.sleep(0.3)
        return await super().retrieve(query)


def with_side_calls(**overrides: object) -> dict[str, object]:
    return {"llm_classify": True, "llm_self_score": True, "follow_up_count": 2, **overrides}


async def test_on_a_one_slot_server_the_answer_is_the_first_call_and_the_side_calls_follow_it_one_by_one() -> None:
    replies = replies_by_prompt([CITED], SIDE_REPLIES)
    async with OPENAI.server(deltas=replies, token_delay_s=0.02, total_slots=1) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            answer = answer_of(await run(make_pipeline(generator, **with_side_calls())))
    calls = {kind_of(r.body): r for r in chats(server)}
    streams = {kind_of(s.request.body): s for s in server.streams}
    assert kind_of(chats(server)[0].body) == "answer" and "classify" not in calls, "nothing before it"
    answered_at = streams["answer"].last_token_at
    assert calls["score"].received_at >= answered_at and calls["follow-ups"].received_at >= answered_at
    first, second = sorted((streams["score"], streams["follow-ups"]), key=lambda s: s.request.received_at)
    assert second.request.received_at >= first.last_token_at, "one slot: one call at a time"
    assert answer.query_class is QueryClass.FACTUAL, "by rules"
    assert answer.confidence.llm == 85 and answer.follow_up_questions == ("What about meals?", "And flights?")


async def test_a_slow_classification_is_not_waited_for_and_side_calls_go_together_after_the_answer() -> None:
    def delay(body: dict[str, Any]) -> float:
        return {"classify": 1.0, "answer": 0.0}.get(kind_of(body), 0.3)

    replies = replies_by_prompt([CITED], SIDE_REPLIES)
    async with OPENAI.server(deltas=replies, first_token_delay_s=delay) as server:  # reports no slots
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, retriever=SlowRetriever(), **with_side_calls())
            answer = answer_of(await run(pipeline))
            classify = next(r for r in chats(server) if kind_of(r.body) == "classify")
            await asyncio.wait_for(classify.connection.closed.wait(), 1.0)
    calls = {kind_of(r.body): r for r in chats(server)}
    streams = {kind_of(s.request.body): s for s in server.streams}
    waited = calls["answer"].received_at - calls["classify"].received_at
    assert waited < 0.6, "the answer waited for retrieval (0.3 s), not for the classification (1 s)"
    assert classify.connection.closed_by == "client", "cancelled when the answer's generation started"
    assert answer.query_class is QueryClass.FACTUAL, "the rules' class: the model's came too late"
    assert CallPurpose.CLASSIFY not in {usage.purpose for usage in answer.model_usage}
    answered_at = streams["answer"].last_token_at
    score, follow_ups = calls["score"], calls["follow-ups"]
    assert min(score.received_at, follow_ups.received_at) >= answered_at, "after the answer's text"
    assert abs(score.received_at - follow_ups.received_at) < 0.25, "asked together, not one after the other (0.3 s each)"


async def test_a_classification_that_arrives_before_the_generation_starts_is_used() -> None:
    replies = replies_by_prompt([CITED], SIDE_REPLIES)
    async with OPENAI.server(deltas=replies) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            pipeline = make_pipeline(generator, retriever=SlowRetriever(), **with_side_calls(follow_up_count=0))
            answer: Answer = answer_of(await run(pipeline))
    assert [kind_of(r.body) for r in chats(server)] == ["classify", "answer", "score"]
    assert answer.query_class is QueryClass.PROCEDURAL, "the model's class, in time"
    assert CallPurpose.CLASSIFY in {usage.purpose for usage in answer.model_usage}


class JudgingRules(RuleReader):
    """The rule reader, counting the answers it judges."""

    judged: list[str]

    def judge(self, analysis: Analysis, answer: str, evidence: Sequence[ScoredChunk]) -> Judgement:
        self.judged.append(answer)
        return super().judge(analysis, answer, evidence)


async def test_the_models_score_weighs_the_verdict_again_without_the_answer_being_judged_again() -> None:
    reader = JudgingRules(min_coverage=0.5, rare_share=0.002)
    reader.judged = []
    async with OPENAI.server(deltas=replies_by_prompt([CITED], SIDE_REPLIES)) as server:
        async with contextlib.aclosing(OPENAI.generator(server)) as generator:
            answer = answer_of(await run(make_pipeline(generator, reader=reader, llm_self_score=True)))
    assert [kind_of(r.body) for r in chats(server)] == ["answer", "score"]
    assert answer.grounded and answer.confidence.llm == 85, "the verdict weighs the model's score"
    assert reader.judged == [CITED], "the reader judged the answer's text once"
