"""How often retrieval hands the reader what it needs: for each corpus's answerable questions, the share whose key
fact is in a chunk among retrieval's first 5, 8 (RAG_READER_POOL, what the chunk model chooses the answer's five
from) and 12 (kf@k), and whose expected document is among the first 5 (doc@5); and retrieval's time per query in
process (the embedder and the engine query, p50).

    .venv/bin/python -m bench.quality.keyfacts [--corpus NAME ...] [--out results.json]

Each corpus's index is `make eval`'s (bench/quality/server.py's cache, ingested first when missing: point
EVAL_INDEX_DIR elsewhere to build indexes of other ingest code without touching the shared cache), copied into a
temporary directory and opened in process with the server's own retriever (`open_engine`, `HybridRetriever`) and
settings. A question counts its first search only (follow-ups are the reader's business); kf@12 comes from a
retrieval of top_k 12, the others from one of top_k 8, as the server retrieves for a pool of eight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.quality import corpus
from bench.quality.metrics import contains
from bench.quality.questions import Question
from bench.quality.questions import load as load_questions
from bench.quality.server import cached_index
from ragsvc.config import Settings
from ragsvc.domain import RetrievalQuery
from ragsvc.retrieval.hybrid import HybridRetriever
from ragsvc.server.components import open_embedder, open_engine

CORPORA = ("pgdocs", "pydocs", "httpd", "handbook", "sqlite", "gitdocs", "djangodocs", "postfix", "borgdocs", "zshdocs")
POOL = 8  # RAG_READER_POOL's default
WIDE = 12


def holds_key_fact(text: str, question: Question) -> bool:
    return any(contains(text, fact) for fact in question.key_facts)


async def measure(name: str, work: Path) -> dict[str, Any]:
    """kf@5/8/12, doc@5 and the p50 retrieval time of corpus `name`'s answerable questions."""
    spec = corpus.get(name)
    pages = corpus.load_pages(spec, corpus.fetch(spec).html_dir)
    cached, manifest = await cached_index(pages, spec.tenant)
    data_dir = work / name
    shutil.copytree(cached / "data", data_dir)
    settings = Settings.of(data_dir=str(data_dir), demo_corpus=False, reader="rules")
    embedder = await open_embedder(settings)
    engine = await open_engine(settings, embedder, injected=False)
    retriever = HybridRetriever(embedder, engine, settings.retrieval)
    asked = [q for q in load_questions(spec.questions_file) if q.kind == "answerable"]
    counts = dict.fromkeys(("kf@5", "kf@8", "kf@12", "doc@5", "doc@8"), 0)
    times: list[float] = []
    misses = []
    try:
        for question in asked:
            started = time.perf_counter()
            pool = (await retriever.retrieve(RetrievalQuery(text=question.question, tenant_id=spec.tenant, top_k=POOL))).hits
            times.append((time.perf_counter() - started) * 1000)
            wide = (await retriever.retrieve(RetrievalQuery(text=question.question, tenant_id=spec.tenant, top_k=WIDE))).hits
            found = [holds_key_fact(hit.chunk.text, question) for hit in pool]
            counts["kf@5"] += any(found[:5])
            counts["kf@8"] += any(found)
            counts["kf@12"] += any(holds_key_fact(hit.chunk.text, question) for hit in wide)
            counts["doc@5"] += any(hit.chunk.document_id in question.expected_documents for hit in pool[:5])
            counts["doc@8"] += any(hit.chunk.document_id in question.expected_documents for hit in pool)
            if not any(found):
                misses.append({"id": question.id, "hits": [f"{h.chunk.document_id}#{h.chunk.chunk_index}" for h in pool]})
    finally:
        await engine.close()
        await embedder.aclose()
    return {
        "questions": len(asked),
        "chunks": manifest["chunks"],
        "index": manifest["key"],
        **{k: round(100 * v / len(asked), 1) for k, v in counts.items()},
        "retrieve_p50_ms": round(statistics.median(times), 2),
        "kf8_misses": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ragsvc-keyfacts-") as work:
        for name in args.corpus or CORPORA:
            results[name] = asyncio.run(measure(name, Path(work)))
            row = {k: v for k, v in results[name].items() if k != "kf8_misses"}
            print(name, json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
