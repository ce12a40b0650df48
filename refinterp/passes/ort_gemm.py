"""``ort_matmul_add``: ONNX Runtime's MatMulAddFusion (onnxruntime/core/optimizer/matmul_add_fusion.cc,
ORT_ENABLE_BASIC and up) for float MatMuls with a 2-D B, constant or run-time.

A float32 MatMul whose output feeds exactly one node, an Add, and is not a graph output, becomes
``Gemm(A, B, bias)`` (alpha = beta = 1) with the Add's other input as the bias when that bias is
1-D of length N, or, for a 2-D A, (1, N), (M, 1) or (M, N).  An A of another rank must have a
static shape: it is reshaped to (M, K) before the Gemm and the result back to A's leading dims + N
(the bias then 1-D only).  The Gemm then runs ORT's packed-B order with C through the kernel
(kernels/onnxruntime/float_gemm.py), which differs from MatMul-then-Add on about a third of the
values; with a run-time B (its dimensions known) the unpacked SGEMM with the bias as C.  Measured with
onnxruntime 1.32.0 (tests/conformance/test_ort_float_ops.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, TensorInfo
from .rewrite import add_const, splice, unique_name


def _shape(graph: Graph, name: str):
    t = graph.tensors.get(name) if name else None
    return None if t is None else t.shape


def _bias_ok(bias_shape, a_shape, n: int, reshape: bool) -> bool:
    if bias_shape is None:
        return False
    if len(bias_shape) == 1:
        return bias_shape[0] == n
    if reshape or len(bias_shape) != 2:
        return False
    return (bias_shape[0] == 1 and bias_shape[1] == n) or \
        (bias_shape[0] == a_shape[0] and bias_shape[0] is not None and bias_shape[1] in (1, n))


def ort_matmul_add(graph: Graph) -> Graph:
    consumers = graph.consumers()
    tensors = dict(graph.tensors)
    replace: dict[str, list[Node]] = {}  # Add node name -> nodes that take its place
    drop: set[str] = set()
    for n in graph.nodes:
        if n.op != "MatMul" or len(n.inputs) != 2 or len(n.outputs) != 1:
            continue
        out = n.outputs[0]
        users = consumers.get(out, [])
        if len(users) != 1 or out in graph.outputs or users[0].op != "Add" or len(users[0].inputs) != 2:
            continue
        add = users[0]
        a, b = n.inputs
        ta, tb = graph.tensors.get(a), graph.tensors.get(b)
        if ta is None or tb is None or ta.dtype != "float32" or tb.dtype != "float32" \
                or ta.quant is not None or tb.quant is not None or ta.shape is None:
            continue
        b_shape = np.shape(tb.const) if tb.const is not None else tb.shape
        if b_shape is None or len(b_shape) != 2:
            continue
        bias = add.inputs[1] if add.inputs[0] == out else add.inputs[0]
        tbias = graph.tensors.get(bias)
        if tbias is None or tbias.dtype != "float32" or tbias.quant is not None or add.inputs[0] == add.inputs[1]:
            continue
        a_shape = tuple(ta.shape)
        reshape = len(a_shape) != 2
        if any(not isinstance(d, int) or d < 0 for d in b_shape):
            continue  # (ORT compares symbolic dims too; not modelled: left unfused)
        k, nn = (int(d) for d in b_shape)
        if reshape and (not a_shape or any(not isinstance(d, int) or d < 0 for d in a_shape) or a_shape[-1] != k):
            continue
        if not _bias_ok(tuple(tbias.shape) if tbias.shape is not None else None, a_shape, nn, reshape):
            continue
        y = add.outputs[0]
        if not reshape:
            new = [Node(name=n.name, op="Gemm", inputs=[a, b, bias], outputs=[y], attrs={},
                        source_op="MatMul+Add", index=n.index)]
        else:
            m = int(np.prod(a_shape[:-1]))
            s_in = add_const(tensors, n.name + "_gemm_input_shape", np.array([m, k], np.int64))
            s_out = add_const(tensors, n.name + "_gemm_output_shape", np.array(list(a_shape[:-1]) + [nn], np.int64))
            a2 = unique_name(tensors, n.name + "_gemm_input")
            tensors[a2] = TensorInfo(a2, (m, k), "float32")
            g2 = unique_name(tensors, n.name + "_gemm_output")
            tensors[g2] = TensorInfo(g2, (m, nn), "float32")
            new = [Node(name=n.name + "_gemm_input_reshape", op="Reshape", inputs=[a, s_in], outputs=[a2],
                        attrs={"allowzero": 0}, source_op="Reshape", index=n.index),
                   Node(name=n.name, op="Gemm", inputs=[a2, b, bias], outputs=[g2], attrs={},
                        source_op="MatMul+Add", index=n.index),
                   Node(name=n.name + "_gemm_output_reshape", op="Reshape", inputs=[g2, s_out], outputs=[y],
                        attrs={"allowzero": 0}, source_op="Reshape", index=n.index)]
        replace[add.name] = new
        drop.add(n.name)
    return splice(graph, replace, drop, tensors=tensors)
