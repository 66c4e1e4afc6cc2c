"""The retrieval settings (issue 3) parse from the environment and refuse values that make no sense."""

from __future__ import annotations

import pytest

from ragsvc.config import EmbedderKind, Settings
from ragsvc.errors import InvalidRequest


def test_retrieval_settings_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {
            "RAG_QDRANT_URL": "http://qdrant:6333",
            "RAG_QDRANT_PREFER_GRPC": "false",
            "RAG_MAX_CHUNKS_PER_DOC": "2",
            "RAG_CHUNK_OVERLAP_THRESHOLD": "0.95",
            "RAG_RECENCY_WEIGHT": "0.5",
            "RAG_UNTAGGED_CHUNKS_VISIBLE": "no",
            "RAG_EMBEDDER": "ollama",
            "EMBEDDING_DIMENSION": "768",
            "RAG_EDGE_INDEX_AFTER_POINTS": "0",
        }
    )

    retrieval = settings.retrieval
    assert (retrieval.qdrant_url, retrieval.qdrant_prefer_grpc, retrieval.max_chunks_per_doc) == ("http://qdrant:6333", False, 2)
    assert (retrieval.chunk_overlap_threshold, retrieval.recency_weight, retrieval.untagged_visible) == (0.95, 0.5, False)
    assert (retrieval.embedder, retrieval.embedding_dimension, retrieval.edge_index_after_points) == (EmbedderKind.OLLAMA, 768, 0)
    assert retrieval.served_embedding_model == "nomic-embed-text"


def test_retrieval_settings_out_of_range_are_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        Settings.from_env(
            {
                "RAG_EMBEDDER": "word2vec",
                "RAG_MAX_CHUNKS_PER_DOC": "0",
                "RAG_CHUNK_OVERLAP_THRESHOLD": "1.5",
                "RAG_TRUST_WEIGHT": "-1",
                "RAG_EMBEDDING_BATCH_SIZE": "0",
                "EMBEDDING_DIMENSION": "-3",
            }
        )

    assert {v.field for v in caught.value.violations} == {
        "RAG_EMBEDDER",
        "RAG_MAX_CHUNKS_PER_DOC",
        "RAG_CHUNK_OVERLAP_THRESHOLD",
        "RAG_TRUST_WEIGHT",
        "RAG_EMBEDDING_BATCH_SIZE",
        "EMBEDDING_DIMENSION",
    }
