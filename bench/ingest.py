"""Ingest throughput with the bundled embedder (all-MiniLM-L6-v2, int8 weights, ONNX) on real documents.

Two corpora: the PostgreSQL 15 documentation pages that `make eval` ingests (bench/quality/corpus.py fetches and
caches them; `--pages N` takes the first N, `--pages-dir` a folder of .html pages instead), and the bundled demo
corpus (ragsvc/demo_corpus, Markdown). Each round ingests a corpus into an empty index, along two real paths:

- `grpc`: a `ragsvc serve` process (embedded engine, fresh RAG_DATA_DIR), the documents sent over
  IndexService.IngestDocuments in requests of `ragsvc ingest`'s batch size, one after the other as the CLI sends
  them; timed from the first request to the last response (the server's start is not counted);
- `in_process`: the Indexer over an EdgeEngine in a temporary directory (its metadata keys declared in an SQLite
  records file there), the embedder loaded (and warmed up) before the clock starts; the documents handed over in
  the same batches.

Then `stages`: where the time goes, measured one stage after the other on the same documents in this process
(no overlap): parse+chunk (loaders + chunker), embed (every chunk's indexed text, in one call), term index (the
BM25 sparse vector and the lexical index terms each engine derives from a chunk), reading (the chunk's reading the
engines store with it, `reading.chunks.stored_reading`, and its size) and the engine write
(EdgeEngine.replace_document per document; it includes the term index and the reading).

Reports chunks/s and documents/s per path, median with min-max over rounds, and the CPU time the ingesting
process used (the server's, or this process's: every thread, the embedder's included) as chunks per CPU-second,
which depends far less on how busy a shared machine is than the wall-clock rate: on 2 cores of its own, ingest
can at best reach twice that. Writes bench/results/ingest-DATE.json. Wall-clock numbers depend on the machine
and its load (the load average is in the results): compare numbers from one run.

`--int8` runs the embedder with int8 compute (RAG_EMBEDDER_INT8, `MiniLMEmbedder.load(int8=True)`) on both paths.

    python -m bench.ingest [--corpus pgdocs demo] [--paths grpc in_process] [--rounds 3] [--pages N] [--int8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from bench.quality.corpus import CORPORA, Page, fetch, load_pages
from bench.quality.server import ServerProcess, base_env
from bench.stats import machine, write_result
from ragsvc.cli import INGEST_BATCH
from ragsvc.domain import SourceDocument
from ragsvc.ingest.indexer import Indexer
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.reading.chunks import read_chunk, stored_reading
from ragsvc.reading.text import index_terms
from ragsvc.retrieval.base import IndexedChunk
from ragsvc.retrieval.edge import EdgeEngine
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.layout import SparseEncoder, indexed_text
from ragsvc.retrieval.schema import MetadataSchema
from ragsvc.server.components import demo_corpus_path
from ragsvc.source_trust import SourceTrust
from ragsvc.storage.database import open_database
from ragsvc.storage.metadata_keys import MetadataKeyStore
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc

TENANT = "bench"
CHUNK_TOKENS, OVERLAP_TOKENS = 180, 40  # the defaults of RAG_CHUNK_TOKENS and RAG_CHUNK_OVERLAP_TOKENS
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class Corpus:
    name: str
    documents: list[SourceDocument]


def pgdocs(pages: int | None, pages_dir: Path | None) -> Corpus:
    """The PostgreSQL pages of `make eval` (the first `pages` of them), or every .html page of `pages_dir`."""
    spec = CORPORA["pgdocs"]
    if pages_dir is not None:
        found: list[Page] = load_pages(spec, pages_dir, sorted(p.name for p in pages_dir.glob("*.html")), planted=False)
    else:
        found = load_pages(spec, fetch(spec).html_dir, spec.committed_pages()[:pages], planted=False)
    documents = [
        SourceDocument(
            document_id=p.document_id,
            name=p.name,
            content=p.content,
            media_type="text/html",
            tenant_id=TENANT,
            title=p.title,
            source_url=p.source_url,
        )
        for p in found
    ]
    return Corpus("pgdocs", documents)


def demo() -> Corpus:
    return Corpus("demo", source_documents_from_paths([demo_corpus_path()], tenant_id=TENANT))


def batches(documents: Sequence[SourceDocument]) -> list[list[SourceDocument]]:
    """The documents in requests of `ragsvc ingest`'s batch size."""
    return [list(documents[i : i + INGEST_BATCH]) for i in range(0, len(documents), INGEST_BATCH)]


def rates(documents: int, chunks: int, seconds: float, cpu_seconds: float, errors: int) -> dict[str, Any]:
    return {
        "documents": documents,
        "chunks": chunks,
        "errors": errors,
        "seconds": round(seconds, 3),
        "chunks_per_s": round(chunks / seconds, 2),
        "documents_per_s": round(documents / seconds, 2),
        "cpu_seconds": round(cpu_seconds, 3),
        "chunks_per_cpu_s": round(chunks / cpu_seconds, 2),
    }


def cpu_seconds_of(pid: int) -> float:
    """User and system CPU time of a process so far, all its threads (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


async def over_grpc(corpus: Corpus, *, int8: bool) -> dict[str, Any]:
    """One round through a fresh `ragsvc serve`."""
    data_dir = Path(tempfile.mkdtemp(prefix="ragsvc-bench-ingest-"))
    try:
        env = {"RAG_DEMO_CORPUS": "false", **({"RAG_EMBEDDER_INT8": "true"} if int8 else {})}
        with ServerProcess(base_env(data_dir / "data", env)) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = index_service_pb2_grpc.IndexServiceStub(channel)
                chunks = errors = 0
                started, cpu_started = time.perf_counter(), cpu_seconds_of(server.process.pid)
                for batch in batches(corpus.documents):
                    request = index_pb.IngestDocumentsRequest(
                        tenant_id=TENANT,
                        documents=[
                            index_pb.Document(
                                document_id=d.document_id,
                                name=d.name,
                                content=d.content,
                                media_type=d.media_type,
                                title=d.title,
                                source_url=d.source_url,
                            )
                            for d in batch
                        ],
                    )
                    response = await stub.IngestDocuments(request, timeout=3600)
                    chunks += sum(r.chunks_indexed for r in response.results)
                    errors += sum(1 for r in response.results if r.error)
                seconds = time.perf_counter() - started
                cpu_seconds = cpu_seconds_of(server.process.pid) - cpu_started
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return rates(len(corpus.documents), chunks, seconds, cpu_seconds, errors)


@contextlib.asynccontextmanager
async def fresh_indexer(embedder: MiniLMEmbedder) -> AsyncIterator[tuple[Indexer, EdgeEngine]]:
    """An Indexer over a fresh embedded engine and records file in a temporary directory, removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="ragsvc-bench-ingest-"))
    engine = EdgeEngine.open(directory / "engine", embedder.dimension)
    records = await open_database(directory / "records.sqlite3")
    try:
        schema = MetadataSchema(MetadataKeyStore(records), engine)
        sources = SourceTrust.default()
        indexer = Indexer(embedder, engine, schema, sources=sources, chunk_tokens=CHUNK_TOKENS,
                          overlap_tokens=OVERLAP_TOKENS)  # fmt: skip
        yield indexer, engine
    finally:
        await records.aclose()
        await engine.close()
        shutil.rmtree(directory, ignore_errors=True)


async def in_process(corpus: Corpus, embedder: MiniLMEmbedder) -> dict[str, Any]:
    """One round through the Indexer in this process, into a fresh embedded engine."""
    async with fresh_indexer(embedder) as (indexer, _):
        chunks = errors = 0
        started, cpu_started = time.perf_counter(), time.process_time()
        for batch in batches(corpus.documents):
            for result in await indexer.ingest_many(batch):
                chunks += result.chunks_indexed
                errors += bool(result.error)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return rates(len(corpus.documents), chunks, seconds, cpu_seconds, errors)


async def stages(corpus: Corpus, embedder: MiniLMEmbedder) -> dict[str, Any]:
    """Each stage on its own over the whole corpus, one after the other: seconds and share of their sum."""
    async with fresh_indexer(embedder) as (indexer, engine):
        started = time.perf_counter()
        chunks = [indexer.chunks(d)[0] for d in corpus.documents]
        parse_chunk = time.perf_counter() - started
        made_chunks = [c for cs in chunks for c in cs]
        texts = [indexed_text(c) for c in made_chunks]
        started = time.perf_counter()
        vectors = await embedder.embed_documents(texts)
        embed = time.perf_counter() - started
        sparse = SparseEncoder()
        started = time.perf_counter()
        for text in texts:
            sparse.document(text)
            index_terms(text)
        term_index = time.perf_counter() - started
        read_chunk.cache_clear()  # the rounds before read the same chunks
        started = time.perf_counter()
        readings = [stored_reading(c.text, c.page_title, c.section or "") for c in made_chunks]
        reading = time.perf_counter() - started
        read_chunk.cache_clear()  # the engine write reads each chunk again, as ingest does
        started = time.perf_counter()
        position = 0
        for document, made in zip(corpus.documents, chunks, strict=True):
            source = indexer.source(document)
            indexed = [IndexedChunk(c, v, source) for c, v in zip(made, vectors[position:], strict=False)]
            position += len(made)
            await engine.replace_document(TENANT, document.document_id, indexed)
        engine_write = time.perf_counter() - started
    seconds = {
        "parse_chunk": parse_chunk,
        "embed": embed,
        "term_index": term_index,
        "reading": reading,
        "engine_write_incl_term_index": engine_write,
    }
    total = parse_chunk + embed + engine_write
    return {
        "chunks": len(texts),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "share_of_sum": {k: round(v / total, 3) for k, v in seconds.items()},
        "embed_chunks_per_s": round(len(texts) / embed, 2),
        "reading_bytes_per_chunk": {
            "p50": statistics.median(len(r.encode()) for r in readings),
            "mean": round(statistics.fmean(len(r.encode()) for r in readings), 1),
            "text_p50": statistics.median(len(c.text.encode()) for c in made_chunks),
        },
    }


def median_of(rounds: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [r[key] for r in rounds]
    return {"median": round(statistics.median(values), 2), "min": min(values), "max": max(values)}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    corpora = [pgdocs(args.pages, args.pages_dir) if name == "pgdocs" else demo() for name in args.corpus]
    embedder = MiniLMEmbedder.load(int8=True) if args.int8 else MiniLMEmbedder.load()  # older src on PYTHONPATH: no int8 argument
    await embedder.embed_documents(["warm up"] * 4)
    report: dict[str, Any] = {}
    for corpus in corpora:
        print(f"\n== {corpus.name}: {len(corpus.documents)} documents ==", flush=True)
        rounds: dict[str, list[dict[str, Any]]] = {path: [] for path in args.paths}
        for number in range(args.rounds):
            for path in args.paths:  # interleaved, so that machine noise hits both paths alike
                measured = await (over_grpc(corpus, int8=args.int8) if path == "grpc" else in_process(corpus, embedder))
                rounds[path].append(measured)
                print(f"round {number + 1} {path}: {measured}", flush=True)
        measured_stages = await stages(corpus, embedder)
        print(f"stages: {measured_stages}", flush=True)
        report[corpus.name] = {
            "documents": len(corpus.documents),
            **{
                path: {
                    "chunks_per_s": median_of(r, "chunks_per_s"),
                    "documents_per_s": median_of(r, "documents_per_s"),
                    "chunks_per_cpu_s": median_of(r, "chunks_per_cpu_s"),
                    "rounds": r,
                }
                for path, r in rounds.items()
            },
            "stages": measured_stages,
        }
    return report


def commit() -> str:
    completed = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True)
    return completed.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", choices=["pgdocs", "demo"], default=["pgdocs", "demo"])
    parser.add_argument("--paths", nargs="+", choices=["grpc", "in_process"], default=["grpc", "in_process"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=None, help="the first N pages of the corpus (default: all)")
    parser.add_argument("--pages-dir", type=Path, default=None, help="a folder of .html pages instead of the corpus")
    parser.add_argument("--int8", action="store_true", help="the embedder computes in int8 (RAG_EMBEDDER_INT8)")
    parser.add_argument("--label", default="", help="added to the results file's name (ingest-LABEL-DATE.json)")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    report = asyncio.run(bench(args))
    result = {
        "benchmark": "ingest",
        "what": "chunks and documents indexed per second with the bundled MiniLM embedder, over gRPC into a "
        "`ragsvc serve` and through the Indexer in process; stages timed apart without overlap",
        "code": commit(),
        "settings": {
            "chunk_tokens": CHUNK_TOKENS,
            "overlap_tokens": OVERLAP_TOKENS,
            "batch": INGEST_BATCH,
            "rounds": args.rounds,
            "pages": args.pages,
            "int8": args.int8,
        },
        "corpora": report,
        "machine": machine(load),
    }
    write_result("ingest" + (f"-{args.label}" if args.label else ""), result)


if __name__ == "__main__":
    main()
