"""Real ragsvc servers for the tests, built one way: in-process (`running_server`), as a `ragsvc serve` process
(`serve_process`), and a channel with every stub (`connected`).

`running_server` listens on 127.0.0.1:<free port> with the settings a test names by their field names
(`Settings.of`). The answer cache and the rate limit, which carry state from one call to the next, are off unless
a test turns them on; so are the extra LLM calls around an answer (condensing a follow-up, classification,
self-score, follow-ups, hallucination re-runs), which tests of scripted LLM servers would otherwise have to count.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragsvc.config import Settings
from ragsvc.retrieval.base import Embedder, VectorEngine
from ragsvc.server.app import RagServer
from ragsvc.v1 import admin_service_pb2_grpc, index_service_pb2_grpc, rag_service_pb2_grpc

# What every test server runs with unless the test says otherwise (see the module docstring).
TEST_DEFAULTS: Mapping[str, Any] = {
    "health_probe_interval_s": 0.5,
    "grace_period_s": 2.0,
    "cache_max_entries": 0,
    "rate_limit_per_minute": 0,
    "llm_self_score": False,
    "llm_classify": False,
    "llm_condense": False,
    "follow_up_count": 0,
    "hallucination_retries": 0,
}
SERVE_START_TIMEOUT_S = 60.0  # `ragsvc serve` loads the embedder and indexes the demo corpus first
SERVE_STOP_TIMEOUT_S = 20.0


def server_settings(data_dir: Path, **overrides: Any) -> Settings:
    """The test defaults with `overrides` (flat field names, any group), on 127.0.0.1:<free port>."""
    return Settings.of(**{**TEST_DEFAULTS, **overrides, "grpc_address": "127.0.0.1:0", "data_dir": data_dir})


@contextlib.asynccontextmanager
async def running_server(
    data_dir: Path, *, embedder: Embedder | None = None, engine: VectorEngine | None = None, **overrides: Any
) -> AsyncIterator[RagServer]:
    """A started server (demo corpus indexed unless `demo_corpus=False`), stopped on leaving the block. `engine`
    replaces the one the settings name (it stays the caller's to close)."""
    server = await RagServer.start(server_settings(data_dir, **overrides), embedder=embedder, engine=engine)
    try:
        yield server
    finally:
        await server.stop()


@dataclass(frozen=True)
class Stubs:
    """A channel to one server and a stub of each of its services."""

    channel: grpc.aio.Channel
    rag: rag_service_pb2_grpc.RagServiceStub
    index: index_service_pb2_grpc.IndexServiceStub
    admin: admin_service_pb2_grpc.AdminServiceStub
    health: health_pb2_grpc.HealthStub

    @classmethod
    def over(cls, channel: grpc.aio.Channel) -> Stubs:
        return cls(
            channel,
            rag_service_pb2_grpc.RagServiceStub(channel),
            index_service_pb2_grpc.IndexServiceStub(channel),
            admin_service_pb2_grpc.AdminServiceStub(channel),
            health_pb2_grpc.HealthStub(channel),
        )


@contextlib.asynccontextmanager
async def connected(
    target: RagServer | str, *, credentials: grpc.ChannelCredentials | None = None, **channel_options: Any
) -> AsyncIterator[Stubs]:
    """A channel to `target` (a server, or a host:port), TLS when `credentials` are given, with every stub."""
    address = target if isinstance(target, str) else target.address
    if credentials is not None:
        channel = grpc.aio.secure_channel(address, credentials, **channel_options)
    else:
        channel = grpc.aio.insecure_channel(address, **channel_options)
    async with channel:
        yield Stubs.over(channel)


async def wait_for_health(health: health_pb2_grpc.HealthStub, service: str, status: int, *, within_s: float) -> float:
    """Seconds until `service` reports `status` (polled); AssertionError after `within_s`."""
    started = time.monotonic()
    while True:
        response = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        elapsed = time.monotonic() - started
        if response.status == status:
            return elapsed
        if elapsed >= within_s:
            name = health_pb2.HealthCheckResponse.ServingStatus.Name
            raise AssertionError(f"{service!r} is {name(response.status)}, not {name(status)}, after {within_s} s")
        await asyncio.sleep(0.05)


async def next_health(watch: grpc.aio.UnaryStreamCall[Any, Any], *, within_s: float) -> int:
    """The next status a health Watch streams, within `within_s`."""
    return (await asyncio.wait_for(watch.read(), within_s)).status


@dataclass
class ServeProcess:
    """A `ragsvc serve` process and the address it printed."""

    process: asyncio.subprocess.Process
    address: str

    async def exited(self, within_s: float = SERVE_STOP_TIMEOUT_S) -> int:
        """Its exit code, once it has exited (within `within_s`)."""
        return await asyncio.wait_for(self.process.wait(), within_s)


@contextlib.asynccontextmanager
async def serve_process(data_dir: Path, env: Mapping[str, str]) -> AsyncIterator[ServeProcess]:
    """`ragsvc serve` on 127.0.0.1:<free port> with `env` over this environment, once it says where it serves; on
    leaving the block it is terminated (when still running) and waited for, and killed if it does not exit within
    SERVE_STOP_TIMEOUT_S."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ragsvc.cli",
        "serve",
        env={**os.environ, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": str(data_dir), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), SERVE_START_TIMEOUT_S)).decode()
        assert line.startswith("ragsvc serving on "), line
        yield ServeProcess(process, line.removeprefix("ragsvc serving on ").strip())
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), SERVE_STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
