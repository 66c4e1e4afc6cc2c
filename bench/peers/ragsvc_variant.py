"""ragsvc as a variant of the peer benchmark: its server process (`bench.peers.ragsvc_server`, configured for
the job), the corpus ingested through IndexService, and a caller of AskStream timing what a peer's worker times
(end to end and first token), plus the server's own stage timings from the final answer (its store time is the
`store` timing: the vector engine's query call).

The caller is grpc's synchronous Python client with its single-threaded unary-stream option (`CALLER_OPTIONS`),
as a latency-minded Python caller would configure it: the stream's messages are read on the calling thread
instead of being handed over from a channel thread, one thread switch less per message (0.7 ms of the caller's
CPU less per AskStream at 2,000 passages, measured side by side; docs/profile/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.peers.common import Passage, WorkerConfig
from bench.peers.workers import ROOT, Worker, python_path
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb

INGEST_BATCH = 256
CALLER_OPTIONS = [(grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]

# ragsvc's settings for the job. Every other setting is the `ragsvc serve` default.
JOB_SETTINGS = {
    "RAG_GENERATOR": "openai",
    "RAG_DEMO_CORPUS": "false",
    # The same job as the peers: one LLM call per question (no classification, self-score or follow-up calls).
    "RAG_LLM_CLASSIFY": "false",
    "RAG_LLM_SELF_SCORE": "false",
    "RAG_DEFAULT_FOLLOW_UP_COUNT": "0",
    # No refusals either: the answerability gate judges the made-up words of the synthetic corpus and refused
    # 2 of 200 questions at 10k passages, which the peers answer (and the harness needs one LLM call a question).
    "RAG_ANSWERABILITY_GATE": "false",
    # The job's context is the top_k by similarity, in its order: the reader's chunk model does not choose it from more.
    "RAG_READER_POOL": "0",
    # Tokens relayed as they come, as the peers relay them: the first token is compared with theirs. (ragsvc's
    # default, validated, releases a sentence once its citations are checked; its cost against the first token is
    # measured by bench/generation.py.)
    "RAG_STREAM_POLICY": "raw",
    # Every question is new to the server: measure the work, not the answer cache.
    "RAG_CACHE_MAX_ENTRIES": "0",
    # A benchmark client is one caller sending far more than 60 calls a minute, up to 32 at a time.
    "RAG_API_RATE_LIMIT": "0",
    "RAG_MAX_CONCURRENT_REQUESTS": "256",
    # Tuned to the job's passages and embedder, as a user would: one chunk per ~360-token passage, and gates
    # at 0 since the token-hashing embedder's cosines are low.
    "RAG_CHUNK_TOKENS": "512",
    "RAG_SCORE_GATE": "0",
    "RAG_MIN_SIMILARITY_SCORE": "0",
}


# What JOB_SETTINGS turns off of `ragsvc serve`'s defaults, by feature: the production defaults' row sets none of
# these, and each row of its ablation sets one (that feature off, every other default on).
DEFAULT_FEATURES = {
    "answerability_gate": {"RAG_ANSWERABILITY_GATE": "false"},
    "validated_stream": {"RAG_STREAM_POLICY": "raw"},
    "llm_classify": {"RAG_LLM_CLASSIFY": "false"},
    "llm_self_score": {"RAG_LLM_SELF_SCORE": "false"},
    "follow_ups": {"RAG_DEFAULT_FOLLOW_UP_COUNT": "0"},
    "answer_cache": {"RAG_CACHE_MAX_ENTRIES": "0"},
    "chunk_model": {"RAG_READER_POOL": "0"},
}
# The environment of the production defaults' row on top of the job's: None unsets a setting (the serve default).
DEFAULTS_ENV: dict[str, str | None] = {name: None for off in DEFAULT_FEATURES.values() for name in off}


def without(feature: str) -> dict[str, str | None]:
    """The environment of the ablation row without `feature` (a key of DEFAULT_FEATURES): the defaults but it."""
    return {**DEFAULTS_ENV, **DEFAULT_FEATURES[feature]}


def job_environment(config: WorkerConfig, data_dir: str) -> dict[str, str]:
    """ragsvc's environment for `config` (on top of the process's own): JOB_SETTINGS, the scripted LLM, the
    model's window, the job's temperature and top_k, and where its data goes."""
    return {
        **os.environ,
        **JOB_SETTINGS,
        "RAG_DATA_DIR": data_dir,
        "OPENAI_BASE_URL": config.llm_base_url,
        "CHAT_MODEL": config.model,
        "RAG_MODELS": f"{config.model}=32768/1024",
        "RAG_TEMPERATURE": str(config.temperature),
        "RAG_TOTAL_CONTEXT_CHUNKS": str(config.top_k),
    }


def copy_index(source: Path, target: Path) -> None:
    """A copy of a closed ragsvc data directory (its qdrant-edge shard and records), holes kept: the engine
    preallocates its files sparsely (10k passages: ~260 MB apparent, ~90 MB written)."""
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)


class RagsvcServer:
    """A ragsvc server process for `config`; `cold_start_s` is the time from spawning it to health SERVING.
    `data_dir`: a RAG_DATA_DIR of the caller's (kept on close) instead of a temporary one; `workers`: RAG_WORKERS;
    `src`: another checkout's src/ to serve (see `workers.python_path`); `caller_options`: the caller's channel
    options; `env`: settings on top of the job's (RAG_...; None unsets one of the job's: the serve default)."""

    def __init__(
        self,
        config: WorkerConfig,
        *,
        data_dir: Path | None = None,
        workers: int = 1,
        src: str | None = None,
        caller_options: Sequence[tuple[str, int]] = CALLER_OPTIONS,
        env: Mapping[str, str | None] = {},
    ) -> None:
        self.config = config
        self._data_dir = tempfile.TemporaryDirectory(prefix="ragsvc-peers-") if data_dir is None else None
        chosen = str(data_dir) if self._data_dir is None else self._data_dir.name
        merged = {
            **job_environment(config, chosen),
            "PYTHONPATH": python_path(src),
            "RAG_GRPC_ADDRESS": "127.0.0.1:0",
            "RAG_WORKERS": str(workers),
            **env,
        }
        started = time.perf_counter()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.peers.ragsvc_server"],
            env={name: value for name, value in merged.items() if value is not None},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self._process.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("ragsvc serving on "):
            raise RuntimeError(f"ragsvc did not start (exit {self._process.poll()})")
        self.address = line.removeprefix("ragsvc serving on ").strip()
        self.pid = self._process.pid
        self.channel = grpc.insecure_channel(self.address, options=list(caller_options))
        health = health_pb2_grpc.HealthStub(self.channel)
        while health.Check(health_pb2.HealthCheckRequest(service="")).status != health_pb2.HealthCheckResponse.SERVING:
            time.sleep(0.01)
        self.cold_start_s = time.perf_counter() - started
        self.rag = rag_service_pb2_grpc.RagServiceStub(self.channel)

    def ingest(self, passages: Sequence[Passage]) -> float:
        """Index `passages` through IndexService.IngestDocuments, one document each; returns the seconds taken.
        Raises when a passage did not become exactly one chunk."""
        index = index_service_pb2_grpc.IndexServiceStub(self.channel)
        started = time.perf_counter()
        for tenant in sorted({p.tenant for p in passages}):
            mine = [p for p in passages if p.tenant == tenant]
            for at in range(0, len(mine), INGEST_BATCH):
                documents = [
                    index_pb.Document(document_id=p.id, name=p.name, content=p.text.encode(), media_type="text/plain")
                    for p in mine[at : at + INGEST_BATCH]
                ]
                reply = index.IngestDocuments(index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=documents))
                bad = [r for r in reply.results if r.chunks_indexed != 1]
                if bad:
                    raise RuntimeError(f"a passage did not become one chunk: {bad[0]}")
        return time.perf_counter() - started

    def ask(self, queries: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """AskStream each query in turn; per query what a peer's worker reports, and ragsvc's stage timings."""
        return [self._timed_ask(query, tenant) for query, tenant in queries]

    def context_ids(self, queries: Sequence[tuple[str, str]]) -> list[list[str]]:
        """The passages packed into each prompt, in marker order (an untimed Ask with explain)."""
        ids = []
        for query, tenant in queries:
            answer = self.rag.Ask(pb.AskRequest(query=query, tenant_id=tenant, explain=True), timeout=30).answer
            ids.append([c.source_id.removesuffix(":0") for c in answer.explanation.packed_chunks])
        return ids

    def close(self) -> None:
        self.channel.close()
        self._process.terminate()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
        if self._data_dir is not None:
            self._data_dir.cleanup()

    def _timed_ask(self, query: str, tenant: str) -> dict[str, Any]:
        request = pb.AskStreamRequest(query=query, tenant_id=tenant)
        window = [time.monotonic()]
        started = time.perf_counter()
        first_token = None
        text = []
        answer = None
        messages = 0
        for event in self.rag.AskStream(request, timeout=30):
            messages += 1
            kind = event.WhichOneof("event")
            if kind == "text_delta":
                if first_token is None:
                    first_token = time.perf_counter()
                text.append(event.text_delta)
            elif kind == "answer":
                answer = event.answer
        ended = time.perf_counter()
        window.append(time.monotonic())
        assert answer is not None, "the stream ended without its final answer"
        timings = {name: getattr(answer.timings, name).ToNanoseconds() / 1e6 for name in STAGES}
        refused = answer.refusal_reason != pb.REFUSAL_REASON_NONE
        return timed_result(started, first_token, ended, "".join(text), timings, answer.grounded, answer.flags.cache_hit) | {
            "window": window,
            "refused": refused,
            "messages": messages,
        }


# ragsvc's stage timings (the fields of the answer's Timings) that a result reports, in milliseconds.
STAGES = ("retrieval", "embedding", "store", "budget", "generation", "time_to_first_token", "validation", "total")


def timed_result(
    started: float,
    first_token: float | None,
    ended: float,
    text: str,
    timings: dict[str, float],
    grounded: bool,
    cache_hit: bool,
) -> dict[str, Any]:
    """One ragsvc result as a peer's worker reports it (perf_counter times), with ragsvc's stage timings (ms)."""
    return {
        "total_ms": (ended - started) * 1000,
        "ttft_ms": ((first_token or ended) - started) * 1000,
        "embed_ms": timings["embedding"],
        "store_ms": timings["store"],
        "answer": text,
        "grounded": grounded,
        "cache_hit": cache_hit,
        "server": timings,
    }


class RagsvcInProcess(Worker):
    """ragsvc's answering service without gRPC, in a worker process of its own (`bench.peers.ragsvc_inprocess`,
    in this venv)."""

    def __init__(self, config: WorkerConfig, *, src: str | None = None, env: Mapping[str, str] = {}) -> None:
        super().__init__(sys.executable, "bench.peers.ragsvc_inprocess", config, src=src, env=env)

    def context_ids(self, queries: Sequence[tuple[str, str]]) -> list[list[str]]:
        """The passages packed into each prompt, in marker order (an untimed explained answer)."""
        ids: list[list[str]] = self._call({"op": "context_ids", "queries": [list(q) for q in queries]})["ids"]
        return ids

    def raw_engine(self) -> dict[str, Any]:
        """The `raw_engine` row for the latest `ask`: each QueryRequest ragsvc sent its shard, sent again and timed
        bare (see `ragsvc_inprocess.raw_engine`)."""
        return self._call({"op": "raw_engine"})
