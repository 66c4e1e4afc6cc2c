"""The packaged MiniLM graph rewritten to compute with its stored int8 weights (`RAG_EMBEDDER_INT8`; see
retrieval/embedders.py for what it buys and costs). Kept apart from the embedder so that the `onnx` package is
imported only when int8 compute is asked for."""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper


def rewritten(model: bytes) -> bytes:
    """The serialized `model` computing with its int8 weights (`int8_compute`)."""
    return int8_compute(onnx.load_from_string(model)).SerializeToString()


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
        nodes.append(
            helper.make_node(
                "MatMulIntegerToFloat",
                [x_u8, values, x_scale, column_scales.name, x_zero],
                list(node.output),
                name=f"{node.name}_int8",
                domain="com.microsoft",
            )
        )
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
