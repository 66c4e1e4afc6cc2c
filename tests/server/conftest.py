"""One real ragsvc server for the module-independent tests of this package (demo corpus indexed), with a channel
and stubs to it; servers of their own come from tests/support/servers.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from ragsvc.server.app import RagServer
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from tests.support.servers import Stubs, connected, running_server


@pytest.fixture(scope="session")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RagServer]:
    # It lives for the whole session: it probes its dependencies rarely, so that its background probes do not
    # run under the tests that count what the process holds (tests/server/test_lifecycle.py).
    async with running_server(tmp_path_factory.mktemp("server-data"), health_probe_interval_s=60.0) as server:
        yield server


@pytest.fixture(scope="session")
async def stubs(server: RagServer) -> AsyncIterator[Stubs]:
    async with connected(server) as stubs:
        yield stubs


@pytest.fixture(scope="session")
def channel(stubs: Stubs) -> grpc.aio.Channel:
    return stubs.channel


@pytest.fixture(scope="session")
def rag_stub(stubs: Stubs) -> rag_service_pb2_grpc.RagServiceStub:
    return stubs.rag


@pytest.fixture(scope="session")
def index_stub(stubs: Stubs) -> index_service_pb2_grpc.IndexServiceStub:
    return stubs.index
