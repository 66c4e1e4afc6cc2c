"""A real `ragsvc serve` process for the benchmark, and a corpus ingested into it over IndexService.

Each corpus's ingested index is kept in .bench/quality-index/<key>/ and copied into a fresh RAG_DATA_DIR for each
run; the key covers the corpus hash, the chunk settings and the source of ragsvc's ingestion and retrieval code (any
change to how documents are read, chunked, embedded or indexed ingests again). The manifest beside it names the
tenant the pages were ingested into.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from bench.quality.corpus import ROOT, Page, corpus_hash
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc

INDEX_CACHE = Path(os.environ.get("EVAL_INDEX_DIR", ROOT / ".bench" / "quality-index"))
INGEST_BATCH = 8  # documents per IngestDocuments call
# Settings that decide what the index holds (read by the server from the environment, defaults as in ragsvc).
INDEX_SETTINGS = ("RAG_CHUNK_TOKENS", "RAG_CHUNK_OVERLAP_TOKENS", "RAG_EMBEDDER", "RAG_EMBEDDER_INT8", "EMBEDDING_MODEL")
# The code that decides what the index holds: ingestion and the engines' storage, not the query-time stages
# (retrieval/hybrid.py, quality.py, selection.py: ranking, filters, selected text), whose changes need no new index.
INDEX_CODE = (
    "src/ragsvc/ingest",
    *(f"src/ragsvc/retrieval/{name}" for name in ("__init__.py", "base.py", "edge.py", "edge_optimize.py", "embedders.py")),
    *(f"src/ragsvc/retrieval/{name}" for name in ("http_embedders.py", "int8_graph.py", "layout.py", "qdrant_server.py")),
    "src/ragsvc/domain.py",
    # The analyser of the stored index terms and readings (reading.chunks and what it reads with), and the passages
    # the chunker finds labels with.
    *(f"src/ragsvc/reading/{name}" for name in ("text.py", "passages.py", "sentences.py", "chunks.py", "relevance.py")),
    *(f"src/ragsvc/reading/{name}" for name in ("paraphrase.py", "values.py")),
    "src/ragsvc/sanitize.py",
)


def base_env(data_dir: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The server's environment: a private data dir, no demo corpus, no rate limit, no answer cache."""
    env = {
        **os.environ,
        "RAG_GRPC_ADDRESS": "127.0.0.1:0",
        "RAG_DATA_DIR": str(data_dir),
        "RAG_DEMO_CORPUS": "false",
        "RAG_API_RATE_LIMIT": "0",
        "RAG_CACHE_MAX_ENTRIES": "0",
        "RAG_MAX_CONCURRENT_REQUESTS": "256",
        "RAG_REQUEST_LOG": "false",
        "RAG_GENERATOR": "extractive",
    }
    env.update(extra)
    return env


class ServerProcess:
    """`ragsvc serve` in a child process; `address` once it is serving."""

    def __init__(self, env: Mapping[str, str], *, log: Path | None = None, start_timeout_s: float = 120.0) -> None:
        self._log = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ragsvc.cli", "serve"],
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""  # "ragsvc serving on HOST:PORT"
        if not line.startswith("ragsvc serving on "):
            self.close()
            raise RuntimeError(f"ragsvc serve did not start (said {line!r}); see {log}")
        self.address = line.removeprefix("ragsvc serving on ").strip()
        self.start_s = time.perf_counter() - started
        if time.perf_counter() - started > start_timeout_s:
            raise RuntimeError("ragsvc serve took too long to start")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if hasattr(self._log, "close"):
            self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def index_key(pages: Sequence[Page], env: Mapping[str, str]) -> str:
    digest = hashlib.sha256(corpus_hash(list(pages)).encode())
    for name in INDEX_SETTINGS:
        digest.update(f"{name}={env.get(name, '')}\n".encode())
    for entry in INDEX_CODE:
        path = ROOT / entry
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(ROOT)).encode() + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:16]


async def ingest(address: str, pages: Sequence[Page], tenant: str) -> dict[str, Any]:
    """Ingests every page into `tenant` over IndexService; per-document chunk counts and errors, and the time."""
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    async with grpc.aio.insecure_channel(address) as channel:
        stub = index_service_pb2_grpc.IndexServiceStub(channel)
        for start in range(0, len(pages), INGEST_BATCH):
            batch = pages[start : start + INGEST_BATCH]
            documents = [
                index_pb.Document(
                    document_id=p.document_id,
                    name=p.name,
                    content=p.content,
                    media_type="text/html",
                    title=p.title,
                    source_url=p.source_url,
                )
                for p in batch
            ]
            response = await stub.IngestDocuments(
                index_pb.IngestDocumentsRequest(tenant_id=tenant, documents=documents), timeout=1800
            )
            for result in response.results:
                results[result.document_id] = {"chunks": result.chunks_indexed, "error": result.error or None}
            done = start + len(batch)
            chunks = sum(r["chunks"] for r in results.values())
            print(f"\r  ingested {done}/{len(pages)} pages, {chunks} chunks", end="", flush=True)
    print()
    return {
        "tenant": tenant,
        "documents": results,
        "chunks": sum(r["chunks"] for r in results.values()),
        "documents_with_text": sum(1 for r in results.values() if r["chunks"]),
        "ingest_s": round(time.perf_counter() - started, 1),
    }


async def cached_index(
    pages: Sequence[Page], tenant: str, env_extra: Mapping[str, str] = {}, *, fresh: bool = False
) -> tuple[Path, dict[str, Any]]:
    """The cached index of `pages` in `tenant` (.bench/quality-index/<key>/, holding `data`, a RAG_DATA_DIR, and
    manifest.json), ingested over gRPC first when missing, stale or `fresh`; and its manifest."""
    key = index_key(pages, base_env(Path("."), env_extra))
    cached = INDEX_CACHE / key
    manifest_path = cached / "manifest.json"
    # Indexes cached before the manifest named its tenant were all pgdocs'.
    stale = manifest_path.exists() and json.loads(manifest_path.read_text()).get("tenant", "pgdocs") != tenant
    if fresh or stale or not manifest_path.exists():
        print(f"ingesting {len(pages)} pages into tenant {tenant} (index {key}; takes minutes)", flush=True)
        INDEX_CACHE.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=INDEX_CACHE))
        # The index depends on neither the generator nor the reader: ingest with the extractive one (no LLM needed)
        # and the rule reader (a model file being retrained cannot stop it).
        with ServerProcess(
            base_env(building / "data", {**env_extra, "RAG_GENERATOR": "extractive", "RAG_READER": "rules"})
        ) as server:
            manifest = await ingest(server.address, pages, tenant)
        manifest["key"] = key
        (building / "manifest.json").write_text(json.dumps(manifest, indent=1))
        if cached.exists():
            shutil.rmtree(cached)
        building.rename(cached)
        manifest["reused"] = False
    else:
        manifest = json.loads(manifest_path.read_text())
        manifest["reused"] = True
        print(f"reusing the ingested index {key} ({manifest['chunks']} chunks)", flush=True)
    return cached, manifest


async def prepared_data_dir(
    pages: Sequence[Page], tenant: str, env_extra: Mapping[str, str], *, fresh: bool
) -> tuple[Path, dict[str, Any]]:
    """A new temporary directory whose `data` is a copy of the cached index (`cached_index`), and the manifest."""
    cached, manifest = await cached_index(pages, tenant, env_extra, fresh=fresh)
    run_dir = Path(tempfile.mkdtemp(prefix="ragsvc-quality-"))
    shutil.copytree(cached / "data", run_dir / "data")
    return run_dir, manifest
