from __future__ import annotations

import numpy as np
import pytest

from ragsvc.errors import EmbeddingFailed
from ragsvc.retrieval.embedders import MiniLMEmbedder


async def test_query_vectors_have_384_unit_norm_dimensions(embedder: MiniLMEmbedder) -> None:
    vector = await embedder.embed_query("How do I reset my password?")

    assert embedder.dimension == 384
    assert len(vector) == 384
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: MiniLMEmbedder) -> None:
    query = await embedder.embed_query("How can I get my money back after buying a subscription?")
    paraphrase, unrelated = await embedder.embed_documents(
        [
            "Refunds for subscriptions are issued within 14 days of purchase.",
            "The lighthouse keeper painted the stairs blue last spring.",
        ]
    )

    assert np.dot(query, paraphrase) > np.dot(query, unrelated) + 0.2


async def test_a_batch_embeds_each_text_as_alone_and_keeps_the_order(embedder: MiniLMEmbedder) -> None:
    texts = [
        "A long passage about configuring the backup schedule of the storage cluster. " * 6,
        "Short one.",
        "Medium length sentence about invoices and payment terms.",
    ]

    batch = await embedder.embed_documents(texts)
    singles = [await embedder.embed_query(text) for text in texts]

    assert len(batch) == 3
    for together, alone in zip(batch, singles, strict=True):
        assert np.allclose(together, alone, atol=1e-4)


async def test_text_beyond_256_tokens_is_truncated_not_rejected(embedder: MiniLMEmbedder) -> None:
    long_text = "backup " * 2000

    (vector,) = await embedder.embed_documents([long_text])
    prefix = await embedder.embed_query("backup " * 300)

    assert np.dot(vector, prefix) == pytest.approx(1.0, abs=1e-4)


async def test_no_texts_give_no_vectors(embedder: MiniLMEmbedder) -> None:
    assert await embedder.embed_documents([]) == []


async def test_a_failure_is_reported_as_embedding_failed(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(EmbeddingFailed):
        await embedder.embed_documents([None])  # type: ignore[list-item]
