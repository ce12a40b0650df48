"""``ort_nchwc16`` / ``ort_nchwc8``: mark the float Resize nodes ONNX Runtime's NchwcTransformer
(ORT_ENABLE_ALL, CPU EP, x86-64) rewrites into ``com.microsoft.nchwc.Upsample``.

That rewrite changes the arithmetic of a bilinear Resize (MLAS ``MlasNchwcUpsampleLinear``, whose
weights and summation order differ from upsample.cc; kernels/onnxruntime/float_resize.py), so the
kernel must know which nodes ORT converts.  A Resize is converted only when its data input is
already in NCHWc layout, i.e. produced by a node the transformer converted before it.  The
propagation follows onnxruntime/core/optimizer/nchwc_transformer.cc (block size: MLAS's NCHWc
block, 16 floats with AVX-512F, 8 with AVX2), restricted to float32 tensors:

* MaxPool / AveragePool (one output, 4-D input with a static channel count divisible by the block)
  convert from any input (ORT inserts a ReorderInput);
* Conv with a constant float32 4-D filter (and constant bias) whose group / channel counts the
  transformer accepts converts from any input;
* GlobalMaxPool / GlobalAveragePool, Relu / Sigmoid / Tanh, BatchNormalization, Add / Sum / Mul (all
  inputs NCHWc, one channel count, equal static shapes) and Concat (axis 1, every input NCHWc with
  a block-aligned channel count) stay in NCHWc when their inputs are;
* Resize / Upsample (linear with half_pixel, align_corners or asymmetric; nearest with asymmetric
  and floor) with a constant 4-D integral scale (or sizes an exact multiple of a static input
  shape), batch and channel unscaled, on an NCHWc input: converted, and marked ``_ort_nchwc``.

Measured with onnxruntime 1.32.0: opset-19 AveragePool and Resize convert too (the mirror's source
lists older versions only), and a Resize without a coordinate_transformation_mode attribute (the
half_pixel default) converts.  Nodes not listed (e.g. a Conv fused with its activation into one
NCHWc Conv, which keeps NCHWc as well) are treated as leaving NCHWc; a Resize after them runs ORT's
ordinary kernel here.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..ir import Graph, Node

MARK = "_ort_nchwc"
_KEEP_UNARY = ("GlobalMaxPool", "GlobalAveragePool", "Relu", "Sigmoid", "Tanh", "BatchNormalization")
_LINEAR_CTMS = ("half_pixel", "align_corners", "asymmetric")


def _float4d(graph: Graph, name: str):
    t = graph.tensors.get(name) if name else None
    if t is None or t.dtype != "float32" or t.shape is None or len(t.shape) != 4:
        return None
    return t


def _pool_channels(graph: Graph, n: Node, block: int) -> int | None:
    t = _float4d(graph, n.inputs[0] if n.inputs else "")
    if t is None or len([o for o in n.outputs if o]) != 1 or not t.shape[1] or t.shape[1] % block:
        return None
    return int(t.shape[1])


def _conv_channels(graph: Graph, n: Node, block: int) -> int | None:
    if len(n.inputs) < 2 or _float4d(graph, n.inputs[0]) is None:
        return None
    w = graph.tensors.get(n.inputs[1])
    if w is None or w.const is None or w.dtype != "float32" or np.ndim(w.const) != 4:
        return None
    if len(n.inputs) > 2 and n.inputs[2]:
        b = graph.tensors.get(n.inputs[2])
        if b is None or b.const is None or b.dtype != "float32" or np.shape(b.const) != (w.const.shape[0],):
            return None
    out_c, in_c = int(w.const.shape[0]), int(w.const.shape[1])
    group = int(n.attr("group", 1) or 1)
    if group > 1:
        if out_c % 4:
            return None
        depthwise = in_c == 1 and out_c == group
        if not depthwise and (in_c % block or out_c % group or (out_c // group) % block):
            return None
    elif in_c >= block and in_c % 4:
        return None
    return out_c


def _resize_ok(graph: Graph, n: Node) -> bool:
    mode = str(n.attr("mode", "nearest"))
    ctm = str(n.attr("coordinate_transformation_mode", "half_pixel"))
    if mode == "linear":
        if ctm not in _LINEAR_CTMS:
            return False
    elif mode != "nearest" or ctm != "asymmetric" or str(n.attr("nearest_mode", "round_prefer_floor")) != "floor":
        return False
    x = _float4d(graph, n.inputs[0])
    scales = graph.tensors.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    sizes = graph.tensors.get(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else None
    if sizes is not None:
        if sizes.const is None or np.shape(sizes.const) != (4,) or x is None or any(not d for d in x.shape):
            return False
        sz = [int(v) for v in np.asarray(sizes.const)]
        if any(s % int(d) for s, d in zip(sz, x.shape)):
            return False
        factors = [s // int(d) for s, d in zip(sz, x.shape)]
    elif scales is not None and scales.const is not None and scales.dtype == "float32" \
            and np.shape(scales.const) == (4,):
        sc = np.asarray(scales.const, np.float32)
        factors = [int(v) for v in sc]
        if any(f <= 0 or np.float32(f) != v for f, v in zip(factors, sc)):
            return False
    else:
        return False
    return factors[0] == 1 and factors[1] == 1 and min(factors) >= 1


def _shapes_equal(graph: Graph, names: list[str]) -> bool:
    shapes = [graph.tensors[n].shape if n in graph.tensors else None for n in names]
    return all(s is not None and all(d for d in s) for s in shapes) and len(set(shapes)) == 1


def mark_nchwc_resize(graph: Graph, block: int) -> Graph:
    """A copy of ``graph`` whose Resize nodes ORT converts to NCHWc carry ``_ort_nchwc = block``."""
    nchwc: dict[str, int] = {}  # float tensor in NCHWc layout -> logical channel count
    nodes = []
    for n in graph.nodes:
        out = n.outputs[0] if n.outputs else ""
        ins = [i for i in n.inputs if i]
        channels = None
        if n.op in ("MaxPool", "AveragePool"):
            channels = _pool_channels(graph, n, block)
        elif n.op in ("Conv", "DepthwiseConv"):
            channels = _conv_channels(graph, n, block)
        elif n.op in _KEEP_UNARY and ins and ins[0] in nchwc:
            channels = nchwc[ins[0]]
        elif n.op in ("Add", "Sum", "Mul") and ins and all(i in nchwc for i in ins) \
                and len({nchwc[i] for i in ins}) == 1 and _shapes_equal(graph, ins):
            channels = nchwc[ins[0]]
        elif n.op == "Concat" and int(n.attr("axis", 0)) == 1 and ins and all(i in nchwc for i in ins) \
                and all(nchwc[i] % block == 0 for i in ins):
            channels = sum(nchwc[i] for i in ins)
        elif n.op == "Resize" and ins and ins[0] in nchwc and _resize_ok(graph, n):
            channels = nchwc[ins[0]]
            n = dataclasses.replace(n, attrs={**n.attrs, MARK: block})
        if channels is not None and out and graph.tensors.get(out) is not None \
                and graph.tensors[out].dtype == "float32":
            nchwc[out] = channels
        nodes.append(n)
    return graph.replace(nodes=nodes)


def _pass(block: int) -> Callable[[Graph], Graph]:
    def run(graph: Graph) -> Graph:
        return mark_nchwc_resize(graph, block)
    run.__name__ = f"ort_nchwc{block}"
    return run


ort_nchwc16 = _pass(16)  # MLAS NCHWc block with AVX-512F
ort_nchwc8 = _pass(8)  # with AVX2
