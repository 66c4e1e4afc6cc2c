"""SIGTERM to a real `ragsvc serve` process during 20 live streams: all 20 finish, new calls are refused."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from ragsvc.v1 import rag_service_pb2 as pb
from tests.server.test_serve_process import DELTAS, DRAIN_NOTICE_S, NOT_SERVING, SERVING, TOKEN_DELAY_S, read_rest
from tests.support.openai_server import ScriptedOpenAIServer
from tests.support.servers import connected, next_health, serve_process

STREAMS = 20


async def test_sigterm_during_20_streams_lets_all_finish_and_refuses_new_calls(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        async with serve_process(
            tmp_path,
            {
                "RAG_GENERATOR": "openai",
                "OPENAI_BASE_URL": llm.base_url,
                "RAG_GRACE_PERIOD_SECONDS": "15",
                "RAG_MAX_CONCURRENT_REQUESTS": str(STREAMS + 5),
                "RAG_CACHE_MAX_ENTRIES": "0",
            },
        ) as served:
            async with connected(served.address) as stubs:
                watch = stubs.health.Watch(health_pb2.HealthCheckRequest(service=""))
                assert await next_health(watch, within_s=10) == SERVING
                request = pb.AskStreamRequest(query="How is the confidence score computed?")
                streams = [stubs.rag.AskStream(request, timeout=60) for _ in range(STREAMS)]
                firsts = await asyncio.gather(*(stream.read() for stream in streams))
                assert all(first.WhichOneof("event") == "text_delta" for first in firsts), "all 20 are live"

                served.process.send_signal(signal.SIGTERM)
                assert await next_health(watch, within_s=DRAIN_NOTICE_S) == NOT_SERVING, "draining has begun"
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stubs.rag.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=5)
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE, "no new call once draining"

                rests = await asyncio.gather(*(read_rest(stream) for stream in streams))
                for first, rest in zip(firsts, rests, strict=True):
                    assert rest[-1].WhichOneof("event") == "answer"
                    deltas = [m.text_delta for m in rest if m.WhichOneof("event") == "text_delta"]
                    text = first.text_delta + "".join(deltas)
                    assert text == rest[-1].answer.text == "".join(DELTAS)
                codes = await asyncio.gather(*(stream.code() for stream in streams))
                assert codes == [grpc.StatusCode.OK] * STREAMS
            assert await served.exited(20) == 0
