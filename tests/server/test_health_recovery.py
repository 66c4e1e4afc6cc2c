"""Health that does not lie: the scripted LLM server is stopped (its port closed) and restarted on the same port;
Watch sees NOT_SERVING, then SERVING again, for the llm component and for the whole server."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

from tests.server.conftest import running_server
from tests.support.openai_server import ScriptedOpenAIServer

PROBE_INTERVAL_S = 0.3
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
DELTAS = ("Answer", " [#1]")


async def next_status(watch: grpc.aio.UnaryStreamCall, within_s: float) -> int:
    return (await asyncio.wait_for(watch.read(), within_s)).status


async def test_watch_sees_the_llm_server_stop_and_come_back(tmp_path) -> None:
    llm = ScriptedOpenAIServer(deltas=DELTAS)
    await llm.__aenter__()
    port = llm.port
    try:
        async with running_server(
            tmp_path, generator="openai", openai_base_url=llm.base_url, health_probe_interval_s=PROBE_INTERVAL_S
        ) as server, grpc.aio.insecure_channel(server.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            overall = health.Watch(health_pb2.HealthCheckRequest(service=""))
            component = health.Watch(health_pb2.HealthCheckRequest(service="llm"))
            assert await next_status(overall, 5) == SERVING and await next_status(component, 5) == SERVING

            await llm.__aexit__(None, None, None)  # stopped: connections refused
            within = 2 * PROBE_INTERVAL_S + 5.0  # one probe interval, plus the probe's own connect failure
            assert await next_status(component, within) == NOT_SERVING
            assert await next_status(overall, within) == NOT_SERVING
            retrieval = await health.Check(health_pb2.HealthCheckRequest(service="retrieval"), timeout=5)
            assert retrieval.status == SERVING, "only the dead dependency is blamed"

            llm = ScriptedOpenAIServer(deltas=DELTAS)
            llm.listen_port = port  # restarted where ragsvc expects it
            await llm.__aenter__()
            assert await next_status(component, within) == SERVING
            assert await next_status(overall, within) == SERVING
            overall.cancel()
            component.cancel()

            stub = rag_service_pb2_grpc.RagServiceStub(channel)
            answer = (await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
            assert answer.text == "".join(DELTAS) and answer.grounded, "and it answers again"
    finally:
        await llm.__aexit__(None, None, None)
