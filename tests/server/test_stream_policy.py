"""The stream policy end to end, through the real gRPC server and the scripted LLM: a validated stream releases
only complete sentences whose markers are valid (checked message by message), a draft that ends refused shows
nothing more and its answer's text is the refusal; raw relays the draft; a looping model is stopped early, its
upstream stream closed, and the stop counted in the metrics."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from ragsvc.prompts import REFUSAL_SENTENCE
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_metrics import free_port, scrape
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import connected, running_server

QUESTION = "What happens on SIGTERM?"
VALID = "On SIGTERM the server reports NOT_SERVING [#1]."
WRONG = " The daily meal allowance on Mars is 85 credits [#7]."
UNCITED = " It is paid in cash."
MARKER = re.compile(r"\[#(\d{1,3})\]")
SENTENCE = re.compile(r"[^.!?]+[.!?]+(?:\s*\[#\d{1,3}\])*")
LOOP = "The grace period is ten seconds [#1]. "


def tokens(text: str) -> list[str]:
    """`text` as a model streams it: a word (with its space) at a time, a marker split after its "#"."""
    return [part for word in re.findall(r"\S+\s*", text) for part in re.split(r"(?<=\[#)", word) if part]


@pytest.fixture(scope="module")
async def llm() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer(deltas=tokens(VALID)) as server:
        yield server


@pytest.fixture(scope="module")
async def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
async def server(
    llm: ScriptedOpenAIServer, metrics_port: int, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RagServer]:
    """A server refusing invalid citations (RAG_CITATION_POLICY=strict): what the stream showed of a draft that
    ends refused."""
    async with running_server(Path(tmp_path_factory.mktemp("stream-policy")), generator="openai",
                              openai_base_url=llm.base_url, metrics_port=metrics_port,
                              citation_policy="strict") as server:
        yield server


async def stream(server: RagServer, policy: int = pb.STREAM_POLICY_UNSPECIFIED) -> list[pb.AskStreamResponse]:
    request = pb.AskStreamRequest(query=QUESTION, explain=True, stream_policy=policy)  # type: ignore[arg-type]
    async with connected(server) as stubs:
        return [message async for message in stubs.rag.AskStream(request, timeout=30)]


def script(llm: ScriptedOpenAIServer, draft: str | Sequence[str], token_delay_s: float = 0.0) -> None:
    llm.deltas = tokens(draft) if isinstance(draft, str) else list(draft)
    llm.token_delay_s = token_delay_s


def assert_only_validated_sentences(messages: list[pb.AskStreamResponse]) -> str:
    """Checks each message as it came: a text delta holds whole sentences whose every marker names a packed chunk
    and that carry a marker or follow one that did; a citation names a marker already released. Returns the text."""
    answer = messages[-1].answer
    packed = {c.marker for c in answer.explanation.packed_chunks}
    released, cited = "", set()
    for message in messages[:-1]:
        if message.HasField("text_delta"):
            delta = message.text_delta
            assert "".join(SENTENCE.findall(delta)) == delta, f"not whole sentences: {delta!r}"
            numbers = {int(n) for n in MARKER.findall(delta)}
            assert numbers <= packed, f"an unknown marker was released: {delta!r}"
            assert MARKER.search(released + delta), f"uncited text before any cited sentence: {delta!r}"
            released += delta
        else:
            assert message.HasField("citation"), message
            assert message.citation.marker in {int(n) for n in MARKER.findall(released)}
            cited.add(message.citation.marker)
    assert messages[-1].HasField("answer")
    return released


async def test_a_grounded_draft_is_released_sentence_by_sentence(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    script(llm, VALID + " Then it drains in-flight calls [#1].")
    messages = await stream(server)
    released = assert_only_validated_sentences(messages)
    answer = messages[-1].answer
    assert released == answer.text and answer.grounded
    deltas = [m.text_delta for m in messages if m.HasField("text_delta")]
    assert deltas == [VALID, " Then it drains in-flight calls [#1]."], "one message per validated sentence"


async def test_a_draft_that_ends_ungrounded_released_no_unvalidated_sentence(
    server: RagServer, llm: ScriptedOpenAIServer
) -> None:
    script(llm, VALID + WRONG + UNCITED)
    messages = await stream(server)
    released = assert_only_validated_sentences(messages)
    answer = messages[-1].answer
    assert released == VALID, "the valid sentence went out; nothing from the invalid one on"
    assert "Mars" not in "".join(m.text_delta for m in messages) and "cash" not in released
    assert not answer.grounded and answer.refusal_reason == pb.REFUSAL_REASON_INVALID_CITATIONS
    assert answer.text == REFUSAL_SENTENCE and not answer.citations, "the refused answer's text is the refusal"
    assert "Mars" in answer.explanation.draft, "the draft is kept for operators"
    [row] = [r for r in await server.components.answers.recent("default") if r["request_id"] == answer.request_id]
    assert row["answer"] == REFUSAL_SENTENCE and "Mars" in row["draft"]


async def test_by_default_the_sentence_of_an_invalid_citation_is_skipped_and_dropped(
    tmp_path: Path, llm: ScriptedOpenAIServer
) -> None:
    script(llm, VALID + WRONG + " Then it drains in-flight calls [#1].")
    async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url) as by_default:
        messages = await stream(by_default)
    released = assert_only_validated_sentences(messages)
    answer = messages[-1].answer
    assert released == answer.text == VALID + " Then it drains in-flight calls [#1]."
    assert answer.grounded and answer.flags.citations_dropped and "Mars" not in answer.text


async def test_a_draft_without_a_valid_cited_claim_shows_nothing(server: RagServer, llm: ScriptedOpenAIServer) -> None:
    script(llm, "The daily meal allowance on Mars is 85 credits." + UNCITED)
    messages = await stream(server)
    assert [m.WhichOneof("event") for m in messages] == ["answer"]
    assert messages[-1].answer.text == REFUSAL_SENTENCE
    assert messages[-1].answer.refusal_reason == pb.REFUSAL_REASON_UNSUPPORTED_ANSWER


async def test_raw_relays_the_draft_and_the_final_answer_replaces_it(
    server: RagServer, llm: ScriptedOpenAIServer
) -> None:
    script(llm, VALID + WRONG, token_delay_s=0.01)
    messages = await stream(server, pb.STREAM_POLICY_RAW)
    streamed = "".join(m.text_delta for m in messages if m.HasField("text_delta"))
    assert streamed == VALID + WRONG and len([m for m in messages if m.HasField("text_delta")]) > 5
    assert messages[-1].answer.text == REFUSAL_SENTENCE


async def test_the_server_default_is_a_setting(tmp_path: Path, llm: ScriptedOpenAIServer) -> None:
    script(llm, VALID + WRONG)
    async with running_server(tmp_path, generator="openai", openai_base_url=llm.base_url,
                              stream_policy="raw") as raw_by_default:
        messages = await stream(raw_by_default)
        validated = await stream(raw_by_default, pb.STREAM_POLICY_VALIDATED)
    assert "Mars" in "".join(m.text_delta for m in messages)
    assert "".join(m.text_delta for m in validated) == VALID


async def test_a_looping_model_is_stopped_early_and_its_stream_closed(
    server: RagServer, llm: ScriptedOpenAIServer, metrics_port: int
) -> None:
    loop = [piece for _ in range(200) for piece in tokens(LOOP)]  # ~1600 tokens if it ran to its end
    script(llm, loop, token_delay_s=0.002)
    messages = await stream(server)
    record = llm.streams[-1]
    await asyncio.wait_for(record.request.connection.closed.wait(), timeout=5)
    assert record.request.connection.closed_by == "client", "ragsvc hung up on the looping model"
    assert not record.completed and record.tokens_sent <= 4 * len(tokens(LOOP))
    answer = messages[-1].answer
    assert answer.flags.repetition_stopped and answer.grounded
    assert answer.text == LOOP.strip(), "the repeats are not in the answer"
    released = "".join(m.text_delta for m in messages if m.HasField("text_delta"))
    assert released == (LOOP * 2).strip(), "two copies went out; the third, where the guard cut, did not"
    assert answer.usage.completion_tokens > 0, "a stopped stream reports no usage: it is counted here"
    metrics = await scrape(metrics_port)
    assert metrics[("rag_repetition_stops_total", (("model", "openai:llama3.2"), ("provider", "openai")))] == 1
