"""Generation end to end: a real ragsvc server (demo corpus) in front of a scripted LLM server, one of each
protocol (OpenAI-compatible, Ollama), called over a real gRPC channel. Streaming reaches the client before the
LLM finishes; cancelling the call or letting its deadline pass closes the upstream stream at once; errors and
fallbacks reach the client as the contract says."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ragsvc.model_table import DEFAULT_MODELS
from ragsvc.server.app import RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc
from tests.generation.backends import BACKENDS, OLLAMA, Backend
from tests.support.http_server import Fault, ScriptedHTTPServer
from tests.support.servers import connected, running_server

QUESTION = "How is the confidence score computed?"
RAW = pb.AskStreamRequest(query=QUESTION, stream_policy=pb.STREAM_POLICY_RAW)  # every token as it comes
ANSWER = ["The overall confidence", " is 30 times the retrieval score", " plus 40 times coverage", " [#1]."]


@dataclass
class Stack:
    backend: Backend
    llm: ScriptedHTTPServer
    server: RagServer
    stub: rag_service_pb2_grpc.RagServiceStub

    def script(
        self,
        deltas: list[str] = ANSWER,
        *,
        first_token_delay_s: float = 0.0,
        token_delay_s: float = 0.0,
        fault: Fault | None = None,
        fault_after: int = 0,
        model_status: dict[str, int] | None = None,
    ) -> None:
        """What the LLM server does for the next calls."""
        self.llm.deltas = deltas
        self.llm.first_token_delay_s, self.llm.token_delay_s = first_token_delay_s, token_delay_s
        self.llm.fault, self.llm.fault_after = fault, fault_after
        self.llm.model_status = dict(model_status or {})

    def chats(self) -> list:
        return [r for r in self.llm.requests if r.path == self.backend.chat_path]


@pytest.fixture(scope="module", params=BACKENDS, ids=lambda b: b.name)
async def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    backend: Backend = request.param
    async with backend.server(models=("llama3.2", "qwen3:8b")) as llm:
        url = {"ollama_base_url": llm.base_url} if backend is OLLAMA else {"openai_base_url": llm.base_url}
        async with (
            running_server(
                Path(tmp_path_factory.mktemp(f"generation-{backend.name}")),
                generator=backend.name,
                models=DEFAULT_MODELS + ",tiny=1024/256",
                fallback_model="qwen3:8b",
                health_probe_interval_s=3600.0,
                model_list_ttl_s=3600.0,
                llm_retry_backoff_s=0.01,
                **url,
            ) as server,
            connected(server) as stubs,
        ):
            yield Stack(backend, llm, server, stubs.rag)


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    info = error_details_pb2.ErrorInfo()
    status = rpc_status.from_call(error)
    assert status is not None, "the status carries google.rpc details"
    assert any(d.Unpack(info) for d in status.details if d.Is(info.DESCRIPTOR))
    return info


async def test_raw_deltas_reach_the_client_before_the_llm_finishes(stack: Stack) -> None:
    stack.script(first_token_delay_s=0.2, token_delay_s=0.2)
    first_delta_at = None
    messages = []
    async for message in stack.stub.AskStream(RAW, timeout=30):
        if message.HasField("text_delta") and first_delta_at is None:
            first_delta_at = time.monotonic()
        messages.append(message)

    record = stack.llm.streams[-1]
    assert first_delta_at is not None and record.first_token_at is not None and record.last_token_at is not None
    assert first_delta_at < record.last_token_at, "time to first token is less than the LLM's total"
    assert first_delta_at - record.first_token_at < 0.15, "each token is forwarded as it arrives"
    answer = messages[-1].answer
    assert [m.text_delta for m in messages if m.HasField("text_delta")] == ANSWER
    assert answer.text == "".join(ANSWER) and answer.grounded
    assert answer.model == f"{stack.backend.name}:llama3.2" and not answer.flags.degraded
    assert answer.usage.completion_tokens == len(ANSWER) and answer.usage.prompt_tokens > 0
    assert answer.timings.time_to_first_token.ToNanoseconds() >= 200_000_000


async def test_cancelling_the_call_closes_the_upstream_stream_at_once(stack: Stack) -> None:
    stack.script([f" token{i}" for i in range(200)], token_delay_s=0.02)
    call = stack.stub.AskStream(RAW, timeout=30)
    async for message in call:
        if message.HasField("text_delta"):
            break
    call.cancel()
    cancelled_at = time.monotonic()
    record = stack.llm.streams[-1]
    connection = record.request.connection
    await asyncio.wait_for(connection.closed.wait(), timeout=2.0)

    assert connection.closed_by == "client"
    assert connection.closed_at - cancelled_at < 0.2
    assert not record.completed and record.tokens_sent < 200
    assert len(stack.chats()) and stack.chats()[-1] is record.request


async def test_a_deadline_passing_closes_the_upstream_and_names_the_stage(stack: Stack) -> None:
    stack.script(["The overall", " confidence"], fault=Fault.STALL, fault_after=1)
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stack.stub.AskStream(pb.AskStreamRequest(query=QUESTION), timeout=1.5):
            pass
    deadline = started + 1.5
    connection = stack.llm.streams[-1].request.connection
    await asyncio.wait_for(connection.closed.wait(), timeout=2.0)

    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    info = error_info(caught.value)
    assert info.reason == "LLM_TIMEOUT" and info.metadata["stage"] == "generation"
    assert connection.closed_by == "client" and connection.closed_at - deadline < 0.2


async def test_an_unserved_model_is_failed_precondition(stack: Stack) -> None:
    stack.script()
    request = pb.AskRequest(query=QUESTION, generation=pb.GenerationOptions(model="deepseek-r1:32b"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack.stub.Ask(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    info = error_info(caught.value)
    assert info.reason == "MODEL_UNAVAILABLE" and info.metadata["model"] == "deepseek-r1:32b"


async def test_a_question_too_long_for_the_models_window_is_refused(stack: Stack) -> None:
    requests_before = len(stack.llm.requests)
    request = pb.AskRequest(query=(QUESTION + " ") * 50, generation=pb.GenerationOptions(model="tiny"))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack.stub.Ask(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "TOKEN_BUDGET_EXCEEDED"
    assert len(stack.llm.requests) == requests_before


async def test_the_fallback_model_answers_flagged_degraded(stack: Stack) -> None:
    stack.script(model_status={"llama3.2": 503})
    chats_before = len(stack.chats())
    answer = (await stack.stub.Ask(pb.AskRequest(query=QUESTION), timeout=30)).answer
    asked = [r.body["model"] for r in stack.chats()[chats_before:]]
    assert asked == ["llama3.2"] * 3 + ["qwen3:8b"], "tried and retried twice (R-001-21), then the fallback"
    assert answer.model == f"{stack.backend.name}:qwen3:8b" and answer.flags.degraded
    assert answer.text == "".join(ANSWER)


async def test_a_failing_llm_is_unavailable_with_retry_info(stack: Stack) -> None:
    stack.script(model_status={"llama3.2": 503, "qwen3:8b": 503})
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack.stub.Ask(pb.AskRequest(query=QUESTION), timeout=30)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_info(caught.value).reason == "LLM_UNAVAILABLE"


async def test_invalid_citations_are_dropped_by_default_and_refused_when_a_request_is_strict(stack: Stack) -> None:
    stack.script([*ANSWER, " Taxis are free [#9]."])
    messages = [m async for m in stack.stub.AskStream(pb.AskStreamRequest(query=QUESTION), timeout=30)]
    answer = messages[-1].answer
    assert answer.text == "".join(ANSWER) and answer.grounded
    assert answer.flags.citations_dropped and answer.flags.hallucination_detected and answer.flags.mitigation_applied
    assert "".join(m.text_delta for m in messages if m.HasField("text_delta")) == answer.text
    strict = pb.GenerationOptions(citation_policy=pb.CITATION_POLICY_STRICT)
    refused = (await stack.stub.Ask(pb.AskRequest(query=QUESTION, generation=strict), timeout=30)).answer
    assert not refused.grounded and refused.refusal_reason == pb.REFUSAL_REASON_INVALID_CITATIONS
    unknown = pb.GenerationOptions(citation_policy=7)  # type: ignore[arg-type]  # a number a newer client may send
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack.stub.Ask(pb.AskRequest(query=QUESTION, generation=unknown), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "VALIDATION_ERROR" and "generation.citation_policy" in caught.value.details()


# Two sentences of the demo corpus's confidence section, restated without a marker, and one it does not hold.
RESTATED = ["The retrieval score is the mean relevance", " of the cited chunks.", " The coverage is the share of the",
            " answer's key terms that are found in the evidence."]  # fmt: skip
UNSUPPORTED = " Confidence doubles on every Friday for premium tenants."


async def test_an_answer_without_markers_is_cited_by_the_chunk_that_holds_its_sentences(stack: Stack) -> None:
    stack.script([*RESTATED, UNSUPPORTED])
    request = pb.AskStreamRequest(query=QUESTION, explain=True)
    messages = [m async for m in stack.stub.AskStream(request, timeout=30)]
    answer = messages[-1].answer
    assert answer.grounded and answer.flags.citations_attributed and not answer.flags.hallucination_detected
    [citation] = answer.citations
    packed = answer.explanation.packed_chunks[citation.marker - 1]
    assert packed.source_id == citation.source_id
    assert "mean relevance of the cited" in packed.text and "found in the evidence" in packed.text
    marker = f"[#{citation.marker}]"
    assert answer.text == (
        f"The retrieval score is the mean relevance of the cited chunks {marker}. The coverage is the share of the "
        f"answer's key terms that are found in the evidence {marker}.{UNSUPPORTED}"
    ), "the unsupported sentence keeps no citation"
    assert "".join(m.text_delta for m in messages if m.HasField("text_delta")) == answer.text
    assert [m.citation.marker for m in messages if m.HasField("citation")] == [citation.marker]

    stack.script([UNSUPPORTED.strip()])
    refused = (await stack.stub.Ask(pb.AskRequest(query=QUESTION, explain=True), timeout=30)).answer
    assert not refused.grounded and refused.refusal_reason == pb.REFUSAL_REASON_UNSUPPORTED_ANSWER
    assert refused.explanation.draft == UNSUPPORTED.strip() and not refused.flags.citations_attributed


async def test_temperature_and_seed_reach_the_llm(stack: Stack) -> None:
    stack.script()
    options = pb.GenerationOptions(
        temperature=0.0, seed=99, model="qwen3:8b", template_id="rag-v1-detailed", citation_style=pb.CITATION_STYLE_SOURCE_ID
    )
    answer = (await stack.stub.Ask(pb.AskRequest(query=QUESTION, generation=options), timeout=30)).answer
    body = stack.chats()[-1].body
    sampling = body if stack.backend.name == "openai" else body["options"]
    assert (sampling["temperature"], sampling["seed"], body["model"]) == (0.0, 99, "qwen3:8b")
    assert "[SourceId:" in body["messages"][-1]["content"] and "thoroughly" in body["messages"][0]["content"]
    assert answer.prompt_template_version == "rag-v1-detailed"


async def test_dry_run_sends_nothing_to_the_llm(stack: Stack) -> None:
    requests_before = len(stack.llm.requests)
    request = pb.AskRequest(
        query=QUESTION,
        dry_run=True,
        generation=pb.GenerationOptions(model="qwen3:8b", template_id="rag-v1-terse", strictness=pb.STRICTNESS_LENIENT),
    )
    answer = (await stack.stub.Ask(request, timeout=30)).answer
    assert len(stack.llm.requests) == requests_before
    assert answer.text == "" and answer.model == f"{stack.backend.name}:qwen3:8b"
    assert answer.prompt_template_version == "rag-v1-terse"
    assert "general knowledge" in answer.explanation.prompt[0].content
    assert len(answer.explanation.packed_chunks) == answer.context_chunks_used >= 1
    assert answer.explanation.prompt_tokens > answer.context_tokens_used > 0
