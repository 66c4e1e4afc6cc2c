"""Generation overheads: time to first token through ragsvc against the raw LLM stream, what the validated stream
policy costs, and token counting.

1. Time to first token. A scripted OpenAI-compatible server (its own thread and event loop) streams every
   answer (ANSWER, a word per token: three cited sentences) with a fixed first-token delay and token rate, and
   records when it sent each first token. Call by call, interleaved: a raw httpx client streams a completion
   straight from it, and a gRPC client asks a `ragsvc serve` process (RAG_GENERATOR=openai, pointed at the same
   server) with AskStream twice, once with STREAM_POLICY_RAW (every token relayed) and once with
   STREAM_POLICY_VALIDATED (a sentence released once complete and its markers valid). For each call the time is
   the client's first text delta minus the server's first-token time (both time.monotonic, one machine): what
   the path from the LLM's socket to the client costs, retrieval and packing excluded (they happen before the
   LLM is asked); and the same from the start of the call. Reported p50/p95/p99.
   The validated stream's first text is the first complete sentence: it cannot come before the model wrote that
   sentence and the next token (which shows the sentence, and its markers, ended): about (tokens of the first
   sentence) x (token delay) after the first token, plus ragsvc's overhead.
2. Token counting. TokenBudget.pack() of a typical request (5 chunks of ~180 tokens, a 4-turn history) with the
   real encodings, per model family, and one count() of a chunk.

    python -m bench.generation [--calls 200] [--first-token-ms 200] [--token-ms 10] [--pack-repeat 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import httpx

from bench.stats import CacheTally, machine, summary, write_result
from ragsvc.budget import ModelCatalog
from ragsvc.config import BudgetSettings, GenerationSettings
from ragsvc.domain import ChatMessage, Chunk, Role, ScoredChunk
from ragsvc.prompts import get_prompt
from ragsvc.v1 import rag_service_pb2 as pb
from ragsvc.v1 import rag_service_pb2_grpc
from tests.support.openai_server import ScriptedOpenAIServer

QUESTIONS = (
    "How is the confidence score computed?",
    "What happens on SIGTERM?",
    "How are documents chunked?",
    "When is a question routed to a human?",
)
# What the scripted model answers every question with: three cited sentences, streamed a word at a time.
ANSWER = (
    "The overall confidence is 30 times the retrieval score plus 40 times the coverage [#1]. "
    "Coverage is the share of the answer's key phrases that are found in the evidence [#1]. "
    "An answer below the confidence threshold is routed to the owner of its primary tag [#1]."
)
QUANTILES = (0.5, 0.95, 0.99)


class ThreadedLLM:
    """A ScriptedOpenAIServer serving from its own thread and event loop, so that the clients measured in the
    main thread never delay its tokens by more than the GIL does."""

    def __init__(self, **script: Any) -> None:
        self._script = script
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="scripted-llm", daemon=True)
        self._ready = threading.Event()
        self.server: ScriptedOpenAIServer | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self.server = ScriptedOpenAIServer(**self._script)
        self._loop.run_until_complete(self.server.__aenter__())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        self._ready.wait(10)
        assert self.server is not None
        return self.server

    def __exit__(self, *exc_info: object) -> None:
        assert self.server is not None
        asyncio.run_coroutine_threadsafe(self.server.__aexit__(None, None, None), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def first_token_overheads(calls: int, warmup: int, first_token_ms: float, token_ms: float) -> dict[str, Any]:
    deltas = [word + " " for word in ANSWER.split(" ")[:-1]] + [ANSWER.split(" ")[-1]]
    first_sentence_tokens = len(ANSWER.split(". ")[0].split(" "))
    with ThreadedLLM(deltas=deltas, first_token_delay_s=first_token_ms / 1000, token_delay_s=token_ms / 1000) as llm:
        data_dir = tempfile.mkdtemp(prefix="ragsvc-bench-generation-")
        env = {
            **os.environ,
            "RAG_GRPC_ADDRESS": "127.0.0.1:0",
            "RAG_DATA_DIR": data_dir,
            "RAG_GENERATOR": "openai",
            "OPENAI_BASE_URL": llm.base_url,
            "RAG_HEALTH_PROBE_INTERVAL_SECONDS": "3600",
            # Every call must reach the LLM: no answer cache, no rate limit (settings of their own issues).
            "RAG_CACHE_MAX_ENTRIES": "0",
            "RAG_API_RATE_LIMIT": "0",
            "RAG_REQUEST_LOG": "false",
            # One model call per question, the answer's: no classification, self-score or follow-ups.
            "RAG_LLM_CLASSIFY": "false",
            "RAG_LLM_SELF_SCORE": "false",
            "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "ragsvc.cli", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        try:
            line = await asyncio.to_thread(server.stdout.readline)  # type: ignore[union-attr]
            address = line.removeprefix("ragsvc serving on ").strip()
            raw: list[float] = []
            ragsvc: list[float] = []
            ragsvc_from_call: list[float] = []
            validated: list[float] = []
            validated_from_call: list[float] = []
            cache = CacheTally()
            async with httpx.AsyncClient(base_url=llm.base_url) as http, grpc.aio.insecure_channel(address) as channel:
                stub = rag_service_pb2_grpc.RagServiceStub(channel)
                for i in range(warmup + calls):
                    question = QUESTIONS[i % len(QUESTIONS)]
                    raw_ms = await raw_stream(http, llm)
                    via_ms, call_ms = await ragsvc_stream(stub, llm, question, pb.STREAM_POLICY_RAW, cache)
                    sentence_ms, sentence_call_ms = await ragsvc_stream(stub, llm, question, pb.STREAM_POLICY_VALIDATED, cache)
                    if i >= warmup:
                        raw.append(raw_ms)
                        ragsvc.append(via_ms)
                        ragsvc_from_call.append(call_ms)
                        validated.append(sentence_ms)
                        validated_from_call.append(sentence_call_ms)
        finally:
            server.terminate()
            server.wait(timeout=30)
    overhead = [v - r for v, r in zip(ragsvc, raw, strict=True)]
    cost = [v - r for v, r in zip(validated_from_call, ragsvc_from_call, strict=True)]
    if cache.hits:
        raise RuntimeError(f"{cache.hits} answers came from the cache, which is off")
    return {
        "cache": cache.report("RAG_CACHE_MAX_ENTRIES=0"),
        "script": {
            "first_token_delay_ms": first_token_ms,
            "token_delay_ms": token_ms,
            "tokens": len(deltas),
            "first_sentence_tokens": first_sentence_tokens,
        },
        "raw_httpx_after_server_first_token": summary(raw, QUANTILES),
        "ragsvc_raw_first_token_after_server_first_token": summary(ragsvc, QUANTILES),
        "ragsvc_minus_raw_call_by_call": summary(overhead, QUANTILES),
        "ragsvc_raw_first_token_from_call_start": summary(ragsvc_from_call, QUANTILES),
        "ragsvc_validated_first_sentence_after_server_first_token": summary(validated, QUANTILES),
        "ragsvc_validated_first_sentence_from_call_start": summary(validated_from_call, QUANTILES),
        "validated_minus_raw_from_call_start_call_by_call": summary(cost, QUANTILES),
        "floor_of_the_validated_wait_ms": first_sentence_tokens * token_ms,
    }


async def raw_stream(http: httpx.AsyncClient, llm: ScriptedOpenAIServer) -> float:
    """ms from the server sending the first token to this client reading it, streaming straight from the LLM."""
    seen = len(llm.streams)
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": "q"}], "stream": True}
    first: float | None = None
    async with http.stream("POST", "/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith("data:") and '"content": "The' in line:
                first = time.monotonic()
    return first_token_gap(llm, seen, first)


async def ragsvc_stream(
    stub: rag_service_pb2_grpc.RagServiceStub,
    llm: ScriptedOpenAIServer,
    question: str,
    policy: pb.StreamPolicy,
    cache: CacheTally,
) -> tuple[float, float]:
    """ms from the server sending the first token to the gRPC client reading the first text delta (a token when
    `policy` is raw, a sentence when validated); and from the call."""
    seen = len(llm.streams)
    started = time.monotonic()
    first: float | None = None
    answer = None
    async for message in stub.AskStream(pb.AskStreamRequest(query=question, stream_policy=policy), timeout=30):
        if first is None and message.HasField("text_delta"):
            first = time.monotonic()
        if message.HasField("answer"):
            answer = message.answer
            cache.count(answer)
    if answer is None or not answer.grounded:
        raise RuntimeError(f"expected a grounded answer to {question!r}; got {answer}")
    return first_token_gap(llm, seen, first), ((first or started) - started) * 1000


def first_token_gap(llm: ScriptedOpenAIServer, seen: int, first: float | None) -> float:
    streams = llm.streams[seen:]
    if first is None or len(streams) != 1 or streams[0].first_token_at is None:
        raise RuntimeError(f"expected one streamed answer with a first token; got {len(streams)}")
    return (first - streams[0].first_token_at) * 1000


def counting_cost(repeat: int) -> dict[str, Any]:
    """µs per TokenBudget.pack() of a typical request, per model family, and per count() of one chunk."""
    catalog = ModelCatalog(GenerationSettings().model_limits, BudgetSettings())
    corpus = (Path(__file__).parents[1] / "src/ragsvc/demo_corpus/citations-and-confidence.md").read_text().split()
    budget = catalog.budget("llama3.2")
    chunks, start = [], 0
    while len(chunks) < 5:  # ~180-token chunks, as RAG_CHUNK_TOKENS makes them
        words = corpus[start % len(corpus) :][:130]
        chunks.append(ScoredChunk(Chunk(f"doc{len(chunks)}", 0, " ".join(words), document_name="d.md"), 0.8))
        start += 130
    history = [ChatMessage(Role.USER if i % 2 == 0 else Role.ASSISTANT, " ".join(corpus[i * 40 : i * 40 + 40])) for i in range(4)]
    prompt = get_prompt("rag-v1")
    query = "How is the confidence score computed and when is an answer routed?"

    def per_call_us(call: Callable[[], object]) -> dict[str, float]:
        """µs per call: the best and the median of 5 rounds (the best is the cost, the median adds the noise)."""
        for _ in range(20):
            call()
        rounds = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(repeat // 5):
                call()
            rounds.append((time.perf_counter() - started) / (repeat // 5) * 1e6)
        return {"best": round(min(rounds), 1), "median": round(sorted(rounds)[2], 1)}

    packing = budget.pack(prompt, query, history, chunks)
    return {
        "request": {
            "chunks": len(chunks),
            "chunk_tokens": [budget.count(c.chunk.text) for c in chunks],
            "history_messages": len(history),
            "prompt_tokens": packing.prompt_tokens,
        },
        "pack_us": {
            model: per_call_us(lambda m=model: catalog.budget(m).pack(prompt, query, history, chunks)) for model in catalog
        },
        "count_one_chunk_us": per_call_us(lambda: budget.count(chunks[0].chunk.text)),
    }


async def run(calls: int, warmup: int, first_token_ms: float, token_ms: float, pack_repeat: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    ttft = await first_token_overheads(calls, warmup, first_token_ms, token_ms)
    return {
        "what": "time to first token at a gRPC client through a `ragsvc serve` subprocess (openai generator) vs a raw "
        "httpx client streaming from the same scripted OpenAI-compatible server (own thread), and time to the first "
        "released sentence of a validated stream, interleaved call by call, each measured from the server's "
        "first-token send time and from the call's start; then TokenBudget.pack() cost",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(load_before),
        "time_to_first_token": ttft,
        "token_counting": counting_cost(repeat=pack_repeat),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--first-token-ms", type=float, default=200.0)
    parser.add_argument("--token-ms", type=float, default=10.0)
    parser.add_argument("--pack-repeat", type=int, default=2000, help="TokenBudget.pack() calls timed per model")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.calls, args.warmup, args.first_token_ms, args.token_ms, args.pack_repeat))
    write_result("generation", result)


if __name__ == "__main__":
    main()
