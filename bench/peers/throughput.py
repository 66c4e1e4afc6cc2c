"""ragsvc's throughput with the instant LLM against the raw grpc.aio ceilings (`ceilings`), at concurrency 1, 8
and 32: Asks per second against echo unaries per second, and streamed tokens per second (AskStream with a
200-token answer) against raw stream messages per second. Each point alternates ragsvc and the ceiling
`--rounds` times. Run by `bench.peers.run`, in a process of its own, with a ragsvc server and the scripted LLM
already up; prints its results as JSON.

    python -m bench.peers.throughput RAGSVC_ADDRESS LLM_BASE_URL CORPUS_SIZE [--rounds 3] [--seconds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from bench.peers.ceilings import ECHO, STREAM, Load, closed_loop
from bench.peers.common import corpus, queries
from bench.peers.cpu import CpuMeter
from bench.peers.workers import ROOT, LLMControl
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

STREAM_TOKENS = 200
CONCURRENCY = (1, 8, 32)

Call = Callable[[int], Awaitable[int]]


async def measure(rag_address: str, llm: LLMControl, size: int, rounds: int, seconds: float, pids: list[int]) -> dict[str, Any]:
    ceiling = subprocess.Popen(
        [sys.executable, "-m", "bench.peers.ceilings", "--messages", str(STREAM_TOKENS)],
        stdout=subprocess.PIPE, cwd=ROOT, text=True,
    )
    raw_address = ceiling.stdout.readline().strip()  # type: ignore[union-attr]
    asked = queries(corpus(size), 1000, seed=5)
    asks = [pb.AskRequest(query=q, tenant_id=t) for q, t in asked]
    streams = [pb.AskStreamRequest(query=q, tenant_id=t) for q, t in asked]
    payload = asks[0].SerializeToString()
    out: dict[str, Any] = {"unary": [], "stream": [], "stream_tokens": STREAM_TOKENS}
    try:
        async with grpc.aio.insecure_channel(rag_address) as rag_channel, \
                grpc.aio.insecure_channel(raw_address) as raw_channel:
            rag = rag_service_pb2_grpc.RagServiceStub(rag_channel)
            echo = raw_channel.unary_unary(ECHO)
            raw_stream = raw_channel.unary_stream(STREAM)

            async def ask(n: int) -> int:
                await rag.Ask(asks[n % len(asks)], timeout=30)
                return 1

            messages = {"calls": 0, "text_deltas": 0}

            async def ask_stream(n: int) -> int:
                """The LLM's STREAM_TOKENS tokens when the whole answer arrived, however ragsvc grouped them into
                messages (it merges what arrived together: `ragsvc.generation.coalesce`)."""
                text = []
                async for event in rag.AskStream(streams[n % len(streams)], timeout=30):
                    if event.HasField("text_delta"):
                        text.append(event.text_delta)
                messages["calls"] += 1
                messages["text_deltas"] += len(text)
                return STREAM_TOKENS if "".join(text).endswith("[#1].") else 0

            async def echo_once(n: int) -> int:
                await echo(payload, timeout=30)
                return 1

            async def stream_once(n: int) -> int:
                return len([m async for m in raw_stream(payload, timeout=30)])

            measured = [ceiling.pid, *pids]
            for concurrency in CONCURRENCY:
                out["unary"].append(await _alternate(ask, echo_once, concurrency, rounds, seconds, measured, llm))
            llm.script(STREAM_TOKENS)
            try:
                for concurrency in CONCURRENCY:
                    out["stream"].append(
                        await _alternate(ask_stream, stream_once, concurrency, rounds, seconds, measured, llm)
                    )
            finally:
                llm.script()
            out["ragsvc_text_deltas_per_stream"] = round(messages["text_deltas"] / max(1, messages["calls"]), 1)
    finally:
        ceiling.terminate()
        ceiling.wait(10)
    return out


async def _alternate(
    ours: Call, raw: Call, concurrency: int, rounds: int, seconds: float, pids: list[int], llm: LLMControl
) -> dict[str, Any]:
    await closed_loop(ours, concurrency, 0.5)  # warm-up
    await closed_loop(raw, concurrency, 0.5)
    runs: dict[str, list[Load]] = {"ragsvc": [], "ceiling": []}
    cpu: dict[str, list[dict[str, float]]] = {"ragsvc": [], "ceiling": []}
    for _ in range(rounds):
        for name, call in (("ragsvc", ours), ("ceiling", raw)):
            meter = CpuMeter(pids)
            runs[name].append(await closed_loop(call, concurrency, seconds))
            cpu[name].append(meter.stop().as_dict())
        llm.drain_log()
    point: dict[str, Any] = {"concurrency": concurrency}
    for name, loads in runs.items():
        point[name] = {
            "calls_per_s": [round(load.calls_per_s, 1) for load in loads],
            "units_per_s": [round(load.units_per_s, 1) for load in loads],
            "errors": sum(load.errors for load in loads),
            "cpu": cpu[name],
        }
    ratios = [a.units_per_s / b.units_per_s for a, b in zip(runs["ragsvc"], runs["ceiling"], strict=True)]
    point["ratio_per_round"] = [round(r, 3) for r in ratios]
    point["ratio_median"] = round(statistics.median(ratios), 3)
    print(f"throughput c={concurrency}: ratio {point['ratio_median']}", file=sys.stderr, flush=True)
    return point


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rag_address")
    parser.add_argument("llm_base_url")
    parser.add_argument("size", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--pids", type=int, nargs="*", default=[], help="processes whose CPU counts as ours")
    args = parser.parse_args()
    llm = LLMControl(args.llm_base_url)
    print(json.dumps(asyncio.run(measure(args.rag_address, llm, args.size, args.rounds, args.seconds, args.pids))))


if __name__ == "__main__":
    main()
