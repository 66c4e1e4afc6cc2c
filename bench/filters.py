"""What a metadata filter expression costs: the embedded engine (qdrant-edge) at 10k chunks (bench/retrieval.py's
synthetic corpus), each chunk's document given metadata (a number `year`, a string `kind`, a timestamp
`published_at`, with their payload indexes), queried as the retriever queries it (hybrid, 15 candidates, tenant and
tags), once without an expression and once with each of EXPRESSIONS; plus parsing and resolving an expression
(`ragsvc.filters`), which the service does once per question that has one.

    python -m bench.filters [--size 10000] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.retrieval import DIMENSION, Corpus, query_latency
from bench.stats import machine, summary, write_result
from ragsvc.domain import MetadataFilter
from ragsvc.filters import parse, resolve
from ragsvc.metadata import MetadataType
from ragsvc.retrieval.edge import EdgeEngine

KEYS = {"year": MetadataType.NUMBER, "kind": MetadataType.STRING, "published_at": MetadataType.TIMESTAMP}
KINDS = ("act", "judgment", "memo", "guide", "faq")
EXPRESSIONS = (
    "year >= 2015",  # about half the documents
    "kind IN (act, judgment) AND published_at >= 2024-01-01",
    "NOT kind = memo AND (year < 2000 OR published_at > 2025-06-30)",
)


async def run(size: int, queries: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    corpus = Corpus(size)
    workdir = Path(tempfile.mkdtemp(prefix="ragsvc-bench-filters-"))
    engine = EdgeEngine.open(workdir / "engine", DIMENSION)
    try:
        for key, kind in KEYS.items():
            await engine.ensure_metadata_index(key, kind)
        for n, (tenant, document_id, chunks) in enumerate(corpus.documents()):
            metadata = {"year": float(1990 + n % 35), "kind": KINDS[n % len(KINDS)],
                        "published_at": datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=37 * n % 2200)}  # fmt: skip
            await engine.replace_document(tenant, document_id, [dataclasses.replace(c, metadata=metadata) for c in chunks])
        plain = corpus.queries(queries)
        results: dict[str, Any] = {"no expression": await query_latency(engine, plain, 120.0)}
        for expression in EXPRESSIONS:
            where = resolve(parse(expression), KEYS)
            filtered = [(dataclasses.replace(q, filters=MetadataFilter(expression=expression, where=where)), d)
                        for q, d in plain]  # fmt: skip
            results[expression] = await query_latency(engine, filtered, 120.0)
    finally:
        await engine.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "what": f"EdgeEngine.query at {size} chunks, hybrid, {len(plain)} queries (5 warm-up), tenant and tag "
                "filter always; the expression on top",
        "query_ms": results,
        "parse_and_resolve_ms": parse_cost(EXPRESSIONS),
        "machine": machine(load_before),
    }  # fmt: skip


def parse_cost(expressions: Sequence[str], rounds: int = 2000) -> dict[str, Any]:
    times = []
    for _ in range(rounds):
        for expression in expressions:
            started = time.perf_counter()
            resolve(parse(expression), KEYS)
            times.append((time.perf_counter() - started) * 1000)
    return summary(times, (0.5, 0.99))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args(argv)
    write_result("filters", asyncio.run(run(args.size, args.queries)))


if __name__ == "__main__":
    main()
