"""Soak: 200 concurrent AskStream clients for 60 s against a `ragsvc serve` process on loopback, answering with
a scripted OpenAI-compatible LLM server (its own process). Bounded and self-stopping.

Each client loops: one AskStream (its own API key, so the per-key rate limit applies), read it to the end, and
on RESOURCE_EXHAUSTED wait what RetryInfo says. Two profiles, each a fresh server:

- ``shed``: the shipping limits (10 asks in flight, 60 calls per minute per key): most calls are refused at
  once with RESOURCE_EXHAUSTED (OVERLOADED or RATE_LIMITED), which is the intended behaviour;
- ``full``: limits raised so that all 200 streams really are in flight together.

Reports calls by status and reason (anything but OK and RESOURCE_EXHAUSTED is an error, and the exit status is
1), stream latency, the server's resident memory (start, every 10 s, end) and its asyncio task count before
and after the load (from the metrics endpoint), then SIGTERMs the server and checks it exits cleanly.

    python -m bench.soak [--clients 200] [--seconds 60] [--profiles shed,full]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from prometheus_client.parser import text_string_to_metric_families

from bench.stats import CacheTally, machine, percentile, write_result
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc

QUESTIONS = (
    "How is the confidence score computed?",
    "What happens on SIGTERM?",
    "How are documents chunked?",
    "Which status code does an empty query get?",
    "When is a question routed to a human?",
)
DELTAS = 20  # tokens per scripted answer
TOKEN_DELAY_S = 0.01  # so a stream lasts ~0.2 s upstream
CHANNELS = 8
PROFILES: dict[str, dict[str, str]] = {
    "shed": {"RAG_MAX_CONCURRENT_REQUESTS": "10", "RAG_API_RATE_LIMIT": "60"},  # the shipping defaults
    "full": {"RAG_MAX_CONCURRENT_REQUESTS": "256", "RAG_API_RATE_LIMIT": "0"},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def scrape(port: int) -> dict[str, float]:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
    wanted = {"rag_event_loop_tasks", "rag_requests_in_flight", "process_resident_memory_bytes"}
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name in wanted}


def serve_llm() -> None:
    """`--llm-server`: a scripted OpenAI-compatible server; prints its port, serves until stdin closes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.openai_server import ScriptedOpenAIServer

    async def run() -> None:
        deltas = (*(f"word{i} " for i in range(DELTAS - 1)), "[#1]")
        async with ScriptedOpenAIServer(deltas=deltas, token_delay_s=TOKEN_DELAY_S) as server:
            print(server.port, flush=True)
            await asyncio.to_thread(sys.stdin.read)

    asyncio.run(run())


class Tally:
    def __init__(self) -> None:
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.ok_ms: list[float] = []
        self.refused_ms: list[float] = []
        self.messages = 0
        self.cache = CacheTally()

    def outcome(self, code: grpc.StatusCode, reason: str = "") -> None:
        self.outcomes[f"{code.name} {reason}".strip()] += 1


def decode(error: grpc.aio.AioRpcError) -> tuple[str, float]:
    """ErrorInfo.reason and RetryInfo delay (s) of a failed call."""
    status = rpc_status.from_call(error)
    reason, delay = "", 0.0
    for detail in status.details if status else ():
        info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            reason = info.reason
        elif detail.Unpack(retry):
            delay = retry.retry_delay.ToNanoseconds() / 1e9
    return reason, delay


async def client(i: int, stub: rag_service_pb2_grpc.RagServiceStub, until: float, tally: Tally) -> None:
    metadata = (("authorization", f"Bearer soak-{i}"),)
    n = i
    while time.monotonic() < until:
        n += 1
        started = time.perf_counter()
        try:
            request = pb.AskStreamRequest(query=QUESTIONS[n % len(QUESTIONS)])
            call = stub.AskStream(request, metadata=metadata, timeout=30)
            last = None
            async for message in call:
                tally.messages += 1
                last = message
            tally.outcome(grpc.StatusCode.OK)
            tally.ok_ms.append((time.perf_counter() - started) * 1000)
            assert last is not None and last.WhichOneof("event") == "answer"
            tally.cache.count(last.answer)
        except grpc.aio.AioRpcError as error:
            reason, delay = decode(error)
            tally.outcome(error.code(), reason)
            if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                tally.refused_ms.append((time.perf_counter() - started) * 1000)
                # As a polite client does: wait what RetryInfo says (with jitter), never past the end.
                await asyncio.sleep(max(0.0, min(delay * random.uniform(1.0, 1.5), until - time.monotonic())))
            else:
                await asyncio.sleep(0.1)


async def run_profile(name: str, clients: int, seconds: float) -> dict[str, Any]:
    env_limits = PROFILES[name]
    llm = subprocess.Popen(
        [sys.executable, "-m", "bench.soak", "--llm-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    server = None
    try:
        llm_port = int(await asyncio.to_thread(llm.stdout.readline))  # type: ignore[union-attr]
        metrics_port = free_port()
        keys = {"keys": [{"name": f"soak-{i}", "token": f"soak-{i}", "tenant": "default"} for i in range(clients)]}
        env = {
            **os.environ,
            "RAG_GRPC_ADDRESS": "127.0.0.1:0",
            "RAG_DATA_DIR": tempfile.mkdtemp(prefix="ragsvc-soak-"),
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "RAG_AUTH_ENABLED": "true",
            "RAG_API_KEYS": json.dumps(keys),
            "RAG_METRICS_PORT": str(metrics_port),
            "RAG_CACHE_MAX_ENTRIES": "0",  # every call runs the whole pipeline
            # One LLM call per question: no classification, self-score or follow-up calls around the answer.
            "RAG_LLM_CLASSIFY": "false",
            "RAG_LLM_SELF_SCORE": "false",
            "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
            "RAG_GRACE_PERIOD_SECONDS": "30",
            **env_limits,
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "ragsvc.cli", "serve"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = await asyncio.wait_for(asyncio.to_thread(server.stdout.readline), 120)  # type: ignore[union-attr]
        address = line.removeprefix("ragsvc serving on ").strip()
        channels = [grpc.aio.insecure_channel(address) for _ in range(CHANNELS)]
        stubs = [rag_service_pb2_grpc.RagServiceStub(channel) for channel in channels]
        warm = Tally()
        await client(0, stubs[0], time.monotonic() + 1.0, warm)  # warm-up: embedder, connections
        await asyncio.sleep(1.0)
        before = await scrape(metrics_port)
        rss = [(0.0, rss_mib(server.pid))]
        tally = Tally()
        started = time.monotonic()
        until = started + seconds
        tasks = [asyncio.create_task(client(i, stubs[i % CHANNELS], until, tally)) for i in range(clients)]
        while (now := time.monotonic()) < until:
            await asyncio.sleep(min(10.0, until - now))
            rss.append((round(time.monotonic() - started, 1), rss_mib(server.pid)))
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        elapsed = time.monotonic() - started
        await asyncio.sleep(2.0)  # let the server settle: finished calls, closed upstream streams
        after = await scrape(metrics_port)
        rss.append((round(time.monotonic() - started, 1), rss_mib(server.pid)))
        for channel in channels:
            await channel.close()
        server.send_signal(signal.SIGTERM)
        exit_code = await asyncio.to_thread(server.wait, 60)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        llm.stdin.close()  # type: ignore[union-attr]
        llm.wait(timeout=30)
    calls = sum(tally.outcomes.values())
    unexpected = {k: v for k, v in tally.outcomes.items() if not k.startswith(("OK", "RESOURCE_EXHAUSTED"))}
    if tally.cache.hits:
        unexpected["OK from the answer cache, which is off"] = tally.cache.hits
    return {
        "profile": name,
        "limits": env_limits,
        "clients": clients,
        "cache": tally.cache.report("RAG_CACHE_MAX_ENTRIES=0"),
        "seconds": round(elapsed, 1),
        "calls": calls,
        "calls_by_outcome": dict(tally.outcomes.most_common()),
        "unexpected_errors": unexpected,
        "ok_streams_per_s": round(tally.outcomes["OK"] / elapsed, 1),
        "messages_received": tally.messages,
        "ok_stream_ms": {"p50": percentile(tally.ok_ms, 0.5), "p99": percentile(tally.ok_ms, 0.99)},
        "refusal_ms": {"p50": percentile(tally.refused_ms, 0.5), "p99": percentile(tally.refused_ms, 0.99)},
        "server_rss_mib": {
            "start": round(rss[0][1], 1),
            "end": round(rss[-1][1], 1),
            "samples": [(t, round(m, 1)) for t, m in rss],
        },
        "server_loop_tasks": {"before": before.get("rag_event_loop_tasks"), "after": after.get("rag_event_loop_tasks")},
        "server_in_flight_after": after.get("rag_requests_in_flight"),
        "server_exit_code_after_sigterm": exit_code,
    }


async def run(clients: int, seconds: float, profiles: list[str]) -> dict[str, Any]:
    load_before = os.getloadavg()
    results = [await run_profile(name, clients, seconds) for name in profiles]
    return {
        "what": f"{clients} concurrent AskStream clients for {seconds:.0f} s per profile against a `ragsvc serve` "
        "subprocess on 127.0.0.1 (auth on, one key per client, cache off, one LLM call per question, request log "
        "on), answered by a scripted "
        f"OpenAI-compatible server in its own process ({DELTAS} tokens, {TOKEN_DELAY_S * 1000:.0f} ms apart); "
        "clients honour RetryInfo",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(load_before),
        "profiles": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--profiles", default="shed,full", help="comma-separated: " + ", ".join(PROFILES))
    parser.add_argument("--llm-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.llm_server:
        serve_llm()
        return 0
    result = asyncio.run(run(args.clients, args.seconds, args.profiles.split(",")))
    write_result("soak", result)
    failed = any(p["unexpected_errors"] or p["server_exit_code_after_sigterm"] != 0 for p in result["profiles"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
