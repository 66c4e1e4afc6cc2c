"""Through the real gRPC server and the scripted LLM: a partial answer (a valid cited claim and a note of what is
missing) is grounded and flagged; in selected-text mode a refusal is R-001-07's sentence; and the answer's usage
and cost add up every model call made for it, broken down by purpose."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from ragsvc.judge import CONDENSE_PROMPT
from ragsvc.retrieval.selection import not_in_selection_message
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer, replies_by_prompt
from tests.support.servers import connected, running_server

QUESTION = "What happens on SIGTERM?"
CLAIM = "On SIGTERM the server reports NOT_SERVING [#1]."
NOTE = " The documents do not contain information about taxis or trains."
SELECTION = """Hotels are reimbursed up to 180 euros per night.
Hotel receipts are required for every night of a trip.
Flights are booked through the travel desk two weeks ahead."""
SELECTED_QUESTION = "Are hotel receipts needed for taxis too?"


async def ask(server: RagServer, **fields: Any) -> pb.Answer:
    async with connected(server) as stubs:
        return (await stubs.rag.Ask(pb.AskRequest(**{"query": QUESTION, **fields}), timeout=30)).answer


@pytest.fixture
async def llm() -> Any:
    async with ScriptedOpenAIServer(deltas=[CLAIM]) as server:
        yield server


@pytest.fixture
async def server(llm: ScriptedOpenAIServer, tmp_path: Path) -> Any:
    async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url) as served:
        yield served


async def test_a_partial_answer_is_grounded_flagged_and_less_confident(llm: ScriptedOpenAIServer, tmp_path: Path) -> None:
    """With the rule reader, whose confidence counts the answer's phrases the evidence holds (the trained reader's
    is the probability that its cited claim is right)."""
    async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url, reader="rules") as server:
        whole = await ask(server)
        llm.deltas = [CLAIM + NOTE]
        partial = await ask(server)
    assert partial.grounded and partial.refusal_reason == pb.REFUSAL_REASON_NONE and partial.flags.partial
    assert partial.text == CLAIM + NOTE and [c.marker for c in partial.citations] == [1]
    assert not whole.flags.partial
    assert partial.confidence.overall < whole.confidence.overall, "the confidence reflects the missing part"


async def test_a_note_without_a_valid_cited_claim_is_a_refusal(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = ["I don't have enough information about taxis [#1]." + NOTE]
    answer = await ask(server, explain=True)
    assert not answer.grounded and answer.refusal_reason == pb.REFUSAL_REASON_UNSUPPORTED_ANSWER
    assert not answer.flags.partial and "taxis" in answer.explanation.draft


async def test_in_selected_text_mode_the_refusal_is_r_001_07s_sentence(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    llm.deltas = ["The selected text does not contain information about taxis."]
    selected = {"mode": pb.MODE_SELECTED_TEXT, "selected_text": SELECTION, "query": SELECTED_QUESTION}
    refused = await ask(server, **selected)
    assert llm.streams, "the selection passed the gate: the model answered"
    assert refused.refusal_reason == pb.REFUSAL_REASON_NOT_IN_SELECTION and not refused.grounded
    assert refused.text == not_in_selection_message(SELECTED_QUESTION)
    assert refused.text == (
        'The provided selection does not contain information about "Are hotel receipts needed for taxis too". '
        "Would you like me to search the full documentation?"
    )
    llm.deltas = ["Hotel receipts are required for every night [#1]. The selected text does not contain information about taxis."]
    answered = await ask(server, **selected)
    assert answered.grounded and answered.flags.partial, "a claim from the selection with a note: a partial answer"
    assert answered.text.startswith("Hotel receipts are required")


async def test_usage_and_cost_add_up_every_model_call(tmp_path: Path) -> None:
    answers = iter(["Taxis fly to the moon [#9].", CLAIM])  # a hallucinated marker, then a clean strict re-run
    replies = replies_by_prompt(
        answers,
        {
            CONDENSE_PROMPT.split("\n", 1)[0]: "What happens to the server on SIGTERM?",
            "Classify this query": "FACTUAL",
            "Rate the support level": "85",
            "follow-up questions": "How long is the grace period?\nWhat is NOT_SERVING?\n",
        },
    )
    history = [
        pb.ChatMessage(role=pb.ROLE_USER, content="How does the server shut down?"),
        pb.ChatMessage(role=pb.ROLE_ASSISTANT, content="Gracefully [#1]."),
    ]
    async with ScriptedOpenAIServer(deltas=replies) as llm:
        async with running_server(
            tmp_path,
            generator="openai",
            openai_base_url=llm.base_url,
            model_prices="llama3.2=1000/2000",
            llm_condense=True,
            llm_classify=True,
            llm_self_score=True,
            follow_up_count=2,
            hallucination_retries=1,
        ) as server:
            answer = await ask(server, query="And on SIGTERM?", chat_history=history, explain=True)
        calls = [r for r in llm.requests if r.path == "/v1/chat/completions"]
        reported_prompt = sum(len(str(m["content"]).split()) for r in calls for m in r.body["messages"])
        reported_completion = sum(stream.tokens_sent for stream in llm.streams)
    assert answer.grounded and answer.text == CLAIM and len(answer.follow_up_questions) == 2
    assert len(calls) == 6, "condense, classify, answer, re-run, self-score, follow-ups"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (reported_prompt, reported_completion)
    assert answer.cost_estimate_usd == pytest.approx((reported_prompt * 1000 + reported_completion * 2000) / 1e6)

    by_purpose = {pb.ModelCallPurpose.Name(u.purpose): u for u in answer.explanation.model_usage}
    assert sorted(by_purpose) == sorted(
        f"MODEL_CALL_PURPOSE_{p}" for p in ("CONDENSE", "CLASSIFY", "ANSWER", "RERUN", "SELF_SCORE", "FOLLOW_UPS")
    )
    assert all(u.calls == 1 and u.model == "openai:llama3.2" and u.usage.prompt_tokens > 0 for u in by_purpose.values())
    assert sum(u.usage.completion_tokens for u in by_purpose.values()) == answer.usage.completion_tokens
    assert sum(u.cost_estimate_usd for u in by_purpose.values()) == pytest.approx(answer.cost_estimate_usd)
    answered = by_purpose["MODEL_CALL_PURPOSE_ANSWER"].usage.completion_tokens
    assert answered == len(re.findall(r"\S+\s*", "Taxis fly to the moon [#9].")), "the first draft's own tokens"
    assert list(itertools.islice(answers, 1)) == [], "every scripted answer was asked for"
