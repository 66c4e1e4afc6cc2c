"""Follow-ups end to end, through the real gRPC server: "And how long do they get to finish?" after "What happens
on SIGTERM?" finds the graceful-shutdown chunk, in a stored session (`session_id`) and with explicit `chat_history`,
with the extractive generator (the deterministic rule) and with an LLM (the scripted server condenses it). What
was searched is in the explanation, the audit row and, without its text, the request log."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragsvc.judge import CONDENSE_PROMPT
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_request_log import logged, request_log
from tests.support.openai_server import ScriptedOpenAIServer, replies_by_prompt
from tests.support.servers import connected, running_server

FIRST = "What happens on SIGTERM?"
FOLLOW_UP = "And how long do they get to finish?"
STANDALONE = "How long is the shutdown grace period after SIGTERM?"
CONDENSING = CONDENSE_PROMPT.split("\n", 1)[0]
LLM_ANSWER = "The grace period is ten seconds by default [#1]."


@dataclass
class Mode:
    name: str
    server: RagServer
    llm: ScriptedOpenAIServer | None

    def condensing_requests(self) -> list[str]:
        prompts = [
            r.body["messages"][-1]["content"]
            for r in (self.llm.requests if self.llm else [])
            if r.path.endswith("/chat/completions")
        ]
        return [prompt for prompt in prompts if CONDENSING in prompt]


@pytest.fixture(scope="module", params=["extractive", "llm"])
async def mode(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mode]:
    data = Path(tmp_path_factory.mktemp(f"conversations-{request.param}"))
    if request.param == "extractive":
        async with running_server(data) as server:
            yield Mode("extractive", server, None)
        return
    replies = replies_by_prompt(itertools.repeat(LLM_ANSWER), {CONDENSING: STANDALONE})
    async with ScriptedOpenAIServer(deltas=replies) as llm:
        async with running_server(data, generator="openai", openai_base_url=llm.base_url, llm_condense=True) as server:
            yield Mode("llm", server, llm)


async def ask(server: RagServer, query: str, **fields: Any) -> pb.Answer:
    async with connected(server) as stubs:
        return (await stubs.rag.Ask(pb.AskRequest(query=query, explain=True, **fields), timeout=30)).answer


def assert_found_the_grace_period(mode: Mode, answer: pb.Answer) -> None:
    first = answer.explanation.packed_chunks[0]
    assert (first.document_id, first.section) == ("operations", "Graceful shutdown"), answer.explanation
    assert "grace period" in first.text and answer.grounded
    assert any(c.document_id == "operations" for c in answer.citations)
    search = answer.explanation.search_query
    if mode.name == "llm":
        assert answer.explanation.query_rewrite == pb.QUERY_REWRITE_LLM and search == STANDALONE
        [prompt] = mode.condensing_requests()[-1:]
        assert FIRST in prompt and FOLLOW_UP in prompt, "the model condensed it with the conversation"
    else:
        # Searched two ways by rule ("SIGTERM And how long ..." and after the earlier question word for word), both
        # finding the chunk: the reader keeps the one whose evidence it reads better.
        assert answer.explanation.query_rewrite == pb.QUERY_REWRITE_RULE and search.endswith(FOLLOW_UP)


async def test_on_its_own_the_follow_up_is_refused(mode: Mode) -> None:
    alone = await ask(mode.server, FOLLOW_UP)
    assert not alone.grounded and alone.text != LLM_ANSWER
    assert (alone.explanation.search_query, alone.explanation.query_rewrite) == (FOLLOW_UP, pb.QUERY_REWRITE_NONE)
    assert not mode.condensing_requests(), "nothing to condense without a conversation"


async def test_an_explicit_history_follow_up_finds_the_chunk(mode: Mode) -> None:
    first = await ask(mode.server, FIRST)
    history = [pb.ChatMessage(role=pb.ROLE_USER, content=FIRST), pb.ChatMessage(role=pb.ROLE_ASSISTANT, content=first.text)]
    assert_found_the_grace_period(mode, await ask(mode.server, FOLLOW_UP, chat_history=history))


async def test_a_stored_session_follow_up_finds_the_chunk_and_is_recorded(mode: Mode) -> None:
    session = str(uuid.uuid4())
    await ask(mode.server, FIRST, session_id=session)
    with request_log() as lines:
        answer = await ask(mode.server, FOLLOW_UP, session_id=session, tenant_id="default")
        [line] = await logged(lines, answer.request_id)
    assert_found_the_grace_period(mode, answer)

    rewrite = "llm" if mode.name == "llm" else "rule"
    assert line["search"] == {"rewrite": rewrite, "changed": True}
    logged_text = json.dumps(line)
    assert FOLLOW_UP not in logged_text and answer.explanation.search_query not in logged_text, "no query text is logged"

    [row] = [r for r in await mode.server.components.answers.recent("default") if r["request_id"] == answer.request_id]
    assert (row["search_query"], row["query_rewrite"]) == (answer.explanation.search_query, rewrite)
    assert row["session_id"] == session


async def test_a_follow_up_with_its_own_subject_is_answered_from_its_own_subject(mode: Mode) -> None:
    """By rule it is searched as asked and after the earlier question too, and the reader keeps the search whose
    evidence it judges likelier to answer it (which of the two is the model's call); either way the answer reads
    the follow-up's own subject first, not the earlier question's."""
    history = [pb.ChatMessage(role=pb.ROLE_USER, content=FIRST), pb.ChatMessage(role=pb.ROLE_ASSISTANT, content="...")]
    if mode.llm is not None:
        mode.llm.deltas = replies_by_prompt(itertools.repeat(LLM_ANSWER), {CONDENSING: "How are documents chunked?"})
    try:
        answer = await ask(mode.server, "How are documents chunked?", chat_history=history)
    finally:
        if mode.llm is not None:
            mode.llm.deltas = replies_by_prompt(itertools.repeat(LLM_ANSWER), {CONDENSING: STANDALONE})
    as_asked = "How are documents chunked?"
    assert answer.explanation.search_query in ({as_asked} if mode.llm is not None else {as_asked, f"{FIRST} {as_asked}"})
    assert answer.explanation.packed_chunks[0].document_id == "ingestion"
