"""The Haystack worker: a QdrantDocumentStore (qdrant-client local mode, in memory) and one Pipeline of a text
embedder, a QdrantEmbeddingRetriever with a tenant filter, a ChatPromptBuilder (Jinja2) and an
OpenAIChatGenerator whose streaming callback feeds the answer's tokens to `ask` while the pipeline runs in a
thread."""

from __future__ import annotations

import queue
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage, StreamingChunk
from haystack.utils import Secret
from haystack_integrations.components.retrievers.qdrant import QdrantEmbeddingRetriever
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore

from bench.peers.common import HashingEmbedder, Passage, WorkerConfig, run_worker


@component
class HashingTextEmbedder:
    """A Haystack text embedder delegating to the benchmark's `HashingEmbedder`."""

    def __init__(self, embedder: HashingEmbedder) -> None:
        self.embedder = embedder

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, list[float]]:
        return {"embedding": self.embedder.embed(text)}


def user_template(config: WorkerConfig) -> str:
    """The user message as a Jinja2 template: the job's user template with the retrieved documents rendered as
    its context, one passage block each, best first, separated by a blank line."""
    block = config.passage_template.format(
        marker="{{ loop.index }}", source_id="{{ doc.meta.id }}:0", name="{{ doc.meta.name }}", text="{{ doc.content }}"
    )
    context = "{% for doc in documents %}" + block + "{% if not loop.last %}\n\n{% endif %}{% endfor %}"
    return config.user_template.format(query="{{ query }}", context=context)


class HaystackPeer:
    def __init__(self, config: WorkerConfig, passages: Sequence[Passage], embedder: HashingEmbedder) -> None:
        self.last_ids: list[str] = []
        store = QdrantDocumentStore(":memory:", embedding_dim=embedder.dimension, similarity="cosine", progress_bar=False)
        vectors = embedder.embed_many([p.text for p in passages])
        store.write_documents(
            [
                Document(content=p.text, meta={"id": p.id, "tenant": p.tenant, "name": p.name}, embedding=v)
                for p, v in zip(passages, vectors, strict=True)
            ]
        )
        self.store = store._client  # the qdrant-client instance, made by the first write (no public accessor)
        pipeline = Pipeline()
        pipeline.add_component("embedder", HashingTextEmbedder(embedder))
        pipeline.add_component("retriever", QdrantEmbeddingRetriever(document_store=store, top_k=config.top_k))
        pipeline.add_component(
            "prompt_builder",
            ChatPromptBuilder(template=[ChatMessage.from_system(config.system), ChatMessage.from_user(user_template(config))]),
        )
        pipeline.add_component(
            "llm",
            OpenAIChatGenerator(
                api_key=Secret.from_token("bench-key"),
                api_base_url=config.llm_base_url,
                model=config.model,
                generation_kwargs={"temperature": config.temperature},
            ),
        )
        pipeline.connect("embedder.embedding", "retriever.query_embedding")
        pipeline.connect("retriever.documents", "prompt_builder.documents")
        pipeline.connect("prompt_builder.prompt", "llm.messages")
        self._pipeline = pipeline
        self._runner = ThreadPoolExecutor(max_workers=1)

    def ask(self, query: str, tenant: str) -> Iterator[str]:
        tokens: queue.SimpleQueue[str | None] = queue.SimpleQueue()

        def on_chunk(chunk: StreamingChunk) -> None:
            if chunk.content:
                tokens.put(chunk.content)

        def run() -> dict[str, Any]:
            try:
                return self._pipeline.run(
                    {
                        "embedder": {"text": query},
                        "retriever": {"filters": {"field": "meta.tenant", "operator": "==", "value": tenant}},
                        "prompt_builder": {"query": query},
                        "llm": {"streaming_callback": on_chunk},
                    },
                    include_outputs_from={"retriever"},
                )
            finally:
                tokens.put(None)

        answered = self._runner.submit(run)
        while (token := tokens.get()) is not None:
            yield token
        self.last_ids = [doc.meta["id"] for doc in answered.result()["retriever"]["documents"]]


if __name__ == "__main__":
    run_worker(HaystackPeer, "haystack-ai", "qdrant-haystack", "qdrant-client", "openai")
