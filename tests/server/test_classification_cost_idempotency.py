"""Query classification in the answer, the per-answer cost estimate, and idempotent retries, end to end."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer, replies_by_prompt
from tests.support.servers import connected, running_server

ANSWER = "The overall confidence is 30 times the retrieval score [#1]."


def llm(category: str = "PROCEDURAL"):
    """Answers the classification prompt with `category`, anything else with ANSWER."""
    return replies_by_prompt(itertools.repeat(ANSWER), {"Classify this query": category})


def chats(server: ScriptedOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.path.endswith("/chat/completions")]


async def ask(server: RagServer, **fields: Any) -> pb.Answer:
    async with connected(server) as stubs:
        request = pb.AskRequest(**{"query": "How is the confidence score computed?", **fields})
        return (await stubs.rag.Ask(request, timeout=30)).answer


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do I ingest a PDF document?", pb.QUERY_CLASS_PROCEDURAL),
        ("How is the confidence score computed?", pb.QUERY_CLASS_FACTUAL),
        ("Which status code does an empty query get?", pb.QUERY_CLASS_FACTUAL),
        ("Hello!", pb.QUERY_CLASS_GREETING),
    ],
)
async def test_rules_classify_with_the_extractive_generator(server: RagServer, query: str, expected: int) -> None:
    assert (await ask(server, query=query)).query_class == expected


async def test_the_llm_classifies_when_one_is_configured(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=llm("FACTUAL")) as model:
        async with running_server(tmp_path, generator="openai", openai_base_url=model.base_url, llm_classify=True) as srv:
            answer = await ask(srv, query="How do I compute the confidence score?")
    assert answer.query_class == pb.QUERY_CLASS_FACTUAL, "the model's class wins over the rules' PROCEDURAL"
    first = chats(model)[0]["messages"][-1]["content"]
    assert "Classify this query" in first and "How do I compute the confidence score?" in first


async def test_a_clarification_is_searched_with_the_previous_user_turn(tmp_path: Path) -> None:
    history = [
        pb.ChatMessage(role=pb.ROLE_USER, content="How is the confidence score computed?"),
        pb.ChatMessage(role=pb.ROLE_ASSISTANT, content="From three signals."),
    ]
    async with running_server(tmp_path) as srv:
        alone = await ask(srv, query="And why is that?")
        followed = await ask(srv, query="And why is that?", chat_history=history)
    assert followed.query_class == pb.QUERY_CLASS_CLARIFICATION
    assert not alone.grounded, "on its own the question finds nothing to answer with"
    assert followed.grounded and any(c.document_id == "citations-and-confidence" for c in followed.citations)


async def test_cost_estimate_from_the_price_table(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=llm()) as model:
        async with running_server(
            tmp_path, generator="openai", openai_base_url=model.base_url, model_prices="llama3.2=1000/2000"
        ) as srv:
            answer = await ask(srv)
    usage = answer.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert answer.cost_estimate_usd == pytest.approx((usage.prompt_tokens * 1000 + usage.completion_tokens * 2000) / 1e6)


async def test_local_models_and_the_extractive_generator_cost_nothing(server: RagServer) -> None:
    assert (await ask(server)).cost_estimate_usd == 0.0


async def test_a_retry_with_the_same_idempotency_key_gets_the_recorded_answer(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=llm()) as model:
        async with running_server(tmp_path, generator="openai", openai_base_url=model.base_url, cache_max_entries=100) as srv:
            first = await ask(srv, idempotency_key="order-42", explain=True)  # explain bypasses the plain cache
            retry = await ask(srv, idempotency_key="order-42", explain=True)
            other_tenant = await ask(srv, idempotency_key="order-42", explain=True, tenant_id="nobody")
            refused = await ask(srv, query="Best recipe for banana bread?", idempotency_key="order-43")
            refused_again = await ask(srv, query="Best recipe for banana bread?", idempotency_key="order-43")
    assert len(chats(model)) == 1, "the retry did not generate again"
    assert retry.text == first.text and retry.flags.cache_hit and not first.flags.cache_hit
    assert [c.source_id for c in retry.citations] == [c.source_id for c in first.citations]
    assert other_tenant.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS, "keys never cross tenants"
    assert refused_again.flags.cache_hit and refused_again.refusal_reason == refused.refusal_reason
