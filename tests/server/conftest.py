"""One real ragsvc server for the module-independent tests of this package (demo corpus indexed), with a channel
and stubs to it; servers of their own come from tests/support/servers.py. `demo_index` is the embedded index of
the demo corpus, built once, for `ragsvc serve` processes to start from a copy of (the replicas and crash tests)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest

from ragsvc.server.app import RagServer
from ragsvc.server.components import index_demo_corpus, open_components
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from tests.support.servers import Stubs, connected, running_server, server_settings


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


@pytest.fixture(scope="session")
async def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """`copy(data_dir)`: a RAG_DATA_DIR holding the embedded index of the demo corpus, as `ragsvc serve` builds it
    at its first start (~4 s on two cores), built once and copied (~50 ms), so that each process starts at once
    and every replica holds the same index."""
    built = tmp_path_factory.mktemp("demo-index")
    async with open_components(server_settings(built)) as components:
        await index_demo_corpus(components)
    shards = [path for path in built.iterdir() if path.is_dir()]

    def copy(data_dir: Path) -> Path:
        for shard in shards:
            shutil.copytree(shard, data_dir / shard.name)
        return data_dir

    return copy
