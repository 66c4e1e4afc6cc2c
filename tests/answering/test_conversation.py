"""Follow-ups as standalone searches: the deterministic rule, and the model's condensing with its fallbacks (against
the scripted OpenAI-compatible server on a real socket)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest

from ragsvc.access import Evidence
from ragsvc.answering.conversation import Condenser, Conversation
from ragsvc.answering.deadlines import RequestBudget
from ragsvc.answering.retrieve import QueryClassifier, RetrieveStage
from ragsvc.answering.usage import UsageLedger
from ragsvc.config import Settings
from ragsvc.domain import (
    Answer,
    CallPurpose,
    ChatMessage,
    Chunk,
    QueryRewrite,
    Question,
    Retrieval,
    RetrievalQuery,
    Role,
    ScoredChunk,
    SearchQuery,
    Usage,
)
from ragsvc.generation.extractive import ExtractiveGenerator
from ragsvc.generation.openai_compat import OpenAICompatGenerator
from ragsvc.pricing import PriceTable
from ragsvc.storage.backend import Backend
from ragsvc.storage.sessions import SessionKey, SessionStore
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.readers import RULES

SIGTERM = (ChatMessage(Role.USER, "What happens on SIGTERM?"), ChatMessage(Role.ASSISTANT, "It drains [#1]."))


def turns(*questions: str) -> tuple[ChatMessage, ...]:
    return tuple(m for q in questions for m in (ChatMessage(Role.USER, q), ChatMessage(Role.ASSISTANT, "...")))


async def condensed(condenser: Condenser, question: Question, ledger: UsageLedger | None = None) -> SearchQuery:
    budget = RequestBudget.start(30.0, None)
    return await condenser.search_for(question, budget, ledger or UsageLedger(PriceTable({})))


async def test_without_a_model_the_rule_rewrites_and_a_first_question_is_searched_as_asked() -> None:
    condenser = Condenser(ExtractiveGenerator(RULES), RULES, default_model="llama3.2", by_model=True, timeout_s=1.0)
    follow_up = Question(query="How long is it?", chat_history=SIGTERM)
    assert await condensed(condenser, follow_up) == SearchQuery("How long is SIGTERM?", QueryRewrite.RULE)
    assert await condensed(condenser, Question(query="How long is it?")) == SearchQuery("How long is it?")


@contextlib.asynccontextmanager
async def llm_condenser(reply: list[str], *, delay_s: float = 0.0, timeout_s: float = 2.0):
    async with ScriptedOpenAIServer(deltas=reply, first_token_delay_s=delay_s) as server:
        generator = OpenAICompatGenerator(server.base_url, model="llama3.2")
        try:
            yield Condenser(generator, RULES, default_model="llama3.2", by_model=True, timeout_s=timeout_s), server
        finally:
            await generator.aclose()


async def test_the_model_condenses_with_the_conversation_and_its_usage_is_counted() -> None:
    ledger = UsageLedger(PriceTable({}))
    async with llm_condenser(["Standalone question: ", '"How long is the grace period after SIGTERM?"']) as (
        condenser,
        server,
    ):
        search = await condensed(condenser, Question(query="How long is the grace period?", chat_history=SIGTERM), ledger)
    assert search == SearchQuery("How long is the grace period after SIGTERM?", QueryRewrite.LLM)
    prompt = server.requests[-1].body["messages"][-1]["content"]
    assert "USER: What happens on SIGTERM?" in prompt and "ASSISTANT: It drains [#1]." in prompt
    assert "FOLLOW-UP QUESTION: How long is the grace period?" in prompt
    [usage] = ledger.by_purpose()
    assert usage.purpose is CallPurpose.CONDENSE and usage.calls == 1 and usage.model == "openai:llama3.2"
    assert usage.usage == Usage(prompt_tokens=len(prompt.split()), completion_tokens=2)


@pytest.mark.parametrize(
    ("reply", "delay_s"), [([""], 0.0), (["x" * 600], 0.0), (["How long?"], 1.0)], ids=["empty", "too-long", "too-slow"]
)
async def test_a_failed_condensing_falls_back_to_the_rule(reply: list[str], delay_s: float) -> None:
    async with llm_condenser(reply, delay_s=delay_s, timeout_s=0.3) as (condenser, _):
        started = asyncio.get_running_loop().time()
        search = await condensed(condenser, Question(query="How long is it?", chat_history=SIGTERM))
    assert search == SearchQuery("How long is SIGTERM?", QueryRewrite.RULE_FALLBACK)
    assert asyncio.get_running_loop().time() - started < 0.9, "bounded by its own timeout"


class ScoringRetriever:
    """Finds one chunk, scored by whether the search names SIGTERM (a stand-in for an engine on a tiny corpus)."""

    def __init__(self) -> None:
        self.searched: list[str] = []

    async def retrieve(self, query: RetrievalQuery) -> Retrieval:
        self.searched.append(query.text)
        score = 0.6 if "SIGTERM" in query.text else 0.1
        return Retrieval(hits=(ScoredChunk(Chunk("operations", 0, "A grace period of ten seconds."), score),))

    async def retrieve_selection(self, *args: object, **kwargs: object) -> Retrieval:
        raise AssertionError("not used here")


async def test_a_follow_up_is_also_searched_after_the_earlier_question_and_both_go_to_the_pipeline() -> None:
    retriever = ScoringRetriever()
    settings = Settings.of(llm_classify=False, llm_condense=False)
    generator = ExtractiveGenerator(RULES)
    stage = RetrieveStage(
        retriever,  # type: ignore[arg-type]
        RULES,
        QueryClassifier(generator, RULES, default_model="llama3.2", by_model=False),
        Condenser(generator, RULES, default_model="llama3.2", by_model=False, timeout_s=1.0),
        settings.retrieval,
    )
    ledger = UsageLedger(PriceTable({}))
    follow_up = Question(query="How long is the grace period?", chat_history=SIGTERM, tenant_id="t")
    retrieved = await stage.run(follow_up, RequestBudget.start(30.0, None), ledger)
    second = SearchQuery("What happens on SIGTERM? How long is the grace period?", QueryRewrite.RULE)
    assert retriever.searched == ["How long is the grace period?", second.text]
    assert retrieved.search == SearchQuery("How long is the grace period?", QueryRewrite.RULE)
    assert [option.search for option in retrieved.options()] == [retrieved.search, second]
    assert retrieved.alternatives[0].retrieval.hits[0].score == 0.6

    retriever.searched.clear()
    first = await stage.run(dataclasses.replace(follow_up, chat_history=()), RequestBudget.start(30.0, None), ledger)
    assert retriever.searched == ["How long is the grace period?"], "a first question is searched once"
    assert first.search == SearchQuery("How long is the grace period?") and first.alternatives == ()


async def test_a_turn_is_stored_with_the_evidence_of_the_stored_turns_its_history_held(database: Backend) -> None:
    sessions = SessionStore(database)
    conversation = Conversation(sessions)
    asked = Question("How big is the budget?", tenant_id="acme", user_tags=("finance",),
                     session_id="9f1c1d4e-8a7b-4c6d-9e2f-0a1b2c3d4e5f", caller="key:acme/fin")  # fmt: skip
    budget = Chunk("budget", 0, "The budget is 12000 euros.", tags=("finance",))
    faq = Chunk("faq", 0, "The office opens at nine.")

    first = await conversation.begin(asked)
    assert first.question.chat_history == () and first.held == Evidence()
    await conversation.remember(first, Answer("12000 euros [#1]"), Retrieval(hits=(ScoredChunk(budget, 0.9),)))
    second = await conversation.begin(dataclasses.replace(asked, query="And when does the office open?"))
    assert second.question.chat_history == (
        ChatMessage(Role.USER, "How big is the budget?"),
        ChatMessage(Role.ASSISTANT, "12000 euros [#1]"),
    )
    assert second.held == Evidence.of([budget])
    await conversation.remember(second, Answer("At nine [#1]"), Retrieval(hits=(ScoredChunk(faq, 0.8),)))

    *_, last = await sessions.history(SessionKey.of(asked))
    assert last.evidence == Evidence.of([budget, faq]), "its answer may repeat the first turn's: it needs finance too"
