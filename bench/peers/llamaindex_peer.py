"""The LlamaIndex peer: a `VectorStoreIndex` over LlamaIndex's Qdrant vector store (qdrant-client local mode, in
memory), one `TextNode` per passage, a per-query `MetadataFilters` on the tenant, and a streaming
`RetrieverQueryEngine` ("compact" response mode, chat text-QA template) calling the LLM through `OpenAILike`. A node
postprocessor renders each retrieved node as the shared passage block, so the LLM gets the shared prompt."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast

from llama_index.core import StorageContext, VectorStoreIndex, get_response_synthesizer
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import ChatPromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores import MetadataFilter, MetadataFilters
from llama_index.llms.openai_like import OpenAILike
from llama_index.vector_stores.qdrant import QdrantVectorStore
from pydantic import PrivateAttr
from qdrant_client import QdrantClient

from bench.peers.common import HashingEmbedder, Passage, WorkerConfig, run_worker

METADATA_KEYS = ["id", "tenant", "name"]


class HashingEmbedding(BaseEmbedding):
    """LlamaIndex's embedding interface over the shared `HashingEmbedder`."""

    _embedder: HashingEmbedder = PrivateAttr()

    def __init__(self, embedder: HashingEmbedder) -> None:
        super().__init__(model_name="hashing")
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._embedder.embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.embed(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed_many(texts)


class PassageBlocks(BaseNodePostprocessor):
    """Replaces each node's text by its passage block (marker from 1, best first). The nodes' metadata is excluded
    from their LLM content, so the context is exactly the blocks joined by a blank line."""

    _config: WorkerConfig = PrivateAttr()

    def __init__(self, config: WorkerConfig) -> None:
        super().__init__()
        self._config = config

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        for marker, hit in enumerate(nodes, start=1):
            meta = hit.node.metadata
            hit.node.set_content(self._config.passage_text(marker, meta["id"], meta["name"], hit.node.get_content()))
        return nodes


class LlamaIndexPeer:
    def __init__(self, config: WorkerConfig, passages: Sequence[Passage], embedder: HashingEmbedder) -> None:
        self.config = config
        self.last_ids: list[str] = []
        nodes = [
            TextNode(
                text=p.text,
                metadata={"id": p.id, "tenant": p.tenant, "name": p.name},
                excluded_embed_metadata_keys=METADATA_KEYS,
                excluded_llm_metadata_keys=METADATA_KEYS,
            )
            for p in passages
        ]
        self.store = QdrantClient(location=":memory:")
        store = QdrantVectorStore(client=self.store, collection_name="passages")
        self._index = VectorStoreIndex(
            nodes,
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=HashingEmbedding(embedder),
        )
        llm = OpenAILike(
            api_base=config.llm_base_url,
            api_key="bench-key",
            model=config.model,
            temperature=config.temperature,
            is_chat_model=True,
            context_window=16384,
        )
        text_qa = ChatPromptTemplate(
            [
                ChatMessage(role=MessageRole.SYSTEM, content=config.system),
                ChatMessage(role=MessageRole.USER, content=config.user_template),
            ],
            template_var_mappings={"query_str": "query", "context_str": "context"},
        )
        self._synthesizer = get_response_synthesizer(
            llm=llm, text_qa_template=text_qa, response_mode=ResponseMode.COMPACT, streaming=True
        )
        self._blocks = PassageBlocks(config)

    def ask(self, query: str, tenant: str) -> Iterator[str]:
        retriever = self._index.as_retriever(
            similarity_top_k=self.config.top_k,
            filters=MetadataFilters(filters=[MetadataFilter(key="tenant", value=tenant)]),
        )
        engine = RetrieverQueryEngine(retriever, self._synthesizer, node_postprocessors=[self._blocks])
        response = cast(StreamingResponse, engine.query(query))  # streaming=True
        self.last_ids = [hit.node.metadata["id"] for hit in response.source_nodes]
        yield from response.response_gen


if __name__ == "__main__":
    run_worker(
        LlamaIndexPeer, "llama-index-core", "llama-index-vector-stores-qdrant", "llama-index-llms-openai-like", "qdrant-client"
    )
