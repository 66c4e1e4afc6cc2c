"""A failing LLM server: health flips to NOT_SERVING within a probe interval and back; calls get UNAVAILABLE."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

from tests.server.conftest import running_server
from tests.support.openai_server import ScriptedOpenAIServer

PROBE_INTERVAL_S = 0.3
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


async def wait_for_status(health: health_pb2_grpc.HealthStub, service: str, status: int, within_s: float) -> float:
    """Seconds until `service` reports `status`; fails after `within_s`."""
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        response = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        if response.status == status:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    pytest.fail(f"{service!r} did not become {status} within {within_s} s")


async def test_llm_outage_is_reported_by_health_and_by_ask(tmp_path) -> None:
    async with ScriptedOpenAIServer(deltas=("Answer", " [#1]"), models=("llama3.2",)) as llm:
        async with running_server(
            tmp_path, generator="openai", openai_base_url=llm.base_url, health_probe_interval_s=PROBE_INTERVAL_S
        ) as server, grpc.aio.insecure_channel(server.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for service in ("", "ragsvc.v1.RagService", "llm", "retrieval"):
                await wait_for_status(health, service, SERVING, within_s=1)

            watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch.read()).status == SERVING

            llm.status = 503  # the LLM server now fails every request
            await wait_for_status(health, "llm", NOT_SERVING, within_s=2 * PROBE_INTERVAL_S + 1)
            await wait_for_status(health, "", NOT_SERVING, within_s=1)
            assert (await watch.read()).status == NOT_SERVING, "Watch streams the change"
            retrieval = await health.Check(health_pb2.HealthCheckRequest(service="retrieval"))
            assert retrieval.status == SERVING, "only the failing dependency is blamed"

            stub = rag_service_pb2_grpc.RagServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            details = rpc_status.from_call(caught.value).details
            info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
            assert any(d.Unpack(info) for d in details if d.Is(info.DESCRIPTOR))
            assert info.reason == "LLM_UNAVAILABLE"
            assert any(d.Unpack(retry) for d in details if d.Is(retry.DESCRIPTOR))

            llm.status = None  # recovered
            await wait_for_status(health, "", SERVING, within_s=2 * PROBE_INTERVAL_S + 1)
            assert (await watch.read()).status == SERVING
            watch.cancel()
            answer = (await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
            assert answer.text == "Answer [#1]" and answer.grounded
