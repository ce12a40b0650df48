"""QDQ fusion: DequantizeLinear -> op -> QuantizeLinear units become one quantized canonical node,
as ONNX Runtime's QDQ selector/action transformers do at ORT_ENABLE_EXTENDED and above
(onnxruntime/core/optimizer/qdq_transformer/selectors_actions/qdq_selector_action_transformer.cc,
qdq_selectors.cc, qdq_actions.cc, relu_quantizelinear.cc, clip_quantizelinear.cc;
docs/arithmetic/README.md).

Units fused (every DQ with constant scale/zero point, not blocked; the op output feeds only the Q
and is not a graph output; Q per-tensor with constant scale/zero point):
* Conv / DepthwiseConv: DQ(x) per-tensor, DQ(w) of a constant (per-tensor or per output channel),
  optional DQ(int32 bias) of a constant -> QLinearConv;
* MatMul (2 DQ) -> QLinearMatMul; Gemm (2 DQ, optional DQ(int32 C)) -> QGemm;
* Add, Mul (2 per-tensor DQ) -> QLinearAdd / QLinearMul;
* Sigmoid, LeakyRelu, AveragePool, GlobalAveragePool, Softmax (1 DQ) -> QLinear*;
* Concat (every input a per-tensor DQ) -> QLinearConcat; Where (DQ on both values) -> QLinearWhere;
* Relu -> Q with Q's zero point == qmin, Clip -> Q whose representable range lies inside
  [min, max]: the activation is removed (ReluQuantFusion / ClipQuantFusion; exact).
Not fused (run in float between DQ and Q, as ORT leaves them or because fusion is exact anyway):
data movement (Reshape, Transpose, MaxPool, Resize, ...: ORT drops their DQ/Q pair, which gives
the same integers), MatMul/Gemm without an output Q (MatMulIntegerToFloat), ReduceMean.
Fused nodes keep the op node's name; ``source_op`` becomes ``"QDQ:<op>"``; their inputs are the
DQ inputs (stored integers) and their output is the Q's output tensor.

Pass ``dq_matmul_nbits`` (after the units above; onnxruntime >= 1.32, DQMatMulToMatMulNBits): a float MatMul left unfused (e.g.
16-bit activations) whose B is the only use of a DequantizeLinear of a constant 2-D int8/uint8
weight -- per-tensor (scalar scale) or per output column (scale [N], axis 1), constant zero point,
not blocked, the weight used by that DQ only, no int8/uint8 QuantizeLinear after the MatMul and no
QuantizeLinear at all when its output is also a graph output -- becomes
``MatMulNBits`` (bits 8, block 32, accuracy level 4: A quantized to int8 per block).  The node stays ``MatMul`` with the weight's stored integers
as input 1 (its quantization set from the DQ), ``source_op`` ``"QDQ:MatMulNBits"`` and the
attribute ``dq_weight = 1`` (kernels/onnxruntime/float_matmul.py).  Left alone (as measured on onnxruntime
1.32.0): 4-bit per-column weights, an explicit DQ axis of -1.  A float Gemm with no transposes,
alpha 1 and either no C (any beta) or a 1-D C of N values with beta 1 is rewritten the same way
(measured): it becomes such a ``MatMul`` whose third input is C, the bias.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, QuantParams

_UNARY = ("Sigmoid", "LeakyRelu", "AveragePool", "GlobalAveragePool", "Softmax")
_BINARY = ("Add", "Mul", "MatMul")
# Only 8-bit units are fused (ORT's QLinear kernels are 8-bit; 16-bit and 4-bit QDQ run in float
# here, which is not verified against ORT's 16-bit / MatMulNBits paths).
_QRANGE = {"uint8": (0, 255), "int8": (-128, 127)}
_BIAS_DTYPE = "int32"


class _Fuser:
    """Fusion over index maps built once (after the activation drop); every fusion updates them, so a
    graph of N nodes is processed in O(N)."""

    QRANGE = _QRANGE  # the stored types a unit may have (a backend's fuser may take more)
    WEIGHTED = ("Conv", "DepthwiseConv", "Gemm")  # DQ(x), DQ(constant weights), optional DQ(int32 bias)

    def __init__(self, g: Graph, u8_reencode: bool = False) -> None:
        self.g = g
        self.u8 = u8_reencode
        self.tensors = dict(g.tensors)
        self.nodes = list(g.nodes)
        self.outputs = set(g.outputs)
        self._index()
        self.u8_names = self.reencoded_u8() if u8_reencode else set()
        self.removed: set[int] = set()  # id() of nodes removed by fusions
        self.replaced: dict[int, Node] = {}  # id(op node) -> fused node
        self.orphans: list[Node] = []  # DQ nodes that lost a consumer

    def _index(self) -> None:
        self._prod: dict[str, Node] = {o: n for n in self.nodes for o in n.outputs if o}
        self._cons: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    self._cons.setdefault(i, []).append(n)

    # -- lookups -----------------------------------------------------------------------------------
    def producer(self, name: str) -> Node | None:
        return self._prod.get(name)

    def consumers(self, name: str) -> list[Node]:
        return self._cons.get(name, [])

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
        if info is None or info.dtype not in (*self.QRANGE, _BIAS_DTYPE) or (const and info.const is None):
            return None
        if info.dtype == _BIAS_DTYPE and not const:
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
        if qp is None or not qp.per_tensor or out is None or out.dtype not in self.QRANGE:
            return None
        return q, qp

    def reencoded_u8(self) -> set[str]:
        """Int8 tensors ORT's x86 QDQS8ToU8Transformer re-encodes as uint8 (decided on the graph
        before any fusion): produced by a QuantizeLinear whose only consumer is one DequantizeLinear
        feeding at most one node."""
        out = set()
        for n in self.nodes:
            if n.op != "QuantizeLinear" or not n.outputs or n.outputs[0] in self.outputs:
                continue
            name = n.outputs[0]
            cons = self.consumers(name)
            # EnsureUniqueDQForNodeUnit first gives every consumer of a DQ its own DQ copy; a Q feeding
            # several DQs is then left as int8 (observed on onnxruntime 1.31.1)
            if self.tensors[name].dtype == "int8" and len(cons) == 1 and cons[0].op == "DequantizeLinear" \
                    and len(self.consumers(cons[0].outputs[0])) <= 1:
                out.add(name)
        return out

    def effective_type(self, name: str) -> str:
        return "uint8" if name in self.u8_names else self.tensors[name].dtype

    # -- rewriting -------------------------------------------------------------------------------
    def _set_quant(self, name: str, qp: QuantParams) -> None:
        t = self.tensors[name]
        self.tensors[name] = dataclasses.replace(t, quant=qp)

    def _replace(self, op_node: Node, inputs: list[str], quants: list, q: Node, qqp: QuantParams,
                 dqs: list[Node], attrs_extra: dict) -> None:
        self._replace_outputs(op_node, inputs, quants, [(q, qqp)], dqs, attrs_extra)

    def _replace_outputs(self, op_node: Node, inputs: list[str], quants: list, qs: list, dqs: list[Node],
                         attrs_extra: dict) -> None:
        """The op node on stored integers: ``qs`` per output of the op node, (its QuantizeLinear, params) or
        None for an output kept as it is (TopK's indices)."""
        for name, qp in zip(inputs, quants):
            if name and qp is not None:
                self._set_quant(name, qp)
        outs = []
        for o, hit in zip(op_node.outputs, qs):
            if hit is None:
                outs.append(o)
                continue
            q, qqp = hit
            self._set_quant(q.outputs[0], qqp)
            self.removed.add(id(q))
            outs.append(q.outputs[0])
        fused = dataclasses.replace(op_node, inputs=list(inputs), outputs=outs,
                                    attrs={**op_node.attrs, **attrs_extra}, source_op=f"QDQ:{op_node.op}")
        self.replaced[id(op_node)] = fused
        qnodes = [h[0] for h in qs if h is not None]
        for name in set(op_node.inputs).union(*(q.inputs for q in qnodes)):  # old edges of the op node and Qs
            if name in self._cons:
                self._cons[name] = [c for c in self._cons[name] if c is not op_node and all(c is not q for q in qnodes)]
        for name in inputs:
            if name:
                self._cons.setdefault(name, []).append(fused)
        for o in op_node.outputs:
            self._prod.pop(o, None)
        for o in outs:
            self._prod[o] = fused
        self.orphans.extend(dqs)

    def result(self) -> list[Node]:
        """Nodes in their original order, fused nodes in place of their op node, dead DQs dropped."""
        dead = {id(d) for d in self.orphans
                if not any(self.consumers(o) for o in d.outputs) and not any(o in self.outputs for o in d.outputs)}
        out = []
        for n in self.nodes:
            if id(n) in self.removed or id(n) in dead:
                continue
            out.append(self.replaced.get(id(n), n))
        return out

    def may_drop(self, n) -> bool:
        """Whether ``drop_activations`` may fold this Relu / Clip into the QuantizeLinear after it."""
        return True

    def drop_activations(self) -> None:
        changed = False
        for n in list(self.nodes):
            if n.op not in ("Relu", "Clip") or not n.inputs or not self.may_drop(n):
                continue
            hit = self.q_after(n.outputs[0])
            if hit is None:
                continue
            q, qp = hit
            lo, hi = self.QRANGE[self.tensors[q.outputs[0]].dtype]
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
                i_q = next(i for i, m in enumerate(self.nodes) if m is q)
                self.nodes[i_q] = dataclasses.replace(q, inputs=[n.inputs[0]] + q.inputs[1:])
                self.nodes = [m for m in self.nodes if m is not n]
                changed = True
        if changed:
            self._index()

    def _gemm_is_matmul(self, n: Node) -> bool:
        """A Gemm ORT 1.32 rewrites like a MatMul (measured): no transposes, alpha 1, and either no C or
        a 1-D C of N values (constant or not) with beta 1 (beta is free without C)."""
        if int(n.attr("transA", 0)) or int(n.attr("transB", 0)) or float(n.attr("alpha", 1.0)) != 1.0:
            return False
        if len(n.inputs) < 3 or not n.inputs[2]:
            return len(n.inputs) >= 2
        c, w = self.tensors.get(n.inputs[2]), self.tensors.get(n.inputs[1])
        return (float(n.attr("beta", 1.0)) == 1.0 and c is not None and c.shape is not None and len(c.shape) == 1
                and w is not None and w.shape is not None and len(w.shape) == 2 and c.shape[0] == w.shape[1])

    def fuse_weight_dq_matmul(self, n: Node) -> None:
        """ORT's DQ -> MatMulNBits rewrite of a float MatMul (or a Gemm that is one, with C as the
        bias: ``_gemm_is_matmul``) with an 8-bit constant weight (see the module docstring); a no-op
        for anything else."""
        if id(n) in self.replaced or not (
                (n.op == "MatMul" and len(n.inputs) == 2) or (n.op == "Gemm" and self._gemm_is_matmul(n))):
            return
        d = self.producer(n.inputs[1])
        if d is None or d.op != "DequantizeLinear" or int(d.attrs.get("block_size", 0) or 0):
            return
        if n.inputs[1] in self.outputs or len(self.consumers(n.inputs[1])) != 1:
            return
        if len(self.consumers(d.inputs[0])) != 1:  # a weight shared by two DQs stays (measured)
            return
        qs = [c for c in self.consumers(n.outputs[0]) if c.op == "QuantizeLinear"]
        # an 8-bit Q after it makes the unit ORT's QDQ unit; any Q plus the output being a graph output
        # makes the unit invalid: both left alone (measured)
        if qs and (n.outputs[0] in self.outputs or any(
                self.tensors.get(c.outputs[0]) is not None and self.tensors[c.outputs[0]].dtype in _QRANGE for c in qs)):
            return
        w = self.tensors.get(d.inputs[0])
        if w is None or w.const is None or w.dtype not in _QRANGE or np.ndim(w.const) != 2:
            return
        s = self.const(d.inputs[1]) if len(d.inputs) > 1 else None
        zname = d.inputs[2] if len(d.inputs) > 2 else ""
        z = self.const(zname) if zname else None
        if s is None or (zname and z is None) or np.asarray(s).dtype != np.float32:
            return
        n_cols = w.const.shape[1]
        if np.ndim(s) == 0:
            axis = None
            if z is not None and np.ndim(z) != 0:
                return
        elif np.ndim(s) == 1 and np.size(s) == n_cols and int(d.attrs.get("axis", 1)) == 1:  # (-1: not fused)
            axis = 1
            if z is not None and (np.ndim(z) != 1 or np.size(z) != n_cols):
                return
        else:
            return
        zp = np.zeros(1, np.int64) if z is None else np.asarray(z).astype(np.int64).ravel()
        self._set_quant(d.inputs[0], QuantParams(np.asarray(s, np.float32).ravel(), zp, axis))
        bias = [n.inputs[2]] if n.op == "Gemm" and len(n.inputs) > 2 and n.inputs[2] else []
        attrs = {"dq_weight": 1} if n.op == "Gemm" else {**n.attrs, "dq_weight": 1}
        fused = dataclasses.replace(n, op="MatMul", inputs=[n.inputs[0], d.inputs[0]] + bias, attrs=attrs,
                                    source_op="QDQ:MatMulNBits")
        self.replaced[id(n)] = fused
        self._cons[n.inputs[1]] = []
        self._cons.setdefault(d.inputs[0], []).append(fused)
        self._cons[n.inputs[0]] = [fused if c is n else c for c in self.consumers(n.inputs[0])]
        self._prod[n.outputs[0]] = fused
        self.orphans.append(d)

    def fuse_node(self, n: Node) -> None:
        if not n.outputs or not n.inputs:
            return
        hit = self.q_after(n.outputs[0])
        if hit is None:
            return
        q, qqp = hit
        if n.op in self.WEIGHTED:
            x = self.dq(n.inputs[0])
            w = self.dq(n.inputs[1], per_tensor=False, const=True) if len(n.inputs) > 1 else None
            if x is None or w is None:
                return
            parts = [x, w]
            if len(n.inputs) > 2 and n.inputs[2]:
                b = self.dq(n.inputs[2], per_tensor=False, const=True)
                if b is None or self.tensors[b[1]].dtype != _BIAS_DTYPE:
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
        elif n.op == "Where":
            parts = [self.dq(i) for i in n.inputs[1:3]]
            if len(n.inputs) != 3 or any(p is None for p in parts):
                return
            parts.insert(0, (None, n.inputs[0], None))  # the bool condition is kept as is
        else:
            return
        # activations (not the constant weights / bias) and the output must share one storage type
        acts = [p[1] for p in parts[:1]] if n.op in self.WEIGHTED + ("MatMul",) \
            else [p[1] for p in parts if p[0] is not None]
        types = {self.effective_type(a) for a in acts} | {self.effective_type(q.outputs[0])}
        if len(types) != 1:
            return
        # ORT's Conv / MatMul selectors take int8 activations only where QDQIsInt8Allowed() (ARM): on x86 a unit
        # the S8->U8 re-encoding left int8 (its Q output a graph output, a Q read by several DQs) runs in float
        if self.u8 and types == {"int8"} and n.op in ("Conv", "DepthwiseConv", "MatMul"):
            return
        attrs_extra = {}
        if self.u8 and types == {"uint8"} and self.tensors[q.outputs[0]].dtype == "int8" \
                and n.op in _U8_SENSITIVE:
            attrs_extra["int8_as_uint8"] = 1
        self._replace(n, [p[1] for p in parts], [p[2] for p in parts], q, qqp,
                      [p[0] for p in parts if p[0] is not None], attrs_extra)


# Fused ops whose ORT kernel adds a zero point in float or works on raw codes: on uint8-re-encoded
# int8 tensors (codes + 128, zero point + 128) they can round differently from int8 codes.
_U8_SENSITIVE = ("Add", "Mul", "AveragePool")


def fuse_qdq(graph: Graph) -> Graph:
    """Return a new Graph with ORT's QDQ node units fused (the input graph is not modified).
    Int8 QDQ units stay int8 (ORT on ARM, where QDQIsInt8Allowed())."""
    return _fuse(graph, False)


def fuse_qdq_x86(graph: Graph) -> Graph:
    """``fuse_qdq`` after ORT's x86 QDQS8ToU8Transformer (qdq_s8_to_u8.cc): int8 Q -> DQ pairs are
    re-encoded as uint8 (zero point + 128) before fusion.  The re-encoding is exact, but (1) a unit
    whose activations and output end up with different storage types is not fused (e.g. a final
    int8 Q with no DQ after it, or an int8 graph input feeding a DQ), nor a Conv / MatMul left int8
    on both sides (ORT's selectors refuse int8 activations where QDQIsInt8Allowed() is false;
    tests/conformance/test_ort_int8_units.py), and (2) kernels in
    ``_U8_SENSITIVE`` compute on the shifted codes: the fused node keeps its int8 tensors and gets the
    attribute ``int8_as_uint8 = 1``; the ``ort`` kernels shift codes and zero points by 128."""
    return _fuse(graph, True)


def _fuse(graph: Graph, u8_reencode: bool) -> Graph:
    f = _Fuser(graph, u8_reencode)
    f.drop_activations()
    for n in list(f.nodes):
        f.fuse_node(n)
    return graph.replace(nodes=f.result(), tensors=f.tensors)


def dq_matmul_nbits(graph: Graph) -> Graph:
    """ORT 1.32's DQ -> MatMulNBits rewrite of float MatMuls with 8-bit constant weights (module
    docstring); run after ``fuse_qdq`` / ``fuse_qdq_x86``, whose 8-bit QLinear units take precedence."""
    f = _Fuser(graph)
    for n in list(f.nodes):
        f.fuse_weight_dq_matmul(n)
    return graph.replace(nodes=f.result(), tensors=f.tensors)
