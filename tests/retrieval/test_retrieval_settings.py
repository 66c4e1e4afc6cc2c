"""The retrieval settings (issue 3) parse from the environment and refuse values that make no sense."""

from __future__ import annotations

import pytest

from ragsvc.config import Settings
from ragsvc.errors import InvalidRequest


def test_retrieval_settings_come_from_the_environment() -> None:
    settings = Settings.from_env({
        "RAG_QDRANT_URL": "http://qdrant:6333", "RAG_QDRANT_PREFER_GRPC": "false", "RAG_MAX_CHUNKS_PER_DOC": "2",
        "RAG_CHUNK_OVERLAP_THRESHOLD": "0.95", "RAG_RECENCY_WEIGHT": "0.5", "RAG_UNTAGGED_CHUNKS_VISIBLE": "no",
        "RAG_EMBEDDER": "ollama", "EMBEDDING_DIMENSION": "768", "RAG_EDGE_INDEX_AFTER_POINTS": "0",
    })  # fmt: skip

    assert (settings.qdrant_url, settings.qdrant_prefer_grpc, settings.max_chunks_per_doc) == (
        "http://qdrant:6333", False, 2
    )  # fmt: skip
    assert (settings.chunk_overlap_threshold, settings.recency_weight, settings.untagged_visible) == (0.95, 0.5, False)
    assert (settings.embedder, settings.embedding_dimension, settings.edge_index_after_points) == ("ollama", 768, 0)


def test_retrieval_settings_out_of_range_are_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env({
            "RAG_EMBEDDER": "word2vec", "RAG_MAX_CHUNKS_PER_DOC": "0", "RAG_CHUNK_OVERLAP_THRESHOLD": "1.5",
            "RAG_TRUST_WEIGHT": "-1", "RAG_EMBEDDING_BATCH_SIZE": "0", "EMBEDDING_DIMENSION": "-3",
        })  # fmt: skip

    assert {v.field for v in caught.value.violations} == {
        "RAG_EMBEDDER", "RAG_MAX_CHUNKS_PER_DOC", "RAG_CHUNK_OVERLAP_THRESHOLD", "RAG_TRUST_WEIGHT",
        "RAG_EMBEDDING_BATCH_SIZE", "EMBEDDING_DIMENSION",
    }  # fmt: skip
