"""Start-up wiring of issue 6: configuration checks, transport options, and the health probes per component."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest
from ragsvc.server.hardening import Hardening, dependency_probes
from ragsvc.server.limits import server_options


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"max_history_messages": 51}, "RAG_MAX_HISTORY_MESSAGES"),
        ({"max_history_messages": 0}, "RAG_MAX_HISTORY_MESSAGES"),
        ({"max_concurrent_requests": 0}, "RAG_MAX_CONCURRENT_REQUESTS"),
        ({"max_receive_message_bytes": 0}, "RAG_MAX_RECEIVE_MESSAGE_BYTES"),
        ({"rate_limit_per_minute": -1}, "RAG_API_RATE_LIMIT"),
        ({"metrics_port": -5}, "RAG_METRICS_PORT"),
        ({"auth_enabled": True}, "RAG_AUTH_ENABLED"),
        ({"auth_enabled": True, "api_keys": "[]"}, "RAG_API_KEYS"),
    ],
)
def test_bad_settings_stop_the_start(overrides: dict, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        Hardening.build(Settings(**overrides))
    assert field in {v.field for v in caught.value.violations}


def test_the_defaults_build_the_whole_chain() -> None:
    hardening = Hardening.build(Settings())
    names = [type(unit).__name__ for unit in hardening.interceptors]
    assert names == ["RequestIdInterceptor", "RequestLogInterceptor", "MetricsInterceptor",
                     "RateLimitInterceptor", "ConcurrencyLimitInterceptor"]  # fmt: skip
    assert hardening.cache is not None and hardening.credentials is None and hardening.keys is None
    settings = Settings(auth_enabled=True, api_keys='{"keys": [{"token": "t", "tenant": "a"}]}', cache_max_entries=0,
                        rate_limit_per_minute=0, request_log=False)  # fmt: skip
    names = [type(unit).__name__ for unit in Hardening.build(settings).interceptors]
    assert names == ["RequestIdInterceptor", "MetricsInterceptor", "AuthInterceptor", "ConcurrencyLimitInterceptor"]


def test_transport_options_come_from_the_settings() -> None:
    options = dict(
        server_options(
            Settings(max_receive_message_bytes=1000, max_send_message_bytes=2000, keepalive_time_s=30,
                     keepalive_timeout_s=5, keepalive_min_ping_interval_s=15)
        )
    )  # fmt: skip
    assert options["grpc.max_receive_message_length"] == 1000 and options["grpc.max_send_message_length"] == 2000
    assert options["grpc.keepalive_time_ms"] == 30_000 and options["grpc.keepalive_timeout_ms"] == 5_000
    assert options["grpc.http2.min_ping_interval_without_data_ms"] == 15_000
    assert options["grpc.http2.max_ping_strikes"] == 2


def test_a_database_gets_its_own_health_probe() -> None:
    async def probe() -> None: ...

    retriever, generator = SimpleNamespace(check_health=probe), SimpleNamespace(check_health=probe)
    without_db = SimpleNamespace(retriever=retriever, generator=generator, database=None)
    assert set(dependency_probes(without_db)) == {"retrieval", "llm"}
    with_db = SimpleNamespace(retriever=retriever, generator=generator, database=SimpleNamespace(check_health=probe))
    assert set(dependency_probes(with_db)) == {"retrieval", "llm", "db"}
