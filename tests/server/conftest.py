"""A real ragsvc server on a free loopback port, with the demo corpus indexed, shared by the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from ragsvc.config import Settings
from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc


@pytest.fixture(scope="session")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    settings = Settings(
        grpc_address="127.0.0.1:0",
        data_dir=tmp_path_factory.mktemp("server-data"),
        health_probe_interval_s=0.5,
        grace_period_s=2.0,
    )
    server = await RagServer.start(settings)
    yield server
    await server.stop()


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
