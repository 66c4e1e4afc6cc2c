"""Health for a mesh, through a real server: each dependency down in turn (the LLM server answering 503, the
embedding server answering 503, the database closed, the vector engine closed), each with and without the
extractive fallback, and every health name checked against what it promises (server/health.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragsvc.config import Settings
from ragsvc.server.app import ADMIN_SERVICE, INDEX_SERVICE, RAG_SERVICE, RagServer
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc
from tests.support.openai_server import ScriptedOpenAIServer

SERVING, NOT_SERVING = "SERVING", "NOT_SERVING"
NAMES = ("", RAG_SERVICE, INDEX_SERVICE, ADMIN_SERVICE, "retrieval", "embedder", "llm", "db", "liveness")
FAULTS = ("none", "llm", "embedder", "db", "retrieval")

# What each name needs, as documented in server/health.py; "llm" is not needed where the fallback answers.
NEEDS = {
    "": {"retrieval", "embedder", "db", "llm"},
    RAG_SERVICE: {"retrieval", "embedder", "db", "llm"},
    INDEX_SERVICE: {"retrieval", "embedder", "db"},
    ADMIN_SERVICE: {"db"},
    **{dependency: {dependency} for dependency in ("retrieval", "embedder", "llm", "db")},
    "liveness": set(),  # the process answers: never a dependency's outage
}


def expected(fault: str, fallback: bool) -> dict[str, str]:
    down = {fault} - {"none"}
    if fallback:
        down_for = {name: down - ({"llm"} if name in ("", RAG_SERVICE) else set()) for name in NAMES}
    else:
        down_for = dict.fromkeys(NAMES, down)
    return {name: NOT_SERVING if NEEDS[name] & down_for[name] else SERVING for name in NAMES}


@pytest.fixture
async def backends() -> AsyncIterator[tuple[ScriptedOpenAIServer, ScriptedOpenAIServer]]:
    """An LLM server and an embedding server, both OpenAI-compatible, on real sockets."""
    async with ScriptedOpenAIServer(deltas=("Drained in ten seconds [#1].",)) as llm, ScriptedOpenAIServer() as emb:
        yield llm, emb


async def health_of(server: RagServer) -> dict[str, str]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        statuses = {}
        for name in NAMES:
            response = await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            statuses[name] = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return statuses


@pytest.mark.parametrize("fallback", [False, True], ids=["no-fallback", "extractive-fallback"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_each_name_says_what_its_callers_need(
    fault: str, fallback: bool, backends: tuple[ScriptedOpenAIServer, ScriptedOpenAIServer], tmp_path: Path
) -> None:
    llm, emb = backends
    settings = Settings.of(
        grpc_address="127.0.0.1:0",
        data_dir=tmp_path,
        demo_corpus=False,
        request_log=False,
        health_probe_interval_s=60.0,  # probed by the test, not by the clock
        generator="openai",
        openai_base_url=llm.base_url,
        llm_classify=False,
        llm_self_score=False,
        follow_up_count=0,
        embedder="openai",
        embedding_base_url=emb.base_url,
        fallback_extractive=fallback,
    )
    server = await RagServer.start(settings)
    try:
        assert await health_of(server) == expected("none", fallback)
        if fault == "llm":
            llm.status = 503
        elif fault == "embedder":
            emb.status = 503
        elif fault == "db":
            server.components.database.close()
        elif fault == "retrieval":
            await server.components.engine.close()
        healthy = await server.health.probe_once()
        assert healthy == {d: d != fault for d in ("retrieval", "embedder", "llm", "db")}
        assert await health_of(server) == expected(fault, fallback)
        up = {d: server.hardening.metrics.dependency_up.labels(d)._value.get() for d in healthy}
        assert up == {d: 1.0 if ok else 0.0 for d, ok in healthy.items()}
    finally:
        llm.status = emb.status = None
        await server.stop()


@pytest.mark.parametrize("fallback", [False, True], ids=["no-fallback", "extractive-fallback"])
async def test_serving_means_it_can_answer_when_the_llm_is_down(
    fallback: bool, backends: tuple[ScriptedOpenAIServer, ScriptedOpenAIServer], tmp_path: Path
) -> None:
    """ "" says whether this replica can answer: with the fallback it does (degraded), without it it cannot."""
    llm, emb = backends
    settings = Settings.of(
        grpc_address="127.0.0.1:0",
        data_dir=tmp_path,
        request_log=False,
        health_probe_interval_s=60.0,
        generator="openai",
        openai_base_url=llm.base_url,
        llm_classify=False,
        llm_self_score=False,
        follow_up_count=0,
        embedder="openai",
        embedding_base_url=emb.base_url,
        fallback_extractive=fallback,
        score_gate=0.0,
        min_similarity=0.0,
        answerability_gate=False,
        cache_max_entries=0,
        rate_limit_per_minute=0,
    )
    server = await RagServer.start(settings)
    try:
        llm.status = 503
        await server.health.probe_once()
        ready = (await health_of(server))[""]
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = rag_service_pb2_grpc.RagServiceStub(channel)
            request = pb.AskRequest(query="How long is the grace period on SIGTERM?")
            if fallback:
                answer = (await stub.Ask(request, timeout=10)).answer
                assert (ready, answer.flags.degraded, answer.model) == (SERVING, True, "extractive")
            else:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.Ask(request, timeout=10)
                assert (ready, refused.value.code()) == (NOT_SERVING, grpc.StatusCode.UNAVAILABLE)
    finally:
        llm.status = None
        await server.stop()
