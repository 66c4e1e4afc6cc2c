"""What an in-process training script needs from the benchmark: a corpus's ingested index and its questions.

    from bench.quality import datasets
    data_dir = datasets.ingested_data_dir("pydocs")   # a RAG_DATA_DIR holding the corpus in tenant "pydocs"
    labelled = datasets.questions("pydocs")           # list[bench.quality.questions.Question]

The index is the one `make eval` serves the corpus from (same cache, same key), so a model trained on it reads
the chunks the benchmark's server retrieves.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.quality import corpus
from bench.quality import questions as question_set
from bench.quality.server import cached_index

__all__ = ["ingested_data_dir", "questions"]


def ingested_data_dir(name: str, *, fresh: bool = False) -> Path:
    """The RAG_DATA_DIR of corpus `name` ingested into its tenant (`corpus.get(name).tenant`), from the benchmark's
    index cache: the package is fetched and the pages ingested over gRPC by a `ragsvc serve` child process first
    when the cache has no index for this corpus and this ingestion code (minutes). The directory is the cache
    itself: open it read-only, or copy it before anything may write to it. Not from inside a running event loop."""
    spec = corpus.get(name)
    pages = corpus.load_pages(spec, corpus.fetch(spec).html_dir)
    cached, _ = asyncio.run(cached_index(pages, spec.tenant, fresh=fresh))
    return cached / "data"


def questions(name: str) -> list[question_set.Question]:
    """Every labelled question of corpus `name` (bench/quality/corpora/<name>/questions.jsonl), both splits."""
    return question_set.load(corpus.get(name).questions_file)
