"""The evidence of every benchmark question, retrieved in process from a corpus's ingested index, for training the
reader: what retrieval hands the reading component, saved once so that features can be recomputed without asking
the engine again.

For each question: the search text (a follow-up condensed by ragsvc's own rule), the top EVIDENCE_K hits as the
retriever ranks them (text, headings, document, score) and the tenant's chunk counts of the search's terms (the
corpus statistics the gate reads).
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
from ragsvc.reading.followups import follow_up_search
from ragsvc.server.components import open_components

EVIDENCE_K = 12  # the reader sees the default top-5; the rest lets it re-rank chunks
ROOT = Path(__file__).resolve().parents[2]
# What the evidence depends on besides the index: the retrieval code and the follow-up rule.
CODE = ("src/ragsvc/retrieval", "src/ragsvc/reading/followups.py", "src/ragsvc/reading/features.py")


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


def search_text(question: Question) -> str:
    """What the server searches for: a follow-up rewritten by rule with its earlier user turns."""
    history = tuple(ChatMessage(Role.USER, turn) for turn in question.history)
    return follow_up_search(question.question, history) if history else question.question


async def collect(data_dir: Path, tenant: str, questions: Sequence[Question]) -> list[dict[str, Any]]:
    """Evidence rows for `questions` from the index in `data_dir` (opened in process, read only)."""
    settings = Settings.of(data_dir=str(data_dir), demo_corpus=False, reader="rules")  # retrieval reads nothing
    rows = []
    async with open_components(settings) as components:
        for question in questions:
            search = search_text(question)
            query = RetrievalQuery(text=search, tenant_id=tenant, top_k=EVIDENCE_K)
            retrieval = await components.retriever.retrieve(query)
            terms = reading_features.counted_terms(search)
            counts = await components.retriever.term_counts(query, terms)
            rows.append(
                {
                    "id": question.id,
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
            )
    return rows


def save(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def load(path: Path) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}
