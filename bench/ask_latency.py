"""Ask latency on the demo corpus with the extractive generator, against a real `ragsvc serve` process.

Side by side in one run, on the same channel to the same server: a trivial unary (grpc.health.v1 Check) as the
floor that any gRPC call pays, and Ask. Rounds interleave the two so machine noise hits both alike. Two phases,
each with a server of its own: `pipeline`, the answer cache off, so that every Ask runs the whole pipeline; and
`cache`, the cache on and every question asked once before, so that every measured Ask is a cache hit. Each
phase counts the answers the cache served (`flags.cache_hit`) and fails when one of them is not what it
measures. A third phase, `rules_reader`, is `pipeline` with the rule reader (RAG_READER=rules): what the trained
reader, the default, adds to an Ask is `pipeline` less `rules_reader` (`reader_added_p50_ms`). Every phase lifts
the rate limit (60 calls a minute by default; a round makes hundreds). Reports p50/p90/p99 per round, the server's
own stage timings (pipeline phases), and the machine it ran on.

    python -m bench.ask_latency [--rounds 3] [--calls 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.stats import CacheTally, machine, percentile, summary, write_result
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

QUESTIONS = (
    "How is the confidence score computed?",
    "What happens on SIGTERM?",
    "How are documents chunked?",
    "Which status code does an empty query get?",
    "When is a question routed to a human?",
)
# What the benchmark needs of the server, whatever the environment says; everything else is the default.
SERVER = {"RAG_GENERATOR": "extractive", "RAG_API_RATE_LIMIT": "0"}
PHASES = {
    "pipeline": {"RAG_CACHE_MAX_ENTRIES": "0"},  # every Ask a cache miss: the whole pipeline runs
    "cache": {"RAG_CACHE_MAX_ENTRIES": "1000"},  # every measured Ask a cache hit
    "rules_reader": {"RAG_CACHE_MAX_ENTRIES": "0", "RAG_READER": "rules"},  # the pipeline with the word rules
}


async def timed(call: object) -> float:
    started = time.perf_counter()
    await call  # type: ignore[misc]
    return (time.perf_counter() - started) * 1000


async def phase(name: str, rounds: int, calls: int, warmup: int) -> dict[str, Any]:
    settings = {**SERVER, **PHASES[name]}
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={
            **os.environ,
            "RAG_GRPC_ADDRESS": "127.0.0.1:0",
            "RAG_DATA_DIR": tempfile.mkdtemp(prefix="ragsvc-bench-"),
            **settings,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        address = (await asyncio.to_thread(server.stdout.readline)).removeprefix("ragsvc serving on ").strip()  # type: ignore[union-attr]
        if not address:
            raise RuntimeError(f"`ragsvc serve` exited with {server.wait()} before serving")
        cold_start_s = time.perf_counter() - started
        cache = CacheTally()
        async with grpc.aio.insecure_channel(address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            rag = rag_service_pb2_grpc.RagServiceStub(channel)
            check = health_pb2.HealthCheckRequest(service="")
            asks = [pb.AskRequest(query=q) for q in QUESTIONS]
            for i in range(max(warmup, len(asks))):  # every question at least once: the cache phase's hits
                await rag.Ask(asks[i % len(asks)], timeout=30)
                await health.Check(check, timeout=30)
            per_round = []
            stages: dict[str, list[float]] = {"retrieval": [], "budget": [], "generation": [], "total": []}
            for _ in range(rounds):
                floor, ask = [], []
                for i in range(calls):
                    floor.append(await timed(health.Check(check, timeout=30)))
                    started_call = time.perf_counter()
                    answer = (await rag.Ask(asks[i % len(asks)], timeout=30)).answer
                    ask.append((time.perf_counter() - started_call) * 1000)
                    cache.count(answer)
                    for stage in stages:
                        stages[stage].append(getattr(answer.timings, stage).ToNanoseconds() / 1e6)
                per_round.append({"floor_unary": summary(floor), "ask": summary(ask)})
    finally:
        server.terminate()
        server.wait(timeout=30)
    expected_hits = rounds * calls if name == "cache" else 0
    if cache.hits != expected_hits:
        raise RuntimeError(f"phase {name}: {cache.hits} cache hits of {rounds * calls} asks, expected {expected_hits}")
    ask_p50 = [r["ask"]["p50_ms"] for r in per_round]
    floor_p50 = [r["floor_unary"]["p50_ms"] for r in per_round]
    return {
        "server_settings": settings,
        "cache": cache.report(f"RAG_CACHE_MAX_ENTRIES={settings['RAG_CACHE_MAX_ENTRIES']}"),
        "cold_start_to_serving_s": round(cold_start_s, 2),
        "rounds": per_round,
        "ask_p50_ms_median_of_rounds": statistics.median(ask_p50),
        "floor_p50_ms_median_of_rounds": statistics.median(floor_p50),
        "ask_over_floor_p50_ratio": statistics.median(a / f for a, f in zip(ask_p50, floor_p50, strict=True)),
        "server_stage_p50_ms": {stage: percentile(v, 0.5) for stage, v in stages.items()},
    }


async def run(rounds: int, calls: int, warmup: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    phases = {name: await phase(name, rounds, calls, warmup) for name in PHASES}
    return {
        "what": "sequential unary calls over one channel to a `ragsvc serve` subprocess on 127.0.0.1; extractive "
        "generator; demo corpus (5 documents); Ask cycles through 5 questions; floor = grpc.health.v1 Check on "
        "the same server, interleaved call by call; phase `pipeline` with the answer cache off (every Ask a miss), "
        "phase `cache` with it on (every measured Ask a hit); phase `rules_reader` as `pipeline` with RAG_READER=rules; "
        "phases run one after another, each with a server of its own; rate limit off in all",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(load_before),
        "phases": phases,
        "reader_added_p50_ms": round(
            phases["pipeline"]["ask_p50_ms_median_of_rounds"] - phases["rules_reader"]["ask_p50_ms_median_of_rounds"], 3
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    write_result("ask_latency", asyncio.run(run(args.rounds, args.calls, args.warmup)))


if __name__ == "__main__":
    main()
