"""Health that does not lie: the scripted LLM server is stopped (its port closed) and restarted on the same port;
Watch sees NOT_SERVING, then SERVING again, for the llm component and for the whole server (no extractive
fallback is configured, so this replica cannot answer meanwhile); IndexService, which never needs the LLM, stays
SERVING throughout."""

from __future__ import annotations

from grpc_health.v1 import health_pb2

from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import connected, next_health, running_server

PROBE_INTERVAL_S = 0.3
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
DELTAS = ("Answer", " [#1]")


async def test_watch_sees_the_llm_server_stop_and_come_back(tmp_path) -> None:
    llm = ScriptedOpenAIServer(deltas=DELTAS)
    await llm.__aenter__()
    port = llm.port
    try:
        async with (
            running_server(
                tmp_path, generator="openai", openai_base_url=llm.base_url, health_probe_interval_s=PROBE_INTERVAL_S
            ) as server,
            connected(server) as stubs,
        ):
            health = stubs.health
            overall = health.Watch(health_pb2.HealthCheckRequest(service=""))
            component = health.Watch(health_pb2.HealthCheckRequest(service="llm"))
            assert await next_health(overall, within_s=5) == SERVING and await next_health(component, within_s=5) == SERVING

            await llm.__aexit__(None, None, None)  # stopped: connections refused
            within = 2 * PROBE_INTERVAL_S + 5.0  # one probe interval, plus the probe's own connect failure
            assert await next_health(component, within_s=within) == NOT_SERVING
            assert await next_health(overall, within_s=within) == NOT_SERVING
            for name in ("retrieval", "embedder", "db", "ragsvc.v1.IndexService", "ragsvc.v1.AdminService"):
                response = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert response.status == SERVING, f"only the dead dependency, and who needs it, is blamed: {name}"

            llm = ScriptedOpenAIServer(deltas=DELTAS)
            llm.listen_port = port  # restarted where ragsvc expects it
            await llm.__aenter__()
            assert await next_health(component, within_s=within) == SERVING
            assert await next_health(overall, within_s=within) == SERVING
            overall.cancel()
            component.cancel()

            answer = (await stubs.rag.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=30)).answer
            assert answer.text == "".join(DELTAS) and answer.grounded, "and it answers again"
    finally:
        await llm.__aexit__(None, None, None)
