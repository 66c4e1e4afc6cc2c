"""grpc.health.v1 on the real server: every service and dependency name, and what each service name needs."""

from __future__ import annotations

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragsvc.server.app import ADMIN_SERVICE, INDEX_SERVICE, RAG_SERVICE
from ragsvc.server.health import requirements

SERVING = health_pb2.HealthCheckResponse.SERVING
SERVICES = ["", "ragsvc.v1.RagService", "ragsvc.v1.IndexService", "ragsvc.v1.AdminService"]
DEPENDENCIES = ["retrieval", "embedder", "llm", "db"]


@pytest.mark.parametrize("service", SERVICES + DEPENDENCIES)
async def test_check_is_serving(channel, service: str) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    response = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    assert response.status == SERVING


@pytest.mark.parametrize("llm_fallback", [False, True])
def test_each_service_name_needs_only_what_its_rpcs_need(llm_fallback: bool) -> None:
    needs = requirements(
        rag_service=RAG_SERVICE, index_service=INDEX_SERVICE, admin_service=ADMIN_SERVICE, llm_fallback=llm_fallback
    )
    answering = {"retrieval", "embedder", "db"} | (set() if llm_fallback else {"llm"})
    assert needs == {
        "": answering,  # "this replica can answer": with the extractive fallback, also while the LLM is down
        RAG_SERVICE: answering,
        INDEX_SERVICE: {"retrieval", "embedder", "db"},  # never the LLM
        ADMIN_SERVICE: {"db"},
    }


async def test_reflection_lists_the_services(channel) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    responses = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=5)]
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"ragsvc.v1.RagService", "ragsvc.v1.IndexService", "ragsvc.v1.AdminService", "grpc.health.v1.Health"} <= names
