"""`ragsvc serve` as a real process: it serves, and on SIGTERM reports NOT_SERVING and drains in-flight streams."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

from tests.support.openai_server import ScriptedOpenAIServer

DELTAS = tuple(f"word{i} " for i in range(20)) + ("[#1]",)
TOKEN_DELAY_S = 0.1  # the stream takes ~2 s: long enough to be in flight when SIGTERM arrives


async def read_rest(call: grpc.aio.UnaryStreamCall) -> list[pb.AskStreamResponse]:
    """The remaining messages of a stream already read with read() (iteration cannot be mixed with it)."""
    messages = []
    while (message := await call.read()) is not grpc.aio.EOF:
        messages.append(message)
    return messages


async def start_serve(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={**os.environ, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": str(tmp_path), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), timeout=60)  # type: ignore[union-attr]
    assert line.startswith("ragsvc serving on "), line
    return process, line.removeprefix("ragsvc serving on ").strip()


async def test_sigterm_sets_not_serving_and_drains_the_in_flight_stream(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        process, address = await start_serve(
            tmp_path,
            {"RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url, "RAG_GRACE_PERIOD_SECONDS": "10"},
        )
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
                assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING

                stub = rag_service_pb2_grpc.RagServiceStub(channel)
                stream = stub.AskStream(pb.AskStreamRequest(query="How is the confidence score computed?"), timeout=30)
                first = await stream.read()
                assert first.WhichOneof("event") == "text_delta"

                process.send_signal(signal.SIGTERM)
                assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING

                rest = await read_rest(stream)
                assert rest[-1].WhichOneof("event") == "answer", "the in-flight stream finished during the drain"
                assert rest[-1].answer.text == "".join(DELTAS)
                assert await stream.code() == grpc.StatusCode.OK

            assert await asyncio.to_thread(process.wait, 15) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


async def test_new_calls_are_refused_after_sigterm(tmp_path: Path) -> None:
    async with ScriptedOpenAIServer(deltas=DELTAS, token_delay_s=TOKEN_DELAY_S) as llm:
        process, address = await start_serve(tmp_path, {"RAG_GENERATOR": "openai", "OPENAI_BASE_URL": llm.base_url})
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                stub = rag_service_pb2_grpc.RagServiceStub(channel)
                stream = stub.AskStream(pb.AskStreamRequest(query="How is the confidence score computed?"), timeout=30)
                await stream.read()
                process.send_signal(signal.SIGTERM)
                await asyncio.sleep(0.3)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.Ask(pb.AskRequest(query="How is the confidence score computed?"), timeout=5)
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
                assert (await read_rest(stream))[-1].WhichOneof("event") == "answer"
            assert await asyncio.to_thread(process.wait, 15) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
