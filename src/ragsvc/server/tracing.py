"""OpenTelemetry tracing, on when OTEL_EXPORTER_OTLP_ENDPOINT names an OTLP/gRPC collector.

One SERVER span per intercepted call (health and reflection are not traced), a child of the caller's trace when
the call carries W3C ``traceparent`` metadata. Named ``ragsvc.v1.RagService/Ask`` (the gRPC method), with the
semantic-convention attributes ``rpc.system``, ``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``, and
ragsvc's own: ``ragsvc.request_id``, ``ragsvc.tenant_id``, ``ragsvc.error_reason``, and for answers
``ragsvc.model``, ``ragsvc.grounded``, ``ragsvc.cache_hit``, ``ragsvc.citations`` and the stage timings
``ragsvc.timings.<stage>_ms``. A call that does not end OK has span status ERROR.

The SDK and exporter are imported only when tracing is configured.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ragsvc.server.interceptors import CallInput, Interceptor


def tracer_provider(endpoint: str) -> Any:
    """An SDK TracerProvider batching spans to the OTLP/gRPC collector at `endpoint` (service name ragsvc,
    unless OTEL_SERVICE_NAME says otherwise)."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "ragsvc"}))
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=not endpoint.startswith("https://"))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


class TracingInterceptor(Interceptor):
    def __init__(self, provider: Any) -> None:
        from opentelemetry import propagate, trace

        self._provider = provider
        self._tracer = provider.get_tracer("ragsvc.server")
        self._extract = propagate.extract
        self._trace = trace

    def shutdown(self) -> None:
        """Flush the spans still batched, and stop exporting."""
        self._provider.shutdown()

    @contextlib.asynccontextmanager
    async def intercept(self, call: CallInput) -> AsyncIterator[None]:
        name = call.method.lstrip("/")
        service, _, method = name.partition("/")
        parent = self._extract(dict(call.metadata))
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=self._trace.SpanKind.SERVER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            finally:
                self._finish(span, call)

    def _finish(self, span: Any, call: CallInput) -> None:
        state = call.state
        code = state.code or grpc.StatusCode.UNKNOWN
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        span.set_attribute("ragsvc.request_id", state.request_id)
        tenant = state.report.question.tenant_id if state.report.question else getattr(call.request, "tenant_id", "")
        if tenant:
            span.set_attribute("ragsvc.tenant_id", tenant)
        if state.error_reason:
            span.set_attribute("ragsvc.error_reason", state.error_reason)
        answer = state.report.answer
        if answer is not None:
            span.set_attribute("ragsvc.model", answer.model)
            span.set_attribute("ragsvc.grounded", answer.grounded)
            span.set_attribute("ragsvc.cache_hit", bool(state.report.cache_hit))
            span.set_attribute("ragsvc.citations", len(answer.citations))
            timings = answer.timings
            for stage in ("retrieval", "budget", "generation", "first_token", "total"):
                span.set_attribute(f"ragsvc.timings.{stage}_ms", getattr(timings, f"{stage}_ms"))
        if code is not grpc.StatusCode.OK:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, state.error_reason or code.name))
