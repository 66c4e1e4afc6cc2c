"""OpenTelemetry: spans exported over OTLP/gRPC to a collector on a real socket, continuing the caller's trace."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)

from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import connected, running_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list = []

    async def Export(self, request, context):
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend(scope_spans.spans)
        return trace_service_pb2.ExportTraceServiceResponse()


def attributes(span) -> dict:
    values = {}
    for attribute in span.attributes:
        value = attribute.value
        values[attribute.key] = getattr(value, value.WhichOneof("value"))
    return values


async def test_each_call_is_a_span_of_the_callers_trace(tmp_path) -> None:
    collector = Collector()
    otlp = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, otlp)
    port = otlp.add_insecure_port("127.0.0.1:0")
    await otlp.start()
    try:
        async with running_server(tmp_path, otel_endpoint=f"http://127.0.0.1:{port}") as server:
            async with connected(server) as stubs:
                stub = stubs.rag
                metadata = (("traceparent", TRACEPARENT), ("x-request-id", "traced-1"))
                await stub.Ask(pb.AskRequest(query="What happens on SIGTERM?"), metadata=metadata, timeout=30)
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Ask(pb.AskRequest(query=""), timeout=30)
        # Stopping the server flushed the batch to the collector.
    finally:
        await otlp.stop(None)
    ok, bad = sorted(collector.spans, key=lambda span: span.start_time_unix_nano)
    assert ok.name == "ragsvc.v1.RagService/Ask" and ok.trace_id.hex() == TRACE_ID
    assert ok.parent_span_id.hex() == "00f067aa0ba902b7"
    ok_attributes = attributes(ok)
    assert ok_attributes["rpc.system"] == "grpc" and ok_attributes["rpc.grpc.status_code"] == 0
    assert ok_attributes["ragsvc.request_id"] == "traced-1" and ok_attributes["ragsvc.tenant_id"] == "default"
    assert ok_attributes["ragsvc.grounded"] is True and ok_attributes["ragsvc.timings.retrieval_ms"] > 0
    assert bad.trace_id.hex() != TRACE_ID, "a call without traceparent starts its own trace"
    assert attributes(bad)["ragsvc.error_reason"] == "VALIDATION_ERROR"
    assert bad.status.code == bad.status.STATUS_CODE_ERROR
