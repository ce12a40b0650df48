"""``ort_matmul_bn_fusion``: ONNX Runtime's level-1 MatmulBNFusion (onnxruntime/core/optimizer/
matmul_bn_fusion.cc): a MatMul whose path to a BatchNormalization runs only through Reshape /
Transpose nodes becomes a Gemm with the normalization folded into B and C; the path nodes stay after
it, the BatchNormalization goes (the last node before it takes its output name).

Conditions (ORT's): the MatMul has one consumer and is not a graph output, A is known to be 2-D, B and
the four BatchNormalization parameters are constants (B 2-D float32, parameters 1-D of B's column
count), every path node has exactly one consumer, the BatchNormalization has no training outputs.
The folded constants, one float32 rounding per operation as ORT's Initializer arithmetic::

    s  = scale / sqrt(var + epsilon)
    B' = B * s[n]                   (per column)
    C  = bn_bias - mean * s

The Gemm then runs as ORT's float Gemm with a constant B and a bias (kernels/onnxruntime/float_gemm.py).
(ORT also requires the epsilon attribute to be written in the model; the loader fills ONNX defaults in,
so a BatchNormalization without one is fused here and not by ORT.)
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .ort_fold import _const, bn_scale_shift
from .rewrite import add_const, splice

F32 = np.float32
_PATH = ("Reshape", "Transpose")


def _bn_path(graph: Graph, mm: Node, consumers: dict) -> list[Node] | None:
    """[path nodes..., BatchNormalization] after ``mm``, or None."""
    path: list[Node] = []
    cur = mm
    while True:
        out = cur.outputs[0]
        cons = consumers.get(out, [])
        if len(cons) != 1 or out in graph.outputs:
            return None
        nxt = cons[0]
        if nxt.op == "BatchNormalization":
            return path + [nxt] if nxt.inputs and nxt.inputs[0] == out else None
        if nxt.op not in _PATH or nxt.inputs[0] != out:
            return None
        path.append(nxt)
        cur = nxt


def ort_matmul_bn_fusion(graph: Graph) -> Graph:
    consumers = graph.consumers()
    tensors = dict(graph.tensors)
    replace: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for mm in graph.nodes:
        if mm.op != "MatMul" or len(mm.inputs) != 2 or mm.name in drop:
            continue
        a = graph.tensors.get(mm.inputs[0])
        b = _const(graph, mm.inputs[1])
        if a is None or a.shape is None or len(a.shape) != 2 or a.dtype != "float32" or b is None or b.ndim != 2:
            continue
        path = _bn_path(graph, mm, consumers)
        if path is None:
            continue
        bn = path[-1]
        params = [_const(graph, i) for i in bn.inputs[1:5]] if len(bn.inputs) >= 5 else [None]
        if any(p is None or p.shape != (b.shape[1],) for p in params) or any(bn.outputs[1:]):
            continue
        scale, bias, mean, var = params
        s, c = bn_scale_shift(bn, scale, bias, mean, var)
        w = (b * s[None, :]).astype(F32)
        wn = add_const(tensors, mm.name + "_MatMulBnFusion_GemmB", w)
        cn = add_const(tensors, mm.name + "_MatMulBnFusion_GemmBias", c)
        last = path[-2] if len(path) > 1 else None
        gemm_out = bn.outputs[0] if last is None else mm.outputs[0]
        gemm = Node(name=mm.name + "_MatMulBnFusion_Gemm", op="Gemm", inputs=[mm.inputs[0], wn, cn],
                    outputs=[gemm_out], attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
                    source_op="MatMul+BatchNormalization (MatmulBNFusion)", index=mm.index)
        replace[mm.name] = [gemm]
        if last is not None:
            replace[last.name] = [Node(name=last.name, op=last.op, inputs=list(last.inputs), outputs=[bn.outputs[0]],
                                       attrs=dict(last.attrs), source_op=last.source_op, index=last.index)]
        drop.add(bn.name)
    return splice(graph, replace, drop, tensors=tensors) if replace else graph
