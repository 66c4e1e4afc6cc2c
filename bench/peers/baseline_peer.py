"""The hand-written baseline: qdrant-client (local mode, in memory) and an httpx stream of the OpenAI chat API,
with nothing in between."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import httpx
from qdrant_client import QdrantClient, models

from bench.peers.common import HashingEmbedder, Passage, WorkerConfig, run_worker

COLLECTION = "passages"


class BaselinePeer:
    def __init__(self, config: WorkerConfig, passages: Sequence[Passage], embedder: HashingEmbedder) -> None:
        self.config = config
        self.last_ids: list[str] = []
        self._embedder = embedder
        self.store = QdrantClient(":memory:")
        self.store.create_collection(
            COLLECTION, vectors_config=models.VectorParams(size=embedder.dimension, distance=models.Distance.COSINE)
        )
        vectors = embedder.embed_many([p.text for p in passages])
        self.store.upload_points(
            COLLECTION,
            [
                models.PointStruct(id=i, vector=v, payload={"id": p.id, "tenant": p.tenant, "name": p.name, "text": p.text})
                for i, (p, v) in enumerate(zip(passages, vectors, strict=True))
            ],
        )
        self._http = httpx.Client(base_url=config.llm_base_url, timeout=30)

    def ask(self, query: str, tenant: str) -> Iterator[str]:
        tenant_only = models.Filter(must=[models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))])
        hits = self.store.query_points(
            COLLECTION, query=self._embedder.embed(query), query_filter=tenant_only, limit=self.config.top_k
        ).points
        self.last_ids = [hit.payload["id"] for hit in hits]
        blocks = [
            self.config.passage_text(n, hit.payload["id"], hit.payload["name"], hit.payload["text"])
            for n, hit in enumerate(hits, start=1)
        ]
        body = {
            "model": self.config.model,
            "temperature": self.config.temperature,
            "stream": True,
            "messages": [
                {"role": "system", "content": self.config.system},
                {"role": "user", "content": self.config.user_message(query, blocks)},
            ],
        }
        with self._http.stream("POST", "/chat/completions", json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices") or [{}]
                if content := choices[0].get("delta", {}).get("content"):
                    yield content


if __name__ == "__main__":
    run_worker(BaselinePeer, "qdrant-client", "httpx", "numpy")
