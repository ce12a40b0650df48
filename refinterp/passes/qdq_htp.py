"""``fuse_qdq_htp``: ``fuse_qdq`` plus the data-movement units the HTP runs on quantized codes.

Qualcomm's QNN execution provider takes DequantizeLinear -> op -> QuantizeLinear units of data
movement (MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, Gather, DepthToSpace,
SpaceToDepth, Pad, Resize) as one quantized op, like the compute units (onnxruntime-qnn builder/qnn_node_group);
so are Tanh, HardSwish, Elu, Gelu, Softplus, Exp, Relu, HardSigmoid, Sqrt, Abs, Log, Floor, Ceil, Round, Sign,
Sin, Cos, Atan, Asin, Clip (constant bounds), Neg, Sub and Div (fused here too; ORT's
own QDQ fusion leaves them in float), ConvTranspose with DQ(constant weights) and an optional DQ(int32
bias) as Conv, and the selecting ops Max, Min, GlobalMaxPool, ReduceMax, ReduceMin and (several outputs,
each through its own QuantizeLinear; TopK's indices kept) Split and TopK.
Here such a unit becomes the op on stored integers, its output carrying the Q's parameters; the
HTP kernels then copy codes when input and output parameters are equal, requantize where the
HTP's rule for that op is measured, and refuse the node otherwise (kernels/qnn_htp/shape.py).  Only the data input is
dequantized; shape / index inputs stay as they are.  8- and 16-bit units (``fuse_qdq``: 8-bit).

A quantized Mul of a tensor by its own quantized Sigmoid (SiLU / Swish as exporters spell it) is one
more op on the HTP: a 256-entry table of x * sigmoid(x) from x's codes (measured: the Mul's output is a
function of x's code alone, 0 of 4,096 codes off the table rule of kernels/qnn_htp/activation.py, while
the two-tensor Mul rule gives 125 off); here it becomes ``Swish`` (alpha 1) with ``htp_fused_silu``.

A Concat input on other parameters made by a compute op is that op re-run onto the Concat's parameters
(passes/htp_concat.py); a requantizing Reshape-like of a graph input's codes reads the float input, which the
HTP clamps and quantizes once onto the move's parameters (``_input_folds``).  LayerNormalization with
DQ(constant gamma) and DQ(int32 beta) is one more unit (kernels/qnn_htp/norm.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node
from .ort_weight_bias import ort_weight_bias_quantization
from .qdq import _QRANGE, _Fuser

MOVE = ("MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather",
        "DepthToSpace", "SpaceToDepth", "Pad", "Resize", "Tile", "Expand")
# one-input units the QNN EP takes besides fuse_qdq's (table activations and the float32-path ops of
# kernels/qnn_htp/activation.py; Neg is fused and then refused there: not characterised)
UNARY = ("Tanh", "HardSwish", "Elu", "Gelu", "Softplus", "Exp", "Relu", "HardSigmoid", "Sqrt", "Abs", "Log", "Floor",
         "Ceil", "Round", "Sign", "Sin", "Cos", "Atan", "Asin", "Neg", "Clip")
# two-input units the QNN EP takes besides fuse_qdq's (kernels/qnn_htp/elementwise.py; Max / Min:
# kernels/qnn_htp/select.py)
BINARY = ("Sub", "Div", "Max", "Min")
# units that select codes (kernels/qnn_htp/select.py): reductions with an optional axes input ...
REDUCE = ("GlobalMaxPool", "ReduceMax", "ReduceMin")
# ... and ops with several outputs: each quantized output through its own QuantizeLinear (TopK's indices
# stay int64)
MULTI = ("Split", "TopK")


class _HtpFuser(_Fuser):
    # 16-bit units too: the QNN EP takes them as quantized ops; the HTP kernels run the 16-bit rules
    # they have (kernels/qnn_htp/gemm.py) and refuse the rest naming the node
    QRANGE = {**_QRANGE, "uint16": (0, 65535), "int16": (-32768, 32767)}
    # the QNN EP takes a QDQ ConvTranspose as one op, and a LayerNormalization with DQ(constant gamma) and an
    # optional DQ(int32 beta) (kernels/qnn_htp/norm.py)
    WEIGHTED = _Fuser.WEIGHTED + ("ConvTranspose", "LayerNormalization")

    def may_drop(self, n) -> bool:
        """A Relu or Clip between DequantizeLinear and QuantizeLinear is an op of its own on the HTP (its
        table / float32 path, measured: folding a Relu into a requantizing copy rounds through float16 and
        differs on 6 of 256 codes); after a compute op it folds into that op's requantization as in
        fuse_qdq."""
        return self.dq(n.inputs[0]) is None

    def fuse_binary(self, n) -> None:
        if n.op not in BINARY or len(n.inputs) != 2 or len(n.outputs) != 1 or id(n) in self.replaced:
            return
        hit = self.q_after(n.outputs[0])
        parts = [self.dq(i) for i in n.inputs]
        if hit is None or any(p is None for p in parts):
            return
        q, qqp = hit
        if {self.effective_type(p[1]) for p in parts} != {self.effective_type(q.outputs[0])}:
            return
        self._replace(n, [p[1] for p in parts], [p[2] for p in parts], q, qqp, [p[0] for p in parts], {})

    def fuse_multi(self, n) -> None:
        if n.op not in MULTI or not n.inputs or id(n) in self.replaced:
            return
        x = self.dq(n.inputs[0])
        if x is None:
            return
        qs = []
        for k, o in enumerate(n.outputs):
            if n.op == "TopK" and k == 1:
                qs.append(None)
                continue
            hit = self.q_after(o)
            if hit is None or self.effective_type(x[1]) != self.effective_type(hit[0].outputs[0]):
                return
            qs.append(hit)
        self._replace_outputs(n, [x[1]] + list(n.inputs[1:]), [x[2]] + [None] * (len(n.inputs) - 1), qs, [x[0]],
                              {})

    def fuse_move(self, n) -> None:
        if n.op not in MOVE + UNARY + REDUCE or not n.inputs or len(n.outputs) != 1 or id(n) in self.replaced:
            return
        if n.op in UNARY and len(n.inputs) != 1 and not (n.op == "Clip" and len(n.inputs) <= 3):
            return
        hit = self.q_after(n.outputs[0])
        x = self.dq(n.inputs[0])
        if hit is None or x is None:
            return
        q, qqp = hit
        if self.effective_type(x[1]) != self.effective_type(q.outputs[0]):
            return
        self._replace(n, [x[1]] + list(n.inputs[1:]), [x[2]] + [None] * (len(n.inputs) - 1), q, qqp, [x[0]], {})


def _silu_units(nodes: list[Node], tensors) -> list[Node]:
    """Quantized Mul(x, Sigmoid(x)) (either order) -> Swish(x), the Mul's output and name kept."""
    producer = {o: n for n in nodes for o in n.outputs}

    def quantized(name: str) -> bool:
        t = tensors.get(name)
        return t is not None and t.quant is not None and t.const is None

    out = []
    for n in nodes:
        if n.op == "Mul" and len(n.inputs) == 2 and quantized(n.outputs[0]) and all(quantized(i) for i in n.inputs):
            for x, s in (n.inputs, n.inputs[::-1]):
                p = producer.get(s)
                if p is not None and p.op == "Sigmoid" and p.inputs[:1] == [x]:
                    n = Node(n.name, "Swish", [x], list(n.outputs), {"alpha": 1.0, "htp_fused_silu": 1},
                             n.source_op, n.index)
                    break
        out.append(n)
    return out


def _same_quant(a, b) -> bool:
    return (a is not None and b is not None and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point) and a.axis == b.axis)


def _rerun(p: Node, suffix: str, quant, tensors: dict, inputs: list[str] | None = None) -> Node:
    """A clone of the one-output producer ``p`` whose output ``<p's output>::<suffix>`` carries ``quant`` (the HTP
    computing that op a second time onto other parameters); ``inputs``: other inputs than p's own."""
    out = p.outputs[0]
    clone = f"{out}::{suffix}"
    tensors[clone] = dataclasses.replace(tensors[out], name=clone, quant=quant)
    return Node(f"{p.name}::{suffix}", p.op, list(p.inputs if inputs is None else inputs), [clone], dict(p.attrs),
                p.source_op, p.index)


# requantizing moves the HTP folds into their producer, which it runs a second time onto the move's output
# parameters (measured, tests/conformance/test_qnn_htp_requant_moves.py): the copy table of the producer's codes
# differs there.  Pad: edge and reflect modes (constant mode pads otherwise: 77-160 codes of 648 off the re-run);
# a 16-bit Add: not (its re-run misses 18-41 codes of 512 with the Add's output hidden)
MOVE_FOLDS = {"DepthToSpace": ("Conv", "DepthwiseConv", "Add"), "Pad": ("Conv", "DepthwiseConv", "Add")}


def _folds(n: Node, p: Node | None, t, y) -> bool:
    """Whether the move ``n`` (input ``t`` made by ``p``, output ``y``) is folded into ``p`` as measured."""
    if p is None or t is None or y is None or t.quant is None or y.quant is None:
        return False
    if not n.source_op.startswith("QDQ:"):
        return False
    if n.op == "Pad" and n.attrs.get("mode", "constant") in ("constant", b"constant"):
        return False
    if p.op == "Add" and t.dtype in ("uint16", "int16"):
        return False
    return (p.op in MOVE_FOLDS[n.op] and len(p.outputs) == 1 and t.dtype == y.dtype
            and not _same_quant(t.quant, y.quant))


def _move_folds(nodes: list[Node], tensors: dict) -> list[Node]:
    """A ``MOVE_FOLDS`` unit whose input, made by one of its producers, has other parameters than its output: a
    clone of the producer onto the output's parameters feeds it (the move then copies codes); the producer's own
    output stays for its other readers."""
    producer = {o: n for n in nodes for o in n.outputs}
    out: list[Node] = []
    for n in nodes:
        x = n.inputs[0] if n.op in MOVE_FOLDS and n.inputs and n.outputs else None
        p, t = producer.get(x), tensors.get(x)
        y = tensors.get(n.outputs[0]) if x is not None else None
        if not _folds(n, p, t, y):
            out.append(n)
            continue
        out.append(_rerun(p, n.name, y.quant, tensors))
        out.append(dataclasses.replace(n, inputs=[out[-1].outputs[0], *n.inputs[1:]]))
    return out


def _producer_kind(p: Node | None, tensors: dict) -> str:
    """The op that made a unit's input codes: "input" for a graph input's QuantizeLinear; "Mul(constant)"
    for a Mul with a constant operand (measured apart from the two-tensor Mul)."""
    if p is None or p.op == "QuantizeLinear":
        return "input"
    if p.op == "Mul" and any(i in tensors and tensors[i].const is not None for i in p.inputs):
        return "Mul(constant)"
    return p.op


# units whose HTP result depends on the op that made their (first non-constant) input's codes
_BY_PRODUCER = MOVE + ("Relu", "Clip", "TopK", "Mul", "Div", "HardSwish", "LeakyRelu")


def _input_sources(nodes: list[Node], tensors: dict, outputs=()) -> list[Node]:
    """The attribute ``htp_input_from`` of a data movement, Relu / Clip / TopK or Mul / Div unit names the
    op that made its input codes (``_producer_kind``; Mul / Div: the operand that is not constant).  The
    HTP folds a requantizing move, a Relu / Clip or TopK into some producers and picks the Mul / Div by a
    constant kernel by them, so the kernels run only after the producers measured
    (kernels/qnn_htp/shape.py ``REQUANT_MEASURED``, activation.py, select.py, elementwise.py).
    ``htp_input_shared``: those codes are read by another node too, or are a graph output (the HTP then
    keeps the producer's output; it fuses some ops into a producer whose output nothing else needs);
    ``htp_input_strided``: the producer has strides other than 1 (v73 fuses into a stride-1 depthwise Conv only).
    (Concat: passes/htp_concat.py.)"""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[str, int] = {}
    for n in nodes:
        for i in set(n.inputs):
            readers[i] = readers.get(i, 0) + 1
    out = []
    for n in nodes:
        if n.op in _BY_PRODUCER and n.inputs and n.source_op.startswith("QDQ:"):
            x = next((i for i in n.inputs if i in tensors and tensors[i].const is None), n.inputs[0])
            p = producer.get(x)
            attrs = dict(n.attrs, htp_input_from=_producer_kind(p, tensors),
                         htp_input_shared=readers.get(x, 0) > 1 or x in outputs,
                         htp_input_strided=p is not None and any(int(v) != 1 for v in p.attrs.get("strides") or ()))
            if n.op in ("Mul", "Div"):
                attrs.update(_copies_of(x, producer, tensors))
            n = dataclasses.replace(n, attrs=attrs)
        elif n.op == "MatMul" and n.source_op.startswith("QDQ:") and all(
                i in tensors and tensors[i].const is None for i in n.inputs[:2]):
            origins = tuple(_origin(i, producer, tensors) for i in n.inputs[:2])
            n = dataclasses.replace(n, attrs=dict(n.attrs, htp_operands_from=origins))
        out.append(n)
    return out


# data movement that hands its input codes on unchanged when its parameters are its input's (MaxPool, Pad and
# Resize make values of their own)
_COPIES = tuple(op for op in MOVE if op not in ("MaxPool", "Pad", "Resize")) + ("Split",)


def copies_back(name: str, producer: dict, tensors: dict) -> tuple[Node | None, list[Node]]:
    """The node that made a tensor's codes, looking through copies (same parameters on both sides), and those
    copies from it onwards."""
    copies = []
    p = producer.get(name)
    while (p is not None and p.op in _COPIES and p.inputs and p.inputs[0] in tensors
           and _same_quant(tensors[p.inputs[0]].quant, tensors[name].quant)):
        copies.append(p)
        name = p.inputs[0]
        p = producer.get(name)
    return p, copies[::-1]


def _copies_of(name: str, producer: dict, tensors: dict) -> dict:
    """``htp_input_origin``: ``_producer_kind`` of the op that made a tensor's codes, through same-parameter
    copies; ``htp_input_via``: those copies as (op, rank of their output) from it onwards (a Mul / Div by a
    constant picks its kernel by both, kernels/qnn_htp/elementwise.py)."""
    origin, copies = copies_back(name, producer, tensors)

    def rank(c: Node) -> int | None:
        t = tensors.get(c.outputs[0])
        return None if t is None or t.shape is None else len(t.shape)
    return {"htp_input_origin": _producer_kind(origin, tensors),
            "htp_input_via": tuple((c.op, rank(c)) for c in copies)}


def _origin(name: str, producer: dict, tensors: dict) -> str:
    """``_producer_kind`` of the op that made a tensor's codes, looking through copies (a MatMul of two
    activations: the HTP reads some producers' operands otherwise than their stored codes, passes/htp_matmul.py)."""
    return _producer_kind(copies_back(name, producer, tensors)[0], tensors)


# requantizing data movement the HTP folds into a graph input's QuantizeLinear: the float input clamped to
# that QuantizeLinear's range and quantized once onto the move's output parameters (measured: 0 codes off
# on off-grid inputs, 8 and 16 bit, v68 and v73; tests/conformance/test_qnn_htp_requant_moves.py), where
# the copy table of the input's codes misses 1,081-1,108 of the test's 13,824
INPUT_FOLDS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Tile", "Expand")


def _input_folds(nodes: list[Node], tensors: dict) -> list[Node]:
    """A requantizing ``INPUT_FOLDS`` unit on a graph input's codes (per-tensor parameters, its float input
    at hand) reads that float input instead, with ``htp_input_clamp`` = the float32 range of the input's
    QuantizeLinear [(qmin - z) s, (qmax - z) s]; kernels/qnn_htp/shape.py clamps, quantizes onto the output's
    parameters and moves.  The QuantizeLinear stays for its other consumers (and for ``capture``)."""
    producer = {o: n for n in nodes for o in n.outputs}
    out = []
    for n in nodes:
        p = producer.get(n.inputs[0]) if n.op in INPUT_FOLDS and n.inputs else None
        t_in = tensors.get(n.inputs[0]) if p is not None else None
        t_out = tensors.get(n.outputs[0]) if n.outputs else None
        src = tensors.get(p.inputs[0]) if p is not None and p.op == "QuantizeLinear" and p.inputs else None
        if (src is None or src.dtype != "float32" or t_in is None or t_out is None or t_in.quant is None
                or t_out.quant is None or not t_in.quant.per_tensor or not t_out.quant.per_tensor
                or _same_quant(t_in.quant, t_out.quant) or t_in.dtype not in _HtpFuser.QRANGE
                or not n.source_op.startswith("QDQ:")):
            out.append(n)
            continue
        qmin, qmax = _HtpFuser.QRANGE[t_in.dtype]
        s, z = np.float32(t_in.quant.scale[0]), int(t_in.quant.zero_point[0])
        clamp = [float(np.float32(qmin - z) * s), float(np.float32(qmax - z) * s)]
        out.append(dataclasses.replace(n, inputs=[p.inputs[0]] + list(n.inputs[1:]),
                                       attrs=dict(n.attrs, htp_input_clamp=clamp)))
    return out


# a uint16 HardSigmoid's output is on scale 1/65536, zero point 0 whatever the model declares (measured: 3 declared
# encodings, every output within 1.8 codes of 65536 hardsigmoid(x), 25,000 codes off the declared one; the device's
# DequantizeLinear reads it so too); the op itself is 8-bit only here, but what reads it is not
IMPOSED = {("HardSigmoid", "uint16"): (1.0 / 65536, 0)}


def _encoding_overrides(nodes: list[Node], tensors: dict) -> list[Node]:
    """A 16-bit Sigmoid / Tanh / HardSigmoid unit's output takes the encoding the QNN EP imposes (quant/htp_curve16.py
    ``ENCODING``, ``IMPOSED``; the model's QuantizeLinear parameters are ignored on the device), and so does every
    reader: fused units read the tensor's parameters, a standalone DequantizeLinear gets them as new
    constants."""
    from ..ir import QuantParams, TensorInfo
    from ..quant.htp_curve16 import ENCODING

    encoding = {**ENCODING, **IMPOSED}
    moved = {}
    for n in nodes:
        t = tensors.get(n.outputs[0]) if n.outputs else None
        if (t is not None and (n.op, t.dtype) in encoding and n.source_op.startswith("QDQ:")
                and t.quant is not None and t.quant.scale.size == 1):
            scale, zp = encoding[n.op, t.dtype]
            tensors[t.name] = dataclasses.replace(t, quant=QuantParams(np.float32(scale), zp))
            moved[t.name] = (scale, zp, t.dtype)
    if not moved:
        return nodes
    out = []
    for n in nodes:
        if n.op == "DequantizeLinear" and n.inputs and n.inputs[0] in moved:
            scale, zp, dtype = moved[n.inputs[0]]
            names = (f"{n.inputs[0]}::htp_scale", f"{n.inputs[0]}::htp_zero_point")
            tensors[names[0]] = TensorInfo(names[0], (), "float32", const=np.array(scale, np.float32))
            tensors[names[1]] = TensorInfo(names[1], (), dtype, const=np.array(zp, dtype))
            n = dataclasses.replace(n, inputs=[n.inputs[0], *names])
        out.append(n)
    return out


def fuse_qdq_htp(graph: Graph) -> Graph:
    f = _HtpFuser(ort_weight_bias_quantization(graph))  # ONNX Runtime's rewrite before the QNN EP sees the graph
    f.drop_activations()
    for n in list(f.nodes):
        f.fuse_node(n)
        f.fuse_move(n)
        f.fuse_binary(n)
        f.fuse_multi(n)
    from .htp_concat import concat_units  # it builds on this module's helpers
    nodes = _move_folds(concat_units(_silu_units(f.result(), f.tensors), f.tensors), f.tensors)
    nodes = _input_sources(nodes, f.tensors, frozenset(graph.outputs))
    nodes = _encoding_overrides(_input_folds(nodes, f.tensors), f.tensors)
    from .htp_matmul import RERUN, symmetric_operands  # it builds on this module's helpers
    nodes = symmetric_operands(nodes, f.tensors, RERUN)
    return graph.replace(nodes=nodes, tensors=f.tensors)
