"""Real ragsvc servers on free loopback ports, with the demo corpus indexed."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc

from ragsvc.config import Settings
from ragsvc.server.app import RagServer


@contextlib.asynccontextmanager
async def running_server(data_dir: Path, **overrides: object) -> AsyncIterator[RagServer]:
    """A server on 127.0.0.1:<free port>; `overrides` replace Settings fields. The answer cache and the rate
    limit, which carry state from one call to the next, are off unless a test turns them on; so are the extra
    LLM calls around an answer (classification, self-score, follow-ups, hallucination re-runs), which tests of scripted LLM
    servers would otherwise have to count."""
    fields: dict[str, object] = {
        "health_probe_interval_s": 0.5,
        "grace_period_s": 2.0,
        "cache_max_entries": 0,
        "rate_limit_per_minute": 0,
        "llm_self_score": False,
        "llm_classify": False,
        "follow_up_count": 0,
        "hallucination_retries": 0,
    }
    settings = Settings(**{**fields, **overrides, "grpc_address": "127.0.0.1:0", "data_dir": data_dir})  # type: ignore[arg-type]
    server = await RagServer.start(settings)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture(scope="session")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    async with running_server(tmp_path_factory.mktemp("server-data")) as server:
        yield server


@pytest.fixture(scope="session")
async def channel(server: RagServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield channel


@pytest.fixture(scope="session")
def rag_stub(channel: grpc.aio.Channel) -> rag_service_pb2_grpc.RagServiceStub:
    return rag_service_pb2_grpc.RagServiceStub(channel)


@pytest.fixture(scope="session")
def index_stub(channel: grpc.aio.Channel) -> index_service_pb2_grpc.IndexServiceStub:
    return index_service_pb2_grpc.IndexServiceStub(channel)
