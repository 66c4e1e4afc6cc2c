"""A failing LLM server: health flips to NOT_SERVING within a probe interval and back; calls get UNAVAILABLE.
IndexService and AdminService never need the LLM: they stay SERVING."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status

from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import connected, running_server, wait_for_health

PROBE_INTERVAL_S = 0.3
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


async def test_llm_outage_is_reported_by_health_and_by_ask(tmp_path) -> None:
    async with ScriptedOpenAIServer(deltas=("Answer", " [#1]"), models=("llama3.2",)) as llm:
        async with (
            running_server(
                tmp_path, generator="openai", openai_base_url=llm.base_url, health_probe_interval_s=PROBE_INTERVAL_S
            ) as server,
            connected(server) as stubs,
        ):
            health = stubs.health
            for service in ("", "ragsvc.v1.RagService", "llm", "retrieval"):
                await wait_for_health(health, service, SERVING, within_s=1)

            watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch.read()).status == SERVING

            llm.status = 503  # the LLM server now fails every request
            await wait_for_health(health, "llm", NOT_SERVING, within_s=2 * PROBE_INTERVAL_S + 1)
            await wait_for_health(health, "", NOT_SERVING, within_s=1)
            assert (await watch.read()).status == NOT_SERVING, "Watch streams the change"
            for name in ("retrieval", "embedder", "db", "ragsvc.v1.IndexService", "ragsvc.v1.AdminService"):
                response = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert response.status == SERVING, f"only the failing dependency, and who needs it, is blamed: {name}"

            stub = stubs.rag
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            details = rpc_status.from_call(caught.value).details
            info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
            assert any(d.Unpack(info) for d in details if d.Is(info.DESCRIPTOR))
            assert info.reason == "LLM_UNAVAILABLE"
            assert any(d.Unpack(retry) for d in details if d.Is(retry.DESCRIPTOR))

            llm.status = None  # recovered
            await wait_for_health(health, "", SERVING, within_s=2 * PROBE_INTERVAL_S + 1)
            assert (await watch.read()).status == SERVING
            watch.cancel()
            answer = (await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
            assert answer.text == "Answer [#1]" and answer.grounded
