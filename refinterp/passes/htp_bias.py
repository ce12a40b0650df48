"""A float bias on a QDQ Conv / Gemm becomes an int32 one before the QNN EP sees the graph.

ONNX Runtime's level-1 graph transformer ``WeightBiasQuantization`` (onnxruntime 1.32.0, run for every execution
provider) rewrites a Conv or Gemm whose first two inputs are DequantizeLinear outputs and whose bias is a 1-D float
initializer: the bias becomes DequantizeLinear(Cast<int32>(Round(b / s)), s) with s = s_x * s_w (a float32 Mul:
per tensor, or per output channel when the weights' scales are per channel on the output axis -- Conv axis 0, Gemm
axis 1 without transB, 0 with it), Round half to even on the float32 quotient; the input's scale must be one value.
The node is then an ordinary QDQ unit, and the HTP treats that bias as any other (kernels/qnn_htp/gemm.py).
Measured (onnxruntime-qnn 2.7.0, v68 and v73, 3x3 layers with per-tensor and per-channel weights, float biases off
the grid by up to half a step, half-way quotients among them; tests/conformance/test_qnn_htp_float_bias.py): 0 codes
off with the bias quantized so; rounded half up, truncated or floored it misses codes.  A quantize_static
model of torchvision's SqueezeNet 1.1 has such biases on the Conv layers that share their input's DequantizeLinear.

ORT also removes Identity nodes before that (IdentityElimination): a bias read through Identity (the exporter shares
equal constants so: torchvision's untrained SqueezeNet has every Conv bias read from the first layer's through
Identity, after quantize_static from that layer's DequantizeLinear) is read from its source here; an int32 one of
zeros on that layer's scale then runs as no bias (kernels/qnn_htp/gemm_plan.py ``ort_plan``).  get_qnn_qdq_config
quantizes such a shared bias like a weight instead (uint16 at a16), and the HTP computes that Conv otherwise even
with every code 0 (a SqueezeNet's first layer: 30% of the codes 1-2 off the rule without a bias): no QDQ unit,
refused as before.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, TensorInfo

_INT32 = (-2 ** 31, 2 ** 31 - 1)


def _const(tensors: dict, name: str) -> np.ndarray | None:
    t = tensors.get(name) if name else None
    return None if t is None or t.const is None else np.asarray(t.const)


def _bias_scale(n: Node, dx: Node, dw: Node, tensors: dict, size: int) -> np.ndarray | None:
    """s_x * s_w as ORT's Mul computes it (float32), or None when the transformer leaves the node alone."""
    sx = _const(tensors, dx.inputs[1]) if len(dx.inputs) > 1 else None
    sw = _const(tensors, dw.inputs[1]) if len(dw.inputs) > 1 else None
    if sx is None or sw is None or sx.size != 1 or sx.dtype != np.float32 or sw.dtype != np.float32:
        return None
    if sw.size != 1:
        if sw.ndim != 1 or sw.size != size or dw.attrs.get("block_size"):
            return None
        expected = (0 if int(n.attrs.get("transB", 0) or 0) else 1) if n.op == "Gemm" else 0
        if int(dw.attrs.get("axis", 1)) != expected:
            return None
    return (sx.reshape(()) * sw.reshape(sw.shape if sw.size != 1 else ())).astype(np.float32)


def quantize_float_biases(graph: Graph) -> Graph:
    tensors = dict(graph.tensors)
    producer = {o: n for n in graph.nodes for o in n.outputs}
    nodes: list[Node] = []
    for n in graph.nodes:
        if n.op in ("Conv", "DepthwiseConv", "Gemm") and len(n.inputs) > 2 and n.inputs[2]:
            src = n.inputs[2]
            while producer.get(src) is not None and producer[src].op == "Identity":
                src = producer[src].inputs[0]  # ORT removes Identity nodes first (exporters share equal constants so)
            if src != n.inputs[2]:
                n = dataclasses.replace(n, inputs=[*n.inputs[:2], src, *n.inputs[3:]])
            b = _const(tensors, src)
            dx, dw = producer.get(n.inputs[0]), producer.get(n.inputs[1])
            if b is not None and b.dtype == np.float32 and b.ndim == 1 and dx is not None and dw is not None \
                    and dx.op == dw.op == "DequantizeLinear":
                s = _bias_scale(n, dx, dw, tensors, b.size)
                q = None if s is None else np.rint((b / s).astype(np.float32).astype(np.float64))
                if q is not None and np.all((q >= _INT32[0]) & (q <= _INT32[1])):
                    base = f"{n.inputs[2]}::{n.name}::htp_bias"
                    tensors[base + "_q"] = TensorInfo(base + "_q", b.shape, "int32", const=q.astype(np.int32))
                    tensors[base + "_s"] = TensorInfo(base + "_s", s.shape, "float32", const=s)
                    tensors[base] = TensorInfo(base, b.shape, "float32")
                    attrs = {"axis": 0} if s.size != 1 else {}
                    nodes.append(Node(base, "DequantizeLinear", [base + "_q", base + "_s"], [base], attrs,
                                      source_op="DequantizeLinear", index=n.index))
                    n = dataclasses.replace(n, inputs=[*n.inputs[:2], base, *n.inputs[3:]])
        nodes.append(n)
    return graph.replace(nodes=nodes, tensors=tensors)
