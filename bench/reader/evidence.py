"""The evidence of every benchmark question, retrieved in process from a corpus's ingested index, for training the
reader: what retrieval hands the reading component, saved once so that features can be recomputed without asking
the engine again.

For each question, each search the server makes for it (`searches`: a follow-up is searched as the rule rewrites it
and again after its earlier questions): the search text, the top EVIDENCE_K hits as the retriever ranks them (text,
headings, document, score) and the tenant's chunk counts of the search's terms (the corpus statistics the gate
reads). A follow-up's second search is stored under "alternatives"; the reader keeps whichever it judges likelier to
answer, as the pipeline does (`Pipeline._best_read`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.quality.questions import Question
from ragsvc.config import Settings
from ragsvc.domain import ChatMessage, RetrievalQuery, Role
from ragsvc.reading import features as reading_features
from ragsvc.reading.followups import follow_up_searches
from ragsvc.server.components import open_components

EVIDENCE_K = 8  # RAG_READER_POOL's default: the chunk model chooses the default top-5 among them
ROOT = Path(__file__).resolve().parents[2]
# What the evidence depends on besides the index: the retrieval code, the follow-up rule and this collection.
CODE = (
    "src/ragsvc/retrieval",
    "src/ragsvc/reading/followups.py",
    "src/ragsvc/reading/features.py",
    "bench/reader/evidence.py",
)


def key(data_dir: Path, questions: Sequence[Question]) -> str:
    """Names the evidence of `questions` from the index in `data_dir` as this code retrieves it."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode())
    for question in questions:
        digest.update(f"{question.id}\0{question.question}\0{question.history}\n".encode())
    for entry in CODE:
        path = ROOT / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:12]


def searches(question: Question) -> tuple[str, ...]:
    """What the server searches for: the question, or a follow-up as the rule rewrites it with its earlier user
    turns and, when that differs, after those turns word for word (`follow_up_searches`)."""
    history = tuple(ChatMessage(Role.USER, turn) for turn in question.history)
    return follow_up_searches(question.question, history) if history else (question.question,)


async def collect(data_dir: Path, tenant: str, questions: Sequence[Question]) -> list[dict[str, Any]]:
    """Evidence rows for `questions` from the index in `data_dir` (opened in process, read only)."""
    settings = Settings.of(data_dir=str(data_dir), demo_corpus=False, reader="rules")  # retrieval reads nothing
    rows = []
    async with open_components(settings) as components:

        async def searched(search: str) -> dict[str, Any]:
            query = RetrievalQuery(text=search, tenant_id=tenant, top_k=EVIDENCE_K)
            retrieval = await components.retriever.retrieve(query)
            counts = await components.retriever.term_counts(query, reading_features.counted_terms(search))
            return {
                "search": search,
                "hits": [
                    {
                        "document_id": s.chunk.document_id,
                        "chunk_index": s.chunk.chunk_index,
                        "text": s.chunk.text,
                        "section": s.chunk.section,
                        "page_title": s.chunk.page_title,
                        "score": s.score,
                    }
                    for s in retrieval.hits
                ],
                "chunks": counts.chunks,
                "frequencies": counts.frequencies,
            }

        for question in questions:
            first, *others = searches(question)
            rows.append({"id": question.id, **await searched(first), "alternatives": [await searched(s) for s in others]})
    return rows


def save(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def load(path: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}
