"""Everything issue 6 adds around the servicers, built from the settings in one place: the interceptor chain,
the answer cache and the servicer's front, TLS credentials, transport options and the metrics endpoint.

`Hardening.build` checks the configuration (keys file, TLS files, limits) before anything binds, so a bad value
stops `ragsvc serve` at start-up with the setting named.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from ragsvc.config import Settings
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.sanitize import MAX_HISTORY_MESSAGES
from ragsvc.server.auth import AuthInterceptor, KeyStore
from ragsvc.server.cache import AnswerCache
from ragsvc.server.front import AskFront
from ragsvc.server.interceptors import Interceptor, ServerInterceptor
from ragsvc.server.limits import (
    ConcurrencyLimitInterceptor,
    RateLimitInterceptor,
    server_options,
)
from ragsvc.server.metrics import Metrics, MetricsEndpoint, MetricsInterceptor
from ragsvc.server.request_log import (
    REQUEST_LOGGER,
    RequestIdInterceptor,
    RequestLogInterceptor,
)
from ragsvc.server.tls import server_credentials
from ragsvc.server.tracing import TracingInterceptor, tracer_provider

Probe = Callable[[], Awaitable[None]]


@dataclass
class Hardening:
    settings: Settings
    interceptors: list[Interceptor]
    front: AskFront
    cache: AnswerCache | None
    metrics: Metrics
    concurrency: ConcurrencyLimitInterceptor
    credentials: grpc.ServerCredentials | None
    keys: KeyStore | None = None
    tracing: TracingInterceptor | None = None
    endpoint: MetricsEndpoint | None = field(default=None, init=False)

    @classmethod
    def build(cls, settings: Settings) -> Hardening:
        _check(settings)
        keys = None
        if settings.auth_enabled:
            keys = KeyStore.load(keys_file=settings.api_keys_file, keys_json=settings.api_keys)
            if not len(keys):
                raise InvalidRequest(
                    [FieldViolation("RAG_AUTH_ENABLED", "needs keys in RAG_API_KEYS_FILE or RAG_API_KEYS")],
                    "invalid configuration: RAG_AUTH_ENABLED without keys",
                )
        credentials = server_credentials(settings)
        cache = replays = None
        if settings.cache_max_entries > 0:
            cache = AnswerCache(max_entries=settings.cache_max_entries, ttl_s=settings.cache_ttl_s)
            replays = AnswerCache(
                max_entries=settings.cache_max_entries, ttl_s=settings.cache_ttl_s, admits=lambda answer: True
            )
        metrics = Metrics(provider=settings.generator)
        concurrency = ConcurrencyLimitInterceptor(settings.max_concurrent_requests)
        interceptors: list[Interceptor] = [RequestIdInterceptor()]
        tracing = TracingInterceptor(tracer_provider(settings.otel_endpoint)) if settings.otel_endpoint else None
        if tracing is not None:
            interceptors.append(tracing)
        if settings.request_log:
            interceptors.append(RequestLogInterceptor())
        interceptors.append(MetricsInterceptor(metrics))
        if keys is not None:
            interceptors.append(AuthInterceptor(keys))
        if settings.rate_limit_per_minute > 0:
            interceptors.append(RateLimitInterceptor(settings.rate_limit_per_minute))
        interceptors.append(concurrency)
        front = AskFront(
            default_tenant=settings.default_tenant,
            max_history_messages=settings.max_history_messages,
            detect_injection=settings.injection_detection,
            reject_injection=settings.reject_injection,
            cache=cache,
            replays=replays,
        )
        return cls(settings, interceptors, front, cache, metrics, concurrency, credentials, keys, tracing)

    def server(self) -> grpc.aio.Server:
        """A grpc.aio server with the interceptor chain and the transport options."""
        return grpc.aio.server(
            interceptors=[ServerInterceptor(self.interceptors)], options=server_options(self.settings)
        )

    def bind(self, server: grpc.aio.Server, address: str) -> int:
        """Listen on `address` (TLS when configured); returns the port."""
        if self.credentials is not None:
            return server.add_secure_port(address, self.credentials)
        return server.add_insecure_port(address)

    def start_metrics(self, host: str) -> None:
        self.metrics.watch(in_flight=lambda: self.concurrency.in_flight, loop=asyncio.get_running_loop())
        if self.settings.metrics_port:
            self.endpoint = self.metrics.serve(host.strip("[]"), self.settings.metrics_port)

    async def aclose(self) -> None:
        """Stop the metrics endpoint and flush the last spans (in threads: both block)."""
        if self.endpoint is not None:
            await asyncio.to_thread(self.endpoint.close)
            self.endpoint = None
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)
            self.tracing = None


def _check(settings: Settings) -> None:
    violations = []
    if not 1 <= settings.max_history_messages <= MAX_HISTORY_MESSAGES:
        violations.append(FieldViolation("RAG_MAX_HISTORY_MESSAGES", f"must be between 1 and {MAX_HISTORY_MESSAGES}"))
    for name, value in (
        ("RAG_MAX_CONCURRENT_REQUESTS", settings.max_concurrent_requests),
        ("RAG_MAX_RECEIVE_MESSAGE_BYTES", settings.max_receive_message_bytes),
        ("RAG_MAX_SEND_MESSAGE_BYTES", settings.max_send_message_bytes),
    ):
        if value < 1:
            violations.append(FieldViolation(name, "must be at least 1"))
    for name, value in (("RAG_API_RATE_LIMIT", settings.rate_limit_per_minute),
                        ("RAG_CACHE_MAX_ENTRIES", settings.cache_max_entries),
                        ("RAG_METRICS_PORT", settings.metrics_port)):  # fmt: skip
        if value < 0:
            violations.append(FieldViolation(name, "must not be negative"))
    if violations:
        raise InvalidRequest(violations, "invalid configuration: " + "; ".join(v.field for v in violations))


def dependency_probes(components: Any) -> Mapping[str, Probe]:
    """The health probes of the components: retrieval, llm, and db (the audit log, sessions and owners)."""
    probes: dict[str, Probe] = {
        "retrieval": components.retriever.check_health,
        "llm": components.generator.check_health,
    }
    if components.database is not None:
        probes["db"] = components.database.check_health
    return probes


def log_requests_as_json_lines() -> None:
    """Send the request log to stderr as bare JSON lines (one object per line, no prefix)."""
    logger = logging.getLogger(REQUEST_LOGGER)
    if not any(getattr(handler, "_ragsvc_requests", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._ragsvc_requests = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
