"""The LangChain peer: a `QdrantVectorStore` (qdrant-client local mode, in memory, dense, cosine) and an LCEL
chain ``{context: retriever | format, query} | ChatPromptTemplate | ChatOpenAI | StrOutputParser``, streamed.
The tenant filter is given per question the way LangChain's per-user retrieval guide does it: the retriever's
`search_kwargs` are a configurable field."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import ConfigurableField, RunnablePassthrough
from langchain_openai import ChatOpenAI
from langchain_qdrant import QdrantVectorStore
from qdrant_client import models

from bench.peers.common import HashingEmbedder, Passage, WorkerConfig, run_worker


class HashingEmbeddings(Embeddings):
    """LangChain's embeddings interface over the benchmark's shared embedder."""

    def __init__(self, embedder: HashingEmbedder) -> None:
        self._embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.embed_many(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed(text)


class LangChainPeer:
    def __init__(self, config: WorkerConfig, passages: Sequence[Passage], embedder: HashingEmbedder) -> None:
        self.config = config
        self.last_ids: list[str] = []
        store = QdrantVectorStore.from_documents(
            [Document(p.text, metadata={"id": p.id, "tenant": p.tenant, "name": p.name}) for p in passages],
            HashingEmbeddings(embedder),
            location=":memory:",
            collection_name="passages",
            distance=models.Distance.COSINE,
        )
        self.store = store.client
        retriever = store.as_retriever(search_kwargs={"k": config.top_k}).configurable_fields(
            search_kwargs=ConfigurableField(id="search_kwargs")
        )
        prompt = ChatPromptTemplate.from_messages([("system", config.system), ("human", config.user_template)])
        llm = ChatOpenAI(
            base_url=config.llm_base_url,
            api_key="bench-key",
            model=config.model,
            temperature=config.temperature,
            streaming=True,
        )
        self._chain = (
            {"context": retriever | self._format_docs, "query": RunnablePassthrough()} | prompt | llm | StrOutputParser()
        )

    def ask(self, query: str, tenant: str) -> Iterator[str]:
        tenant_only = models.Filter(must=[models.FieldCondition(key="metadata.tenant", match=models.MatchValue(value=tenant))])
        search_kwargs = {"k": self.config.top_k, "filter": tenant_only}
        yield from self._chain.stream(query, config={"configurable": {"search_kwargs": search_kwargs}})

    def _format_docs(self, docs: list[Document]) -> str:
        self.last_ids = [doc.metadata["id"] for doc in docs]
        return "\n\n".join(
            self.config.passage_text(n, doc.metadata["id"], doc.metadata["name"], doc.page_content)
            for n, doc in enumerate(docs, start=1)
        )


if __name__ == "__main__":
    run_worker(LangChainPeer, "langchain-core", "langchain-openai", "langchain-qdrant", "qdrant-client", "openai")
