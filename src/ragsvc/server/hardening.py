"""What surrounds the servicers, built from the settings in one place: the interceptor chain, TLS credentials,
transport options and the metrics endpoint. The settings were checked when they were read."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys
from dataclasses import dataclass, field

import grpc

from ragsvc.config import Settings
from ragsvc.errors import FieldViolation, InvalidRequest
from ragsvc.server.auth import AuthInterceptor
from ragsvc.server.interceptors import Interceptor, ServerInterceptor
from ragsvc.server.limits import (
    ConcurrencyLimitInterceptor,
    RateLimit,
    RateLimitInterceptor,
    TokenBuckets,
    server_options,
)
from ragsvc.server.metrics import Metrics, MetricsEndpoint, MetricsInterceptor
from ragsvc.server.request_log import REQUEST_LOGGER, RequestIdInterceptor, RequestLogInterceptor
from ragsvc.server.tls import server_credentials
from ragsvc.server.tracing import TracingInterceptor, tracer_provider


@dataclass
class Hardening:
    settings: Settings
    interceptors: list[Interceptor]
    metrics: Metrics
    concurrency: ConcurrencyLimitInterceptor
    credentials: grpc.ServerCredentials | None
    tracing: TracingInterceptor | None = None
    endpoint: MetricsEndpoint | None = field(default=None, init=False)

    @classmethod
    def build(cls, settings: Settings, *, rate_limit: RateLimit | None = None) -> Hardening:
        """`rate_limit` counts the calls of RAG_API_RATE_LIMIT (default: this process's own `TokenBuckets`)."""
        hardening = settings.hardening
        metrics = Metrics(provider=settings.generation.generator.value)
        concurrency = ConcurrencyLimitInterceptor(hardening.max_concurrent_requests)
        interceptors: list[Interceptor] = [RequestIdInterceptor()]
        tracing = TracingInterceptor(tracer_provider(hardening.otel_endpoint)) if hardening.otel_endpoint else None
        if tracing is not None:
            interceptors.append(tracing)
        if hardening.request_log:
            interceptors.append(RequestLogInterceptor())
        if hardening.metrics_port:  # recorded only where /metrics serves them
            interceptors.append(MetricsInterceptor(metrics))
        if hardening.keys is not None:
            interceptors.append(AuthInterceptor(hardening.keys))
        if hardening.rate_limit_per_minute > 0:
            interceptors.append(RateLimitInterceptor(rate_limit or TokenBuckets(hardening.rate_limit_per_minute)))
        interceptors.append(concurrency)
        return cls(settings, interceptors, metrics, concurrency, server_credentials(hardening), tracing)

    def server(self, *, reuse_port: bool = False) -> grpc.aio.Server:
        """A grpc.aio server with the interceptor chain and the transport options. It binds its address alone
        (a port in use is refused), or with `reuse_port` beside the other worker processes of the same address."""
        options = [*server_options(self.settings.hardening), ("grpc.so_reuseport", int(reuse_port))]
        return grpc.aio.server(interceptors=[ServerInterceptor(self.interceptors)], options=options)

    def bind(self, server: grpc.aio.Server, address: str, *, shared: bool = False) -> int:
        """Listen on `address` (TLS when configured); returns the port. InvalidRequest naming RAG_GRPC_ADDRESS
        when the address cannot be listened on: one that is in use (unless `shared`: a worker's, beside the others)
        or not of this host is said so plainly, before gRPC tries it and logs a line of its own."""
        if not shared:
            _check_listenable(address)
        try:
            if self.credentials is not None:
                return server.add_secure_port(address, self.credentials)
            return server.add_insecure_port(address)
        except RuntimeError as exc:  # grpc: "Failed to bind to address ..."
            raise _unusable("RAG_GRPC_ADDRESS", address, exc) from exc

    def start_metrics(self, host: str) -> None:
        """Serve /metrics when RAG_METRICS_PORT is set; InvalidRequest naming it when the port is taken."""
        self.metrics.watch(in_flight=lambda: self.concurrency.in_flight, loop=asyncio.get_running_loop())
        port = self.settings.hardening.metrics_port
        if port:
            try:
                self.endpoint = self.metrics.serve(host.strip("[]"), port)
            except OSError as exc:
                raise _unusable("RAG_METRICS_PORT", f"{host}:{port}", exc) from exc

    async def aclose(self) -> None:
        """Stop the metrics endpoint and flush the last spans (in threads: both block)."""
        if self.endpoint is not None:
            await asyncio.to_thread(self.endpoint.close)
            self.endpoint = None
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.shutdown)
            self.tracing = None


def _check_listenable(address: str) -> None:
    """InvalidRequest naming RAG_GRPC_ADDRESS when every address `address` resolves to is in use, or none is of
    this host; other failures are left to gRPC's bind. Binds as gRPC does (SO_REUSEADDR), and lets go at once."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        resolved = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return
    failures = []
    for family, kind, proto, _, where in resolved:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(where)
            except OSError as exc:
                failures.append(exc.errno)
                continue
        return  # one of them can be listened on: gRPC serves there
    if failures and all(code == errno.EADDRINUSE for code in failures):
        why = f"address {address} is in use (another server listens there: stop it, or choose another address)"
    elif failures and all(code == errno.EADDRNOTAVAIL for code in failures):
        why = f"address {address} is not an address of this host"
    else:
        return
    raise InvalidRequest([FieldViolation("RAG_GRPC_ADDRESS", why)])


def _unusable(variable: str, address: str, exc: Exception) -> InvalidRequest:
    why = f"cannot listen on {address} (in use, or not an address of this host): {exc}"
    return InvalidRequest([FieldViolation(variable, why)], f"invalid configuration: {variable}: {why}")


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
