"""Start-up wiring of issue 6: the interceptor chain and transport options come from the settings (which were
checked when they were built: see tests/config/test_settings.py), and each dependency has its health probe."""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import pytest

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest, RetrievalUnavailable
from ragsvc.server.components import open_components
from ragsvc.server.hardening import Hardening
from ragsvc.server.limits import server_options
from tests.conftest import shared_embedder
from tests.support.cli import run_cli


def test_the_defaults_build_the_whole_chain_and_metrics_join_it_only_when_served() -> None:
    hardening = Hardening.build(Settings.of())
    names = [type(unit).__name__ for unit in hardening.interceptors]
    assert names == [
        "RequestIdInterceptor",
        "RequestLogInterceptor",
        "RateLimitInterceptor",
        "ConcurrencyLimitInterceptor",
    ]
    assert hardening.credentials is None and hardening.settings.hardening.keys is None
    settings = Settings.of(
        auth_enabled=True,
        api_keys='{"keys": [{"token": "t", "tenant": "a"}]}',
        cache_max_entries=0,
        rate_limit_per_minute=0,
        request_log=False,
        metrics_port=9464,
    )
    names = [type(unit).__name__ for unit in Hardening.build(settings).interceptors]
    assert names == ["RequestIdInterceptor", "MetricsInterceptor", "AuthInterceptor", "ConcurrencyLimitInterceptor"]


def test_transport_options_come_from_the_settings() -> None:
    options = dict(
        server_options(
            Settings.of(
                max_receive_message_bytes=1000,
                max_send_message_bytes=2000,
                keepalive_time_s=30,
                keepalive_timeout_s=5,
                keepalive_min_ping_interval_s=15,
            ).hardening
        )
    )
    assert options["grpc.max_receive_message_length"] == 1000 and options["grpc.max_send_message_length"] == 2000
    assert options["grpc.keepalive_time_ms"] == 30_000 and options["grpc.keepalive_timeout_ms"] == 5_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 15_000
    assert options["grpc.http2.max_ping_strikes"] == 2


async def test_each_dependency_gets_its_own_health_probe(tmp_path: Path) -> None:
    settings = Settings.of(data_dir=tmp_path, demo_corpus=False)
    async with open_components(settings, embedder=shared_embedder()) as components:
        probes = components.probes()
        assert set(probes) == {"retrieval", "embedder", "llm", "db"}
        for probe in probes.values():
            await probe()  # all up: none raises
        await components.engine.close()
        with pytest.raises(RetrievalUnavailable):
            await probes["retrieval"]()  # each probe asks its own dependency
        await probes["db"]()


async def test_an_address_in_use_is_said_plainly_on_one_line(tmp_path: Path) -> None:
    """`ragsvc serve` on an address another server listens on: one line naming the address, no gRPC log line before
    it and no "invalid configuration"; on a free address the same settings serve (tests/server/test_workers.py and
    every `serve_process` test)."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        env = {"RAG_GRPC_ADDRESS": address, "RAG_DATA_DIR": str(tmp_path), "RAG_DEMO_CORPUS": "false",
               "RAG_REQUEST_LOG": "false"}  # fmt: skip
        code, out, err = await run_cli("serve", env=env)
    errors = [line for line in err.splitlines() if " INFO " not in line]
    assert (code, out) == (2, "")
    assert errors == [f"error: RAG_GRPC_ADDRESS: address {address} is in use (another server listens there: stop it, "
                      "or choose another address)"], err  # fmt: skip


async def test_an_address_of_another_host_is_said_plainly() -> None:  # grpc.aio.server() needs a running loop
    with pytest.raises(InvalidRequest) as caught:
        Hardening.build(Settings.of()).bind(grpc.aio.server(), "192.0.2.1:50051")
    assert [(v.field, v.description) for v in caught.value.violations] == [
        ("RAG_GRPC_ADDRESS", "address 192.0.2.1:50051 is not an address of this host")
    ]
