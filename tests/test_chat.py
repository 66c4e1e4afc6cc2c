"""`ragsvc chat` driven through a pseudo-terminal (pexpect), against a real `ragsvc serve` process whose LLM is the
scripted OpenAI-compatible server: the welcome text, a follow-up that gets the first turn from the session's
stored history, a conversation (a grounded question, a follow-up answered from the right source, a refused question
whose draft never shows), and Ctrl-C in the middle of a slow stream (the answer stops, the server-side stream is
cancelled all the way to the LLM's HTTP connection, the chat goes on).

pexpect is blocking, and the scripted LLM server runs on this test's event loop, so every expect runs in a
worker thread (`asyncio.to_thread`) and is bounded by its own timeout."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pexpect
import pytest

from ragsvc.judge import CONDENSE_PROMPT
from ragsvc.prompts import REFUSAL_SENTENCE
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import serve_process

EXPECT_TIMEOUT_S = 20  # generous bound per expect; the whole module takes a few seconds
FIRST_QUESTION = "How are documents chunked?"
FIRST_ANSWER = "Documents are split into chunks of about 180 tokens. [#1]"
FIRST_DELTAS = (*(word + " " for word in FIRST_ANSWER.split(" ")[:-1]), "[#1]")
FOLLOW_UP = "And how much do neighbouring ones share?"
SLOW_QUESTION = "How is the confidence score computed?"
SLOW_DELTAS = tuple(f"Slow sentence {i} [#1]. " for i in range(60))
CONDENSING = CONDENSE_PROMPT.split("\n", 1)[0]  # how the server's condensing prompt starts


def scripted(answers: Sequence[str], standalone: Sequence[str] = ()) -> Any:
    """The LLM's replies: the next of `standalone` to the condensing prompt, else the next of `answers`, a word at a
    time."""
    replies, condensed = iter(answers), iter(standalone)

    def deltas(body: dict[str, Any]) -> list[str]:
        if CONDENSING in body["messages"][-1]["content"]:
            return [next(condensed)]
        *words, last = next(replies).split(" ")
        return [word + " " for word in words] + [last]

    return deltas


async def expect(child: pexpect.spawn, pattern: str, within_s: float = EXPECT_TIMEOUT_S) -> None:
    """Wait for `pattern` (literal text) in the chat's output, off the event loop, within `within_s`."""
    await asyncio.to_thread(child.expect_exact, pattern, timeout=within_s)


async def turn(child: pexpect.spawn, question: str, *shown: str) -> None:
    """Ask `question`, wait for each of `shown` in order, then for the next prompt."""
    child.sendline(question)
    for pattern in (*shown, "> "):
        await expect(child, pattern)


def answer_requests(llm: ScriptedOpenAIServer) -> list[dict]:
    """The streamed chat completions the server asked of the LLM for answers (not the condensing of follow-ups)."""
    return [
        r.body
        for r in llm.requests
        if r.path == "/v1/chat/completions"
        and isinstance(r.body, dict)
        and r.body.get("stream")
        and CONDENSING not in r.body["messages"][-1]["content"]
    ]


@pytest.fixture(scope="module")
async def llm() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(deltas=FIRST_DELTAS) as server:
        yield server


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedOpenAIServer) -> AsyncIterator[str]:
    """A `ragsvc serve` process (demo corpus indexed, the scripted LLM), shared by this module's tests; stopped
    (SIGTERM, then waited for) when they are done."""
    async with serve_process(
        tmp_path_factory.mktemp("chat-server"),
        {
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": llm.base_url,
            # Only the answer itself (and the condensing of a follow-up) goes to the LLM, so the test reads exactly
            # the calls it made.
            "RAG_LLM_CLASSIFY": "false",
            "RAG_LLM_SELF_SCORE": "false",
            "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
            "RAG_MAX_RETRIES_ON_HALLUCINATION": "0",
            "RAG_CACHE_MAX_ENTRIES": "0",
            "RAG_API_RATE_LIMIT": "0",
            "RAG_REQUEST_LOG": "false",
            "RAG_GRACE_PERIOD_SECONDS": "1",
        },
    ) as served:
        yield served.address


@pytest.fixture
async def chat(address: str, llm: ScriptedOpenAIServer) -> AsyncIterator[pexpect.spawn]:
    """`ragsvc chat` in a pseudo-terminal, in a new session; the scripted LLM starts each test afresh."""
    llm.deltas, llm.token_delay_s = scripted([FIRST_ANSWER] * 3, standalone=[FIRST_QUESTION]), 0.0
    llm.requests.clear()
    llm.streams.clear()
    child = pexpect.spawn(
        sys.executable,
        ["-m", "ragsvc.cli", "chat", "--address", address, "--timeout", "30"],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        encoding="utf-8",
        timeout=EXPECT_TIMEOUT_S,
        dimensions=(40, 500),  # wide: no wrapping of long answer lines
    )
    try:
        yield child
    finally:
        child.close(force=True)


async def test_welcome_lists_examples_and_a_follow_up_carries_the_first_turn(
    chat: pexpect.spawn, llm: ScriptedOpenAIServer
) -> None:
    await expect(chat, "session ")
    for example in ("citations, confidence and routing?", "errors and status codes?", "ingesting documents?"):
        await expect(chat, example)  # the demo corpus's first documents (tests/test_client_hints.py)
    await expect(chat, "> ")

    await turn(chat, FIRST_QUESTION, "180 tokens. [#1]", "Sources:")
    await turn(chat, FOLLOW_UP, "Sources:")

    first, second = answer_requests(llm)
    assert not any(FIRST_ANSWER in str(m.get("content")) for m in first["messages"])
    # The follow-up's prompt carries the first turn, from the session the chat keeps (it sends no history).
    history = [(m["role"], m["content"]) for m in second["messages"]]
    assert ("user", FIRST_QUESTION) in history, history
    assert ("assistant", FIRST_ANSWER) in history, history
    assert any(FOLLOW_UP in content for role, content in history if role == "user")

    chat.sendline("exit")
    await asyncio.to_thread(chat.expect_exact, pexpect.EOF, timeout=EXPECT_TIMEOUT_S)


async def test_ctrl_c_stops_the_stream_cancels_it_on_the_server_and_the_chat_goes_on(
    chat: pexpect.spawn, llm: ScriptedOpenAIServer
) -> None:
    await expect(chat, "> ")
    chat.sendintr()  # at the prompt, with no answer streaming: a hint, and the chat stays
    await expect(chat, "(Ctrl-D or 'exit' quits)")
    llm.deltas = SLOW_DELTAS
    llm.token_delay_s = 0.1  # ~6 s if it ran to the end
    chat.sendline(SLOW_QUESTION)
    await expect(chat, "Slow sentence 2 [#1].")
    chat.sendintr()
    await expect(chat, "[answer stopped]")
    await expect(chat, "> ")

    [stream] = llm.streams
    # The cancel reached the LLM: ragsvc closed its HTTP connection mid-answer.
    await asyncio.wait_for(stream.request.connection.closed.wait(), timeout=EXPECT_TIMEOUT_S)
    assert stream.request.connection.closed_by == "client"
    assert not stream.completed and stream.tokens_sent < len(SLOW_DELTAS)
    assert "Slow sentence 59" not in chat.before

    # The chat is still usable: the next question is answered in full.
    llm.token_delay_s = 0.0
    llm.deltas = FIRST_DELTAS
    await turn(chat, FIRST_QUESTION, "180 tokens. [#1]", "Sources:")
    assert len(answer_requests(llm)) == 2
    chat.sendeof()
    await asyncio.to_thread(chat.expect_exact, pexpect.EOF, timeout=EXPECT_TIMEOUT_S)


GROUNDED = "What happens on SIGTERM?"
GROUNDED_ANSWER = "The server reports NOT_SERVING and lets in-flight calls finish within a grace period. [#1]"
GRACE = "How long is that grace period?"
STANDALONE = "How long is the grace period after SIGTERM?"
GRACE_ANSWER = "The grace period is set with RAG_GRACE_PERIOD_SECONDS, ten seconds by default. [#1]"
UNSUPPORTED = "How often are the dependencies probed?"
WRONG_DRAFT = "The probes run every 85 minutes on Mars. Nobody checks them."


async def test_a_grounded_answer_a_follow_up_with_its_source_and_a_refusal_whose_draft_never_shows(
    chat: pexpect.spawn, llm: ScriptedOpenAIServer
) -> None:
    shown = io.StringIO()
    chat.logfile_read = shown  # everything the chat printed
    llm.deltas = scripted([GROUNDED_ANSWER, GRACE_ANSWER, WRONG_DRAFT], standalone=[STANDALONE, UNSUPPORTED])
    await expect(chat, "> ")

    await turn(chat, GROUNDED, "grace period. [#1]", "Sources:", "operations.md")
    source = "[#1] operations.md · section Graceful shutdown"  # no page: Markdown has none
    await turn(chat, GRACE, "ten seconds by default. [#1]", "Sources:", source)
    await turn(chat, UNSUPPORTED, REFUSAL_SENTENCE, "(REFUSAL_REASON_UNSUPPORTED_ANSWER)")
    chat.sendline("exit")
    await asyncio.to_thread(chat.expect_exact, pexpect.EOF, timeout=EXPECT_TIMEOUT_S)

    transcript = shown.getvalue()
    assert "85 minutes" not in transcript and "Nobody checks" not in transcript, "the refused draft never showed"
    assert "draft withdrawn" not in transcript, "nothing had to be taken back"
    # The follow-up was condensed by the model with the first turn, and the answer's prompt has the first turn.
    condensing = [r.body["messages"][-1]["content"] for r in llm.requests if CONDENSING in str(r.body)]
    assert len(condensing) == 2 and GROUNDED in condensing[0] and GRACE in condensing[0]
    _, follow_up, _ = answer_requests(llm)
    assert ("user", GROUNDED) in [(m["role"], m["content"]) for m in follow_up["messages"]]
