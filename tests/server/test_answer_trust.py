"""Answers users can trust, end to end: an audit row for every outcome, sessions, owner routing, the model's
self-score and follow-ups, hallucination mitigation, and citations that only ever point into the prompt.

The scripted LLM answers by what it is asked: the support-rating prompt gets a number, the follow-up prompt
gets questions, anything else gets the answer the test scripted.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from ragsvc.prompts import REFUSAL_SENTENCE
from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.http_server import Fault
from tests.support.openai_server import ScriptedOpenAIServer, replies_by_prompt
from tests.support.servers import connected, running_server

QUESTION = "How is the confidence score computed?"
MARKER = re.compile(r"\[#(\d{1,3})\]")


def scripted(answers: list[str], *, score: str = "85", follow_ups: str = "What is coverage?\nWho gets routed?\n"):
    """Deltas by request: rating prompt -> `score`, follow-up prompt -> `follow_ups`, else the next of `answers`."""
    return replies_by_prompt(answers, {"Rate the support level": score, "follow-up questions": follow_ups})


def chat_requests(llm: ScriptedOpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in llm.requests if r.path.endswith("/chat/completions")]


async def ask(server: RagServer, **fields: Any) -> pb.Answer:
    async with connected(server) as stubs:
        return (await stubs.rag.Ask(pb.AskRequest(**{"query": QUESTION, **fields}), timeout=30)).answer


async def rows(server: RagServer, tenant: str = "default") -> list[dict[str, Any]]:
    return list(reversed(await server.components.answers.recent(tenant)))


async def test_self_score_and_follow_ups_come_from_the_model(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=scripted(["The overall confidence is 30 times the retrieval score [#1]."])) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                                  llm_self_score=True, follow_up_count=2) as server:
            answer = await ask(server)
    assert answer.grounded and answer.confidence.llm == 85.0
    c = answer.confidence
    assert c.overall == pytest.approx(30 * c.retrieval + 40 * c.coverage + 30 * 85 / 100, abs=1e-3)
    assert list(answer.follow_up_questions) == ["What is coverage?", "Who gets routed?"]
    prompts = [body["messages"][-1]["content"] for body in chat_requests(llm)]
    assert len(prompts) == 3 and "Rate the support level" in prompts[1] and "follow-up questions" in prompts[2]


async def test_an_unparsable_self_score_falls_back_to_the_answers_support(tmp_path: Path) -> None:
    reply = "The confidence score is computed from coverage [#1]."
    async with ScriptedOpenAIServer(deltas=scripted([reply], score="no idea")) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                                  llm_self_score=True, default_llm_score=50.0) as server:
            answer = await ask(server)
    # No model scored the answer: the mean of its support for the question (1: "confidence", "score" and
    # "computed" are all in it) and the evidence's answerability (above 0: the gate let it through) takes the place
    # of the score, not the configured default of 50.
    assert answer.citations[0].document_id == "citations-and-confidence"
    assert 50 < answer.confidence.llm <= 100


async def test_a_hallucinated_marker_is_rerun_with_the_strict_prompt(tmp_path: Path) -> None:
    replies = ["Confidence comes from the moon [#7].", "The overall confidence is 30 times the retrieval score [#1]."]
    async with ScriptedOpenAIServer(deltas=scripted(replies)) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                                  hallucination_retries=2) as server:
            async with connected(server) as stubs:
                messages = [m async for m in stubs.rag.AskStream(pb.AskStreamRequest(query=QUESTION), timeout=30)]
    streamed = "".join(m.text_delta for m in messages if m.HasField("text_delta"))
    answer = messages[-1].answer
    assert streamed == "", "a sentence citing an unknown marker is never released (validated stream)"
    assert answer.text == replies[1] and answer.grounded, "the re-run is not streamed: the final answer has it"
    assert answer.flags.hallucination_detected and answer.flags.mitigation_applied
    systems = [body["messages"][0]["content"] for body in chat_requests(llm)]
    assert len(systems) == 2 and systems[0] != systems[1], "the re-run uses the strict prompt"


async def test_a_marker_that_stays_invalid_is_stripped_with_a_disclaimer(tmp_path: Path) -> None:
    bad = "The retrieval score counts 30 percent [#1] and the moon decides the rest [#9]."
    async with ScriptedOpenAIServer(deltas=scripted([bad, bad])) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                                  hallucination_retries=1, citation_policy="strict") as server:
            answer = await ask(server, explain=True)
    draft = answer.explanation.draft
    assert "[#9]" not in draft and "[#1]" in draft and "needs verification" in draft, "operators see the draft"
    assert not answer.grounded and answer.refusal_reason == pb.REFUSAL_REASON_INVALID_CITATIONS
    assert answer.text == REFUSAL_SENTENCE and not answer.citations, "the refused draft never stands as the answer"
    assert answer.flags.hallucination_detected and answer.flags.mitigation_applied
    assert answer.action == pb.ACTION_ROUTE


async def test_every_outcome_writes_an_answers_row(tmp_path: Path) -> None:
    replies = ["The overall confidence is 30 times the retrieval score [#1].", "Partial answer that then fails"]
    async with ScriptedOpenAIServer(deltas=scripted(replies)) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url) as server:
            await ask(server)  # answered
            await ask(server, query="Best recipe for banana bread?")  # refused by the gate
            await ask(server, tenant_id="empty-tenant")  # no chunks
            await ask(server, dry_run=True)
            with pytest.raises(grpc.aio.AioRpcError):
                await ask(server, query="")  # invalid
            llm.fault, llm.fault_after = Fault.DISCONNECT, 2
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await ask(server)  # the LLM dies mid-stream
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            recorded = await rows(server)
            empty = await rows(server, "empty-tenant")
    assert [r["outcome"] for r in recorded] == ["answered", "refused", "dry_run", "failed", "failed"]
    assert recorded[1]["refusal_reason"] == "score_gate"
    assert [r["error_reason"] for r in recorded[3:]] == ["VALIDATION_ERROR", "LLM_UNAVAILABLE"]
    assert [r["refusal_reason"] for r in empty] == ["no_chunks"]
    assert recorded[0]["citations"][0]["source_id"].startswith("citations-and-confidence:")
    assert all(r["request_id"] for r in recorded)


async def test_gate_refusals_never_call_the_llm(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=scripted([])) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                                  llm_self_score=True, follow_up_count=2, hallucination_retries=2) as server:
            gate = await ask(server, query="Best recipe for banana bread?")
            none = await ask(server, tenant_id="nobody")
    assert gate.refusal_reason == pb.REFUSAL_REASON_SCORE_GATE and none.refusal_reason == pb.REFUSAL_REASON_NO_CHUNKS
    assert chat_requests(llm) == []


async def test_a_session_reuses_its_stored_history(tmp_path: Path) -> None:
    replies = ["The overall confidence is 30 times the retrieval score [#1].", "Coverage counts 40 percent [#1].",
               "Coverage counts 40 percent [#1]."]
    follow_up = "How much does coverage count in the confidence score?"
    session = str(uuid.uuid4())
    async with ScriptedOpenAIServer(deltas=scripted(replies)) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url) as server:
            await ask(server, session_id=session)
            await ask(server, query=follow_up, session_id=session)
            await ask(server, query=follow_up, session_id=str(uuid.uuid4()))
    first, second, fresh = chat_requests(llm)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "user"]
    assert second["messages"][1]["content"] == QUESTION and second["messages"][2]["content"] == replies[0]
    assert [m["role"] for m in fresh["messages"]] == ["system", "user"], "another session starts empty"
    assert len(first["messages"]) == 2


async def test_routes_go_to_the_owner_of_the_primary_tag(tmp_path: Path) -> None:
    owners = tmp_path / "owners.json"
    owners.write_text(json.dumps({"users": [{"id": "u7", "email": "travel-lead@example.com"}],
                                  "tags": [{"name": "travel", "owner_user_id": "u7"}]}))
    # RAG_CONFIDENCE_THRESHOLD is at most 100; the extractive answer's confidence is at most 85 (its self-score is
    # the default 50), so every answer here is ROUTEd.
    async with running_server(tmp_path / "data", owners_file=str(owners), confidence_threshold=100.0) as server:
        async with connected(server) as stubs:
            document = index_pb.Document(document_id="travel", name="travel.md", media_type="text/markdown",
                                         tags=["travel"],
                                         content=b"# Travel\n\nFlights are booked through the travel desk two weeks ahead.")
            await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="acme", documents=[document]))
        routed = await ask(server, query="How are flights booked?", tenant_id="acme", user_tags=["travel"])
        fallback = await ask(server)  # the demo corpus has no tags: admin fallback
    assert routed.action == pb.ACTION_ROUTE and routed.grounded
    assert (routed.route.tag, routed.route.owner_user_id, routed.route.owner_email, routed.route.fallback) == (
        "travel", "u7", "travel-lead@example.com", False,
    )
    assert routed.route.reason.startswith("Low confidence:")
    assert fallback.route.fallback and fallback.route.owner_email == "admin@example.com" and fallback.route.tag == "system"


REPLIES: list[Callable[[int], str]] = [
    lambda n: "Right [#1].",
    lambda n: f"Right and wrong [#{n}] [#{n + 1}].",
    lambda n: "Invented [#42] and [#999].",
    lambda n: "No marker at all.",
    lambda n: "[#0] and [#1] and [ #2 ] and [2].",
]


@pytest.mark.parametrize("reply", REPLIES, ids=["right", "edge", "invented", "none", "odd"])
async def test_citations_only_ever_point_into_the_prompt(tmp_path: Path, reply: Callable[[int], str]) -> None:
    async with ScriptedOpenAIServer(deltas=lambda body: [reply(body["messages"][-1]["content"].count("<<<"))]) as llm:
        async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url) as server:
            async with connected(server) as stubs:
                secret = index_pb.Document(document_id="secret", name="s.md", media_type="text/markdown",
                                           content=b"# Confidence\n\nThe confidence score is computed by the secret formula.")
                await stubs.index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id="other", documents=[secret]))
            answer = await ask(server, explain=True)
    packed = {c.marker: c.source_id for c in answer.explanation.packed_chunks}
    assert packed and all(not source.startswith("secret:") for source in packed.values())
    for citation in answer.citations:
        assert packed[citation.marker] == citation.source_id, "every citation is a chunk that was in the prompt"
    assert {c.marker for c in answer.citations} <= {int(n) for n in MARKER.findall(answer.text)}
