"""`ragsvc serve` as a real process: it serves, and on SIGTERM reports NOT_SERVING and drains in-flight streams.

No sleep stands in for "the server has begun to drain": the tests wait for what they can observe, the health
Watch streaming NOT_SERVING (the first step of stopping, before new calls are refused), then the process exit."""

from __future__ import annotations

import signal
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from ragsvc.v1 import rag_service_pb2 as pb
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import connected, next_health, serve_process

DELTAS = (*(f"word{i} " for i in range(20)), "[#1]")
TOKEN_DELAY_S = 0.1  # the stream takes ~2 s: long enough to be in flight when SIGTERM arrives
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
DRAIN_NOTICE_S = 10.0  # how long NOT_SERVING may take to reach a watcher after SIGTERM


async def read_rest(call: grpc.aio.UnaryStreamCall) -> list[pb.AskStreamResponse]:
    """The remaining messages of a stream already read with read() (iteration cannot be mixed with it)."""
    messages = []
    while (message := await call.read()) is not grpc.aio.EOF:
        messages.append(message)
    return messages


async def test_sigterm_sets_not_serving_and_drains_the_in_flight_stream(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        async with serve_process(
            tmp_path, {"RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url, "RAG_GRACE_PERIOD_SECONDS": "10"}
        ) as served:
            async with connected(served.address) as stubs:
                watch = stubs.health.Watch(health_pb2.HealthCheckRequest(service=""))
                assert await next_health(watch, within_s=10) == SERVING

                stream = stubs.rag.AskStream(pb.AskStreamRequest(query="How is the confidence score computed?"), timeout=30)
                first = await stream.read()
                assert first.WhichOneof("event") == "text_delta"

                served.process.send_signal(signal.SIGTERM)
                assert await next_health(watch, within_s=DRAIN_NOTICE_S) == NOT_SERVING

                rest = await read_rest(stream)
                assert rest[-1].WhichOneof("event") == "answer", "the in-flight stream finished during the drain"
                assert rest[-1].answer.text == "".join(DELTAS)
                assert await stream.code() == grpc.StatusCode.OK

            assert await served.exited(15) == 0


async def test_new_calls_are_refused_after_sigterm(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        async with serve_process(tmp_path, {"RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url}) as served:
            async with connected(served.address) as stubs:
                watch = stubs.health.Watch(health_pb2.HealthCheckRequest(service=""))
                assert await next_health(watch, within_s=10) == SERVING
                stream = stubs.rag.AskStream(pb.AskStreamRequest(query="How is the confidence score computed?"), timeout=30)
                await stream.read()

                served.process.send_signal(signal.SIGTERM)
                # NOT_SERVING is set as the server stops, in the same step that stops it accepting calls.
                assert await next_health(watch, within_s=DRAIN_NOTICE_S) == NOT_SERVING
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stubs.rag.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=5)
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
                assert (await read_rest(stream))[-1].WhichOneof("event") == "answer"
            assert await served.exited(15) == 0
