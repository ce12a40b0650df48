"""``ort_conv_fold``: ONNX Runtime's level-1 rewrite rules that fold a constant BatchNormalization,
Mul or Add into the float Conv before it (onnxruntime/core/optimizer/conv_bn_fusion.cc,
conv_mul_fusion.cc, conv_add_fusion.cc; every level from ORT_ENABLE_BASIC up).

The folded weights and bias are new float32 constants, computed as ORT's Initializer arithmetic does
(one float32 rounding per elementwise operation, no fused multiply-add)::

    BatchNormalization:  s  = scale / sqrt(var + epsilon)
                         W' = W * s[o]
                         B' = (B - mean) * s + bn_bias          (without a Conv bias: bn_bias - mean * s)
    Mul by m (scalar or one value per output channel):  W' = W * m[o];  B' = B * m[o]
    Add of a (one value per output channel):            B' = B + a     (without a Conv bias: a)

A Conv qualifies when its filter (rank > 2) and bias are float32 constants, its output feeds exactly
one node and is not a graph output; the BatchNormalization's four parameters must be constants of
the filter's output-channel count (no training outputs), the Mul's / Add's *second* input a constant
of shape () (Mul only), (C, 1, ...) or (1, C, 1, ...).  The rules repeat until nothing folds, so a
Conv -> BatchNormalization -> Mul chain folds both, in graph order, as ORT's rule loop does.  Measured
with onnxruntime 1.32.0 at opsets 13, 15 and 22 (tests/conformance/test_ort_float_nchwc.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node
from .rewrite import add_const

F32 = np.float32


def _const(graph: Graph, name: str):
    t = graph.tensors.get(name) if name else None
    if t is None or t.const is None or t.dtype != "float32":
        return None
    return np.asarray(t.const, F32)


def _per_channel(v: np.ndarray, w: np.ndarray, scalar_ok: bool) -> np.ndarray | None:
    """``v`` as one value per output channel of ``w`` (ORT's axis rule), or None."""
    if v.ndim == 0:
        return np.full(w.shape[0], v, F32) if scalar_ok else None
    if v.ndim == w.ndim:
        axis = 1
    elif v.ndim == w.ndim - 1:
        axis = 0
    else:
        return None
    if v.shape[axis] != w.shape[0] or any(d != 1 for i, d in enumerate(v.shape) if i != axis):
        return None
    return v.reshape(-1)


def bn_scale_shift(bn: Node, scale, bias, mean, var) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) of a constant BatchNormalization as ORT's Initializer arithmetic folds it, one float32
    rounding per operation: s = scale / sqrt(var + epsilon), t = bias - mean * s (ConvBNFusion,
    MatmulBNFusion, the NchwcTransformer's depthwise rewrite)."""
    s = (scale / np.sqrt((var + F32(bn.attr("epsilon", 1e-5))).astype(F32))).astype(F32)
    return s, (bias - (mean * s).astype(F32)).astype(F32)


def _fold(graph: Graph, conv: Node, nxt: Node, w: np.ndarray, b: np.ndarray | None):
    """(W', B') of folding ``nxt`` into the Conv, or None when ORT's rule does not apply."""
    if nxt.op == "BatchNormalization":
        if any(o for o in nxt.outputs[1:]) or int(nxt.attr("training_mode", 0) or 0):
            return None
        if len(nxt.inputs) < 5 or nxt.inputs[0] != conv.outputs[0]:
            return None
        params = [_const(graph, name) for name in nxt.inputs[1:5]]
        if any(p is None or p.ndim != 1 or p.shape[0] != w.shape[0] for p in params):
            return None
        scale, bias, mean, var = params
        s, t = bn_scale_shift(nxt, scale, bias, mean, var)
        w2 = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(F32)
        if b is None:
            return w2, t
        return w2, ((((b - mean).astype(F32)) * s).astype(F32) + bias).astype(F32)
    if nxt.op in ("Mul", "Add") and len(nxt.inputs) == 2 and nxt.inputs[0] == conv.outputs[0]:
        c = _const(graph, nxt.inputs[1])
        v = None if c is None else _per_channel(c, w, scalar_ok=nxt.op == "Mul")
        if v is None:
            return None
        if nxt.op == "Mul":
            w2 = (w * v.reshape((-1,) + (1,) * (w.ndim - 1))).astype(F32)
            return w2, None if b is None else (b * v).astype(F32)
        return w, v.copy() if b is None else (b + v).astype(F32)
    return None


def ort_conv_fold(graph: Graph) -> Graph:
    nodes = list(graph.nodes)
    tensors = dict(graph.tensors)
    changed = False
    i = 0
    while i < len(nodes):
        conv = nodes[i]
        i += 1
        if conv is None or conv.op not in ("Conv", "DepthwiseConv") or len(conv.inputs) < 2 or len(conv.outputs) != 1 \
                or (conv.attr("layout") or "NCHW") != "NCHW" or (conv.attr("weight_layout") or "OIHW") != "OIHW":
            continue
        while True:
            g = graph.replace(nodes=[n for n in nodes if n is not None], tensors=tensors)
            w = _const(g, conv.inputs[1])
            b = _const(g, conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
            has_b = len(conv.inputs) > 2 and bool(conv.inputs[2])
            out = conv.outputs[0]
            users = g.consumers().get(out, [])
            if w is None or w.ndim <= 2 or (has_b and (b is None or b.shape != (w.shape[0],))) \
                    or len(users) != 1 or out in g.outputs:
                break
            nxt = users[0]
            folded = _fold(g, conv, nxt, w, b)
            if folded is None:
                break
            w2, b2 = folded
            ins = list(conv.inputs) + [""] * (3 - len(conv.inputs))
            if w2 is not w:
                ins[1] = add_const(tensors, f"{conv.name}_{nxt.op}_W", w2)
            if b2 is not None:
                ins[2] = add_const(tensors, f"{conv.name}_{nxt.op}_B", b2)
            conv = dataclasses.replace(conv, inputs=ins if ins[2] else ins[:2], outputs=[nxt.outputs[0]])
            nodes[i - 1] = conv
            nodes[nodes.index(nxt)] = None
            changed = True
    if not changed:
        return graph
    return graph.replace(nodes=[n for n in nodes if n is not None], tensors=tensors)
