"""QDQ fusion: DequantizeLinear -> op -> QuantizeLinear units become one quantized canonical node,
as ONNX Runtime's QDQ selector/action transformers do at ORT_ENABLE_EXTENDED and above
(onnxruntime/core/optimizer/qdq_transformer/selectors_actions/qdq_selector_action_transformer.cc,
qdq_selectors.cc, qdq_actions.cc, relu_quantizelinear.cc, clip_quantizelinear.cc;
/work/shared/design/backends.md §2.4).

Units fused (every DQ with constant scale/zero point, not blocked; the op output feeds only the Q
and is not a graph output; Q per-tensor with constant scale/zero point):
* Conv / DepthwiseConv: DQ(x) per-tensor, DQ(w) of a constant (per-tensor or per output channel),
  optional DQ(int32 bias) of a constant -> QLinearConv;
* MatMul (2 DQ) -> QLinearMatMul; Gemm (2 DQ, optional DQ(int32 C)) -> QGemm;
* Add, Mul (2 per-tensor DQ) -> QLinearAdd / QLinearMul;
* Sigmoid, LeakyRelu, AveragePool, GlobalAveragePool, Softmax (1 DQ) -> QLinear*;
* Concat (every input a per-tensor DQ) -> QLinearConcat;
* Relu -> Q with Q's zero point == qmin, Clip -> Q whose representable range lies inside
  [min, max]: the activation is removed (ReluQuantFusion / ClipQuantFusion; exact).
Not fused (run in float between DQ and Q, as ORT leaves them or because fusion is exact anyway):
data movement (Reshape, Transpose, MaxPool, Resize, ...: ORT drops their DQ/Q pair, which gives
the same integers), MatMul/Gemm without an output Q (MatMulIntegerToFloat), Where, ReduceMean.
Fused nodes keep the op node's name; ``source_op`` becomes ``"QDQ:<op>"``; their inputs are the
DQ inputs (stored integers) and their output is the Q's output tensor.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, QuantParams

_UNARY = ("Sigmoid", "LeakyRelu", "AveragePool", "GlobalAveragePool", "Softmax")
_BINARY = ("Add", "Mul", "MatMul")
_QRANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


class _Fuser:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.tensors = dict(g.tensors)
        self.nodes = list(g.nodes)
        self.outputs = set(g.outputs)

    # -- lookups over the current node list ----------------------------------------------------
    def producer(self, name: str) -> Node | None:
        return next((n for n in self.nodes if name in n.outputs), None)

    def consumers(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.inputs]

    def const(self, name: str) -> np.ndarray | None:
        t = self.tensors.get(name) if name else None
        return None if t is None else t.const

    def _params(self, n: Node, value: str, axis_default: int = 1) -> QuantParams | None:
        """QuantParams of a Q/DQ node (constant scale/zp, not blocked), else None."""
        if int(n.attrs.get("block_size", 0) or 0):
            return None
        s = self.const(n.inputs[1]) if len(n.inputs) > 1 else None
        if s is None:
            return None
        zname = n.inputs[2] if len(n.inputs) > 2 else ""
        z = self.const(zname) if zname else np.zeros(1, np.int64)
        if z is None:
            return None
        axis = None
        if np.asarray(s).size > 1:
            shape = self.tensors[value].shape if value in self.tensors else None
            rank = len(shape) if shape is not None else None
            a = int(n.attrs.get("axis", axis_default))
            if rank is None and a < 0:
                return None
            axis = a % rank if rank else a
        return QuantParams(np.asarray(s, np.float32).ravel(), np.asarray(z).astype(np.int64).ravel(), axis)

    def dq(self, name: str, per_tensor: bool = True, const: bool = False):
        """(dq node, stored-integer input, params) when ``name`` is a DequantizeLinear output."""
        n = self.producer(name) if name else None
        if n is None or n.op != "DequantizeLinear":
            return None
        src = n.inputs[0]
        info = self.tensors.get(src)
        if info is None or np.dtype(info.dtype).kind not in "iu" or (const and info.const is None):
            return None
        qp = self._params(n, src)
        if qp is None or (per_tensor and not qp.per_tensor):
            return None
        return n, src, qp

    def q_after(self, name: str):
        """(q node, params) when ``name`` feeds only a per-tensor QuantizeLinear."""
        if not name or name in self.outputs:
            return None
        cons = self.consumers(name)
        if len(cons) != 1 or cons[0].op != "QuantizeLinear":
            return None
        q = cons[0]
        out = self.tensors.get(q.outputs[0])
        qp = self._params(q, name)
        if qp is None or not qp.per_tensor or out is None or out.dtype not in _QRANGE:
            return None
        return q, qp

    # -- rewriting -------------------------------------------------------------------------------
    def _set_quant(self, name: str, qp: QuantParams) -> None:
        t = self.tensors[name]
        self.tensors[name] = dataclasses.replace(t, quant=qp)

    def _replace(self, op_node: Node, inputs: list[str], quants: list, q: Node, qqp: QuantParams,
                 dqs: list[Node]) -> None:
        for name, qp in zip(inputs, quants):
            if name and qp is not None:
                self._set_quant(name, qp)
        out = q.outputs[0]
        self._set_quant(out, qqp)
        fused = dataclasses.replace(op_node, inputs=list(inputs), outputs=[out], attrs=dict(op_node.attrs),
                                    source_op=f"QDQ:{op_node.op}")
        i = self.nodes.index(op_node)
        self.nodes[i] = fused
        self.nodes.remove(q)
        for d in dqs:
            if d in self.nodes and not any(self.consumers(o) for o in d.outputs) \
                    and not any(o in self.outputs for o in d.outputs):
                self.nodes.remove(d)

    def drop_activations(self) -> None:
        for n in list(self.nodes):
            if n.op not in ("Relu", "Clip") or not n.inputs:
                continue
            hit = self.q_after(n.outputs[0])
            if hit is None:
                continue
            q, qp = hit
            lo, hi = _QRANGE[self.tensors[q.outputs[0]].dtype]
            zp, s = int(qp.zero_point[0]), float(qp.scale[0])
            if n.op == "Relu":
                ok = zp == lo
            else:
                cmin = self.const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else None
                cmax = self.const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
                rmin, rmax = (lo - zp) * s, (hi - zp) * s
                ok = ((cmin is None or float(np.asarray(cmin)) <= rmin)
                      and (cmax is None or float(np.asarray(cmax)) >= rmax))
            if ok:
                self.nodes[self.nodes.index(q)] = dataclasses.replace(q, inputs=[n.inputs[0]] + q.inputs[1:])
                self.nodes.remove(n)

    def fuse_node(self, n: Node) -> None:
        if not n.outputs or not n.inputs:
            return
        hit = self.q_after(n.outputs[0])
        if hit is None:
            return
        q, qqp = hit
        if n.op in ("Conv", "DepthwiseConv", "Gemm"):
            x = self.dq(n.inputs[0])
            w = self.dq(n.inputs[1], per_tensor=False, const=True) if len(n.inputs) > 1 else None
            if x is None or w is None:
                return
            parts = [x, w]
            if len(n.inputs) > 2 and n.inputs[2]:
                b = self.dq(n.inputs[2], per_tensor=False, const=True)
                if b is None or self.tensors[b[1]].dtype != "int32":
                    return
                parts.append(b)
        elif n.op in _BINARY:
            parts = [self.dq(i, per_tensor=n.op != "MatMul") for i in n.inputs[:2]]
            if len(n.inputs) != 2 or any(p is None for p in parts):
                return
        elif n.op in _UNARY:
            parts = [self.dq(n.inputs[0])]
            if len(n.inputs) != 1 or parts[0] is None:
                return
        elif n.op == "Concat":
            parts = [self.dq(i) for i in n.inputs]
            if any(p is None for p in parts):
                return
        else:
            return
        self._replace(n, [p[1] for p in parts], [p[2] for p in parts], q, qqp, [p[0] for p in parts])


def fuse_qdq(graph: Graph) -> Graph:
    """Return a new Graph with ORT's QDQ node units fused (the input graph is not modified)."""
    f = _Fuser(graph)
    f.drop_activations()
    for n in list(f.nodes):
        if n in f.nodes:
            f.fuse_node(n)
    return graph.replace(nodes=f.nodes, tensors=f.tensors)

