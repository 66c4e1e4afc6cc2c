"""The raw grpc.aio ceilings ragsvc's throughput is measured against, and the closed-loop load that drives both.

The ceiling server (``python -m bench.peers.ceilings``, its own process like ragsvc's) has two generic methods on
raw bytes, no protobuf and no work: ``/bench.Ceiling/Echo`` answers a unary call with its request, and
``/bench.Ceiling/Stream`` answers with `--messages` messages the size of an AskStream text delta. It prints its
address on the first line of stdout. It listens with SO_REUSEPORT, so that a second one started with `--port` of
the first shares its port, as ragsvc's worker processes do (RAG_WORKERS).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import grpc

ECHO = "/bench.Ceiling/Echo"
STREAM = "/bench.Ceiling/Stream"
DELTA = b"\n\x08word[#1]"  # an AskStreamResponse{text_delta: "word[#1]"} on the wire: 10 bytes


@dataclass(frozen=True, slots=True)
class Load:
    """What a closed loop achieved: calls completed and units (calls, or streamed messages) in `seconds`."""

    calls: int
    units: int
    errors: int
    seconds: float

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds

    @property
    def units_per_s(self) -> float:
        return self.units / self.seconds


async def closed_loop(call: Callable[[int], Awaitable[int]], concurrency: int, seconds: float) -> Load:
    """`concurrency` callers each calling `call(n)` (n counts calls across callers) back to back for `seconds`;
    `call` returns the units it got. A failed call counts as an error, not a unit."""
    counter = iter(range(1 << 62))
    calls = units = errors = 0
    deadline = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal calls, units, errors
        while time.perf_counter() < deadline:
            try:
                got = await call(next(counter))  # awaited first: `units += await ...` would lose updates
            except grpc.aio.AioRpcError:
                errors += 1
            else:
                units += got
                calls += 1

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return Load(calls, units, errors, time.perf_counter() - started)


async def serve(messages: int, port: int) -> None:
    async def echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        for _ in range(messages):
            yield DELTA

    server = grpc.aio.server(options=[("grpc.so_reuseport", 1)])
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Ceiling", handlers),))
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print(f"127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    asyncio.run(serve(args.messages, args.port))
