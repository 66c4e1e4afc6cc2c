"""The Prometheus endpoint, scraped over HTTP after real calls."""

from __future__ import annotations

import socket

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.servers import connected, running_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert response.status_code == 200
    return samples(response.text)


async def test_the_metrics_endpoint_counts_what_happened(tmp_path) -> None:
    port = free_port()
    # Every grounded answer CITEd (so cacheable), whatever the reader's calibration.
    async with running_server(tmp_path, metrics_port=port, cache_max_entries=10) as server:
        async with connected(server) as stubs:
            stub = stubs.rag
            for _ in range(2):  # a miss, then a hit
                await stub.Ask(pb.AskRequest(query="What happens on SIGTERM?"), timeout=30)
            [_ async for _ in stub.AskStream(pb.AskStreamRequest(query="How are documents chunked?"), timeout=30)]
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Ask(pb.AskRequest(query=""), timeout=30)
        metrics = await scrape(port)
    default = (("tenant", "default"),)
    ok = (("status", "OK"), ("template", "rag-v1"), ("tenant", "default"))
    assert metrics[("rag_queries_total", ok)] == 3
    assert metrics[("rag_queries_total", (("status", "INVALID_ARGUMENT"), ("template", "-"), ("tenant", "-")))]
    assert metrics[("rag_cache_hits_total", default)] == 1 and metrics[("rag_cache_misses_total", default)] == 2
    assert metrics[("rag_query_duration_seconds_count", (("template", "rag-v1"), ("tenant", "default")))] == 3
    assert metrics[("rag_stage_duration_seconds_count", (("stage", "retrieval"),))] == 2, "not for the cache hit"
    assert metrics[("rag_search_latency_seconds_count", default)] == 2
    assert metrics[("rag_model_calls_total", (("model", "extractive"), ("provider", "extractive")))] == 2
    assert metrics[("rag_model_tokens_used_total", (("kind", "completion"), ("provider", "extractive")))] > 0
    assert metrics[("rag_citations_per_response_count", (("template", "rag-v1"),))] == 3
    assert metrics[("rag_confidence_score_count", (("template", "rag-v1"),))] == 3
    assert metrics[("rag_grpc_requests_total", (("code", "OK"), ("method", "AskStream")))] == 1
    assert metrics[("rag_requests_in_flight", ())] == 0
    assert metrics[("rag_event_loop_tasks", ())] >= 1
    assert metrics[("process_resident_memory_bytes", ())] > 0

    with pytest.raises(httpx.ConnectError):  # stopped with the server
        await scrape(port)


async def test_no_endpoint_by_default(server) -> None:
    assert server.hardening.endpoint is None
