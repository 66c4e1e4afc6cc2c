"""Which retrieved chunks the trained reader reads, and in what order: the chunk model.

Retrieval hands the reader a pool of chunks (RAG_READER_POOL, more than the caller's top_k); the chunk model
(LightGBM LambdaRank, evaluated as a numpy forest) scores each from `CHUNK_FEATURES`, and the best top_k, best
first, are what the answer reads, quotes and cites. A chunk's features are read from its candidate sentences' rows
(`features.sentence_features` over the whole pool, the function the sentence model reads): its retrieval rank and
score, the best of its sentences' coverage of the question, whether it states the kind of value asked, its share of
the question's names. Trained on which chunk holds a key fact; on corpora it never saw, it packs the chunk holding the
key fact for 4 more answerable questions in 100 than the retrieval order's top five (docs/reading.md). How sure it
was (`features.Packing`: its scores of the chunks it packed, and their places in retrieval's order) is read by the
answer model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ragsvc.domain import ScoredChunk
from ragsvc.reading.features import SENTENCE_FEATURES, Packing
from ragsvc.reading.forest import Forest
from ragsvc.reading.relevance import Candidate

__all__ = ["CHUNK_FEATURES", "as_read", "chunk_features", "pack"]

# The best value among a chunk's candidate sentences of these sentence features.
_BEST_OF = (
    "cov_sentence",
    "cov_context",
    "cov_scope",
    "cov_heading",
    "own_sentence",
    "names_sentence",
    "best_term_sentence",
    "value_answered",
    "neighbour_cov",
    "default_stated",
    "procedural_tool",
    "yes_no_modal",
    "terms_sentence",
)
# Sentence features that are the chunk's own (the same on each of its sentences), and the question's.
_OF_CHUNK = ("cov_chunk", "names_chunk", "missing_chunk")
_OF_QUESTION = ("question_terms", "has_names", "asks_value", "procedural", "yes_no")

CHUNK_FEATURES = (
    "rank",  # its place in retrieval's order (0 best)
    "score",  # its retrieval score
    "gap",  # the best chunk's retrieval score minus its own
    "candidates",  # log count of its candidate sentences
    "top_document",  # it is of the best-ranked chunk's document
    "document_chunks",  # chunks of its document in the pool
    *(f"best_{name}" for name in _BEST_OF),
    *_OF_CHUNK,
    *_OF_QUESTION,
)
_COLUMN = {name: i for i, name in enumerate(SENTENCE_FEATURES)}


def chunk_features(
    found: Sequence[Candidate], rows: Sequence[Sequence[float]], evidence: Sequence[ScoredChunk]
) -> list[list[float]]:
    """One row of CHUNK_FEATURES per chunk of `evidence`, from its candidates' rows (`found` and `rows` as
    `features.sentence_features` gives them over all of `evidence`)."""
    by_chunk: list[list[Sequence[float]]] = [[] for _ in evidence]
    for candidate, row in zip(found, rows, strict=True):
        by_chunk[candidate.marker - 1].append(row)
    top = evidence[0].score if evidence else 0.0
    documents = [scored.chunk.document_id for scored in evidence]
    question = [rows[0][_COLUMN[name]] if rows else 0.0 for name in _OF_QUESTION]
    table = []
    for place, (scored, own) in enumerate(zip(evidence, by_chunk, strict=True)):
        best = [max((row[_COLUMN[name]] for row in own), default=0.0) for name in _BEST_OF]
        of_chunk = [own[0][_COLUMN[name]] if own else (1.0 if name == "missing_chunk" else 0.0) for name in _OF_CHUNK]
        table.append([
            float(place),
            scored.score,
            top - scored.score,
            math.log1p(len(own)),
            1.0 if documents[place] == documents[0] else 0.0,
            float(documents.count(documents[place])),
            *best,
            *of_chunk,
            *question,
        ])  # fmt: skip
    return table


def pack(model: Forest, table: Sequence[Sequence[float]], limit: int) -> Packing:
    """The `limit` chunks the reader reads (their places in `table`'s pool), best first by `model` (the retrieval
    order on a tie), with `model`'s scores of them."""
    if not table:
        return Packing((), ())
    scores = model.predict(np.asarray(table, dtype=np.float64)).tolist()
    places = sorted(range(len(table)), key=lambda i: (-scores[i], i))[:limit]
    return Packing(tuple(places), tuple(scores[i] for i in places))


def as_read(model: Forest, table: Sequence[Sequence[float]]) -> Packing:
    """Evidence read in its own order, not packed from a pool (a caller's own chunks, a model's budgeted context):
    each chunk its own place, with `model`'s scores."""
    scores = model.predict(np.asarray(table, dtype=np.float64)).tolist() if table else []
    return Packing(tuple(range(len(table))), tuple(scores))
