"""ONNX Runtime's ``WeightBiasQuantization`` (onnxruntime 1.32.0, a level-1 graph transformer run for every execution
provider, before the QDQ fusions): a Conv / ConvTranspose / Gemm left partly float by its quantizer becomes a QDQ unit.

When (i) the node's input is a DequantizeLinear with one scale, (ii) its output reaches a QuantizeLinear through one
reader at every step (Relu / Clip allowed between; Identity nodes are gone by then), (iii) its weights are a
DequantizeLinear -- per tensor, or per channel on axis 0 (Conv / ConvTranspose) or the Gemm's output axis (1, 0 with
transB), the DequantizeLinear's axis attribute defaulting to 1, without block_size -- or a float32 initializer, and
(iv) it has a 1-D initializer bias or float weights:
- float weights become int8 codes per tensor, *asymmetric* (ORT's GetQuantizationParameter<int8_t>: range [min(w, 0),
  max(w, 0)], scale = f32((max - min) / 255), zero point = RNE(clamp(f32(-128 - f32(min / scale)))), the codes the
  QuantizeLinear of w: RNE(f32(w / scale)) + zero point, saturated);
- the bias becomes DequantizeLinear(Cast<int32>(Round(b / s)), s) with s = f32(s_x * s_w) (per tensor, or per channel
  on axis 0), Round half to even on the float32 quotient.
The node is then an ordinary QDQ unit.  Measured against the CPU EP (tests/conformance/test_ort_weight_bias.py: every
condition above, on and off; before this pass refinterp ran such a Conv / Gemm / ConvTranspose with its float bias:
1-3 codes of 1,152 off on most layers, float weights 180-215 off) and against the HTP (onnxruntime-qnn 2.7.0, v68 and
v73, 3x3 layers with per-tensor and per-channel weights, float biases off the grid by up to half a step, half-way
quotients among them; tests/conformance/test_qnn_htp_float_bias.py: rounded half up, truncated or floored the bias
misses codes).  A quantize_static model of torchvision's SqueezeNet 1.1 has such biases on the Conv layers that share
their input's DequantizeLinear.

ORT removes Identity nodes before that (IdentityElimination): a bias read through Identity (the exporter shares
equal constants so: torchvision's untrained SqueezeNet has every Conv bias read from the first layer's through
Identity, after quantize_static from that layer's DequantizeLinear) is read from its source here; an int32 one of
zeros on that layer's scale then runs as no bias on the HTP (kernels/qnn_htp/gemm_plan.py ``ort_plan``).
get_qnn_qdq_config quantizes such a shared bias like a weight instead (uint16 at a16), and the HTP computes that Conv
otherwise even with every code 0 (a SqueezeNet's first layer: 30% of the codes 1-2 off the rule without a bias): no
QDQ unit, refused as before.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, TensorInfo
from ..quant import mlas

_INT32 = (-2 ** 31, 2 ** 31 - 1)
_OPS = ("Conv", "DepthwiseConv", "ConvTranspose", "Gemm")


def _const(tensors: dict, name: str) -> np.ndarray | None:
    t = tensors.get(name) if name else None
    return None if t is None or t.const is None else np.asarray(t.const)


def _reaches_quantize(n: Node, readers: dict) -> bool:
    """ORT's IsNoBranchPathToQuantizeLinear: one output, one reading node at every step, Relu / Clip between."""
    while len(n.outputs) == 1:
        r = readers.get(n.outputs[0], [])
        if len(r) != 1:
            return False
        if r[0].op == "QuantizeLinear":
            return True
        if r[0].op not in ("Relu", "Clip", "Identity"):
            return False
        n = r[0]
    return False


def _weight_scale(n: Node, dw: Node, tensors: dict, bias_size: int) -> np.ndarray | None:
    """The weights' DequantizeLinear scale if the transformer takes it, else None."""
    sw = _const(tensors, dw.inputs[1]) if len(dw.inputs) > 1 else None
    if sw is None or sw.dtype != np.float32:
        return None
    if sw.size == 1:
        return sw.reshape(())
    if sw.ndim != 1 or sw.size != bias_size or int(dw.attrs.get("block_size", 0) or 0):
        return None
    w = tensors.get(dw.inputs[0])
    axis = int(dw.attrs.get("axis", 1))
    if axis < 0:
        if w is None or w.shape is None:
            return None
        axis += len(w.shape)
    expected = (0 if int(n.attrs.get("transB", 0) or 0) else 1) if n.op == "Gemm" else 0
    return sw if axis == expected else None


def _add(tensors: dict, nodes: list, base: str, codes: np.ndarray, scale: np.ndarray, zp, index: int,
         axis: int | None) -> str:
    """A constant DequantizeLinear(codes, scale[, zp]) named ``base``; returns its output."""
    tensors[base + "_q"] = TensorInfo(base + "_q", codes.shape, str(codes.dtype), const=codes)
    tensors[base + "_s"] = TensorInfo(base + "_s", scale.shape, "float32", const=scale)
    inputs = [base + "_q", base + "_s"]
    if zp is not None:
        tensors[base + "_z"] = TensorInfo(base + "_z", (), str(zp.dtype), const=zp)
        inputs.append(base + "_z")
    tensors[base] = TensorInfo(base, codes.shape, "float32")
    nodes.append(Node(base, "DequantizeLinear", inputs, [base], {} if axis is None else {"axis": axis},
                      source_op="DequantizeLinear", index=index))
    return base


def ort_weight_bias_quantization(graph: Graph) -> Graph:
    """The graph with every layer the transformer rewrites rewritten (module docstring); the input is not modified."""
    tensors = dict(graph.tensors)
    producer = {o: n for n in graph.nodes for o in n.outputs}
    readers: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for i in dict.fromkeys(n.inputs):
            readers.setdefault(i, []).append(n)
    nodes: list[Node] = []
    for n in graph.nodes:
        if n.op in _OPS and len(n.inputs) > 2 and n.inputs[2]:
            src = n.inputs[2]
            while producer.get(src) is not None and producer[src].op == "Identity":
                src = producer[src].inputs[0]  # ORT removes Identity nodes first (exporters share equal constants so)
            if src != n.inputs[2]:
                n = dataclasses.replace(n, inputs=[*n.inputs[:2], src, *n.inputs[3:]])
        nodes.append(_rewrite(n, producer, readers, tensors, nodes) if n.op in _OPS and len(n.inputs) > 1 else n)
    return graph.replace(nodes=nodes, tensors=tensors)


def _rewrite(n: Node, producer: dict, readers: dict, tensors: dict, nodes: list) -> Node:
    """``n`` with its float weights / bias replaced by DequantizeLinear outputs (the constants' nodes appended to
    ``nodes``), or ``n`` unchanged where the transformer leaves it."""
    dx, dw = producer.get(n.inputs[0]), producer.get(n.inputs[1])
    sx = _const(tensors, dx.inputs[1]) if dx is not None and dx.op == "DequantizeLinear" and len(dx.inputs) > 1 \
        else None
    if sx is None or sx.size != 1 or sx.dtype != np.float32 or not _reaches_quantize(n, readers):
        return n
    b = _const(tensors, n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    has_bias = b is not None and b.ndim == 1 and b.dtype == np.float32
    if dw is not None and dw.op == "DequantizeLinear":
        if not has_bias:
            return n
        sw = _weight_scale(n, dw, tensors, b.size)
        if sw is None:
            return n
        w_input = n.inputs[1]
    else:
        w = _const(tensors, n.inputs[1])
        if w is None or w.dtype != np.float32 or (len(n.inputs) > 2 and n.inputs[2] and not has_bias):
            return n
        scale, zp = mlas.quantization_parameter(w, -128, 127)
        codes = mlas.quantize_linear(w, scale, zp, -128, 127).astype(np.int8)
        sw = np.asarray(scale, np.float32)
        w_input = _add(tensors, nodes, f"{n.inputs[1]}::{n.name}::ort_weight", codes, sw, np.asarray(zp, np.int8),
                       n.index, None)
    inputs = [n.inputs[0], w_input, *n.inputs[2:]]
    if has_bias:
        s = (sx.reshape(()) * sw).astype(np.float32)
        q = np.rint((b / s).astype(np.float32).astype(np.float64))
        if np.all((q >= _INT32[0]) & (q <= _INT32[1])):
            inputs[2] = _add(tensors, nodes, f"{n.inputs[2]}::{n.name}::ort_bias", q.astype(np.int32), s, None,
                             n.index, 0 if s.size != 1 else None)
    return dataclasses.replace(n, inputs=inputs)
