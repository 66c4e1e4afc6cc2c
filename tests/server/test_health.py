"""grpc.health.v1 on the real server."""

from __future__ import annotations

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("service", ["", "ragsvc.v1.RagService", "ragsvc.v1.IndexService", "retrieval", "llm", "db"])
async def test_check_is_serving(channel, service: str) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    response = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    assert response.status == SERVING


async def test_reflection_lists_the_services(channel) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    responses = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=5)]
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"ragsvc.v1.RagService", "ragsvc.v1.IndexService", "grpc.health.v1.Health"} <= names
