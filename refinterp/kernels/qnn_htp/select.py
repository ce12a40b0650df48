"""HTP ops that select codes without arithmetic: Where, Max / Min of two tensors, GlobalMaxPool,
ReduceMax / ReduceMin and TopK (quantized units of passes/qdq_htp.py), on one set of parameters.

On equal input and output parameters the dequantization is monotone in the code, so the selection on
codes is the selection on values: the output codes are input codes.  Evidence (v73 and v68, uint8 and
int8, tests/conformance/test_qnn_htp_select.py): 0 differences on every op.

TopK orders equal values by the *higher* index first (ONNX: the lower): measured on rows of 9 to 64
codes drawn from 12 values (ties in nearly every row), k from 3 to 8, largest and smallest, uint8 and
int8: the higher-index-first order matches every row; ONNX's order misses 88-100% of them.  That holds
for TopK on codes made by Add, Sub, Mul or Sigmoid (``TOPK_MEASURED``; v68 and v73, 2 sets each: 0 off);
on a graph input's codes (off-grid float inputs), after Conv, MatMul or MaxPool the HTP folds TopK into
the producer (54-104 of 256 values and indices off, values too after Conv): refused.  The other ops here
equal the emulator after each of those producers.

int16 ReduceMin and Min: the QNN EP leaves them to the CPU (refused here).  Refused when the parameters
differ (the HTP's requantization there depends on the producer, as for data movement,
kernels/qnn_htp/shape.py; a Where measured equal to the copy table after graph inputs only, 3 sets: not
enough -- refinterp copied the codes before, 252 of 256 off), on float data, and for TopK with sorted=0
(not measured)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from ..int.shape_quant import same_params
from ..onnxruntime.common import is_quantized
from ..tflite.common import where
from .common import ARCHS, htp_kernel

# producers of TopK's input codes where TopK runs on the codes (passes/qdq_htp.py ``htp_input_from``)
TOPK_MEASURED = ("Add", "Sub", "Mul", "Sigmoid")
_SELECT = ("Where", "Max", "Min", "GlobalMaxPool", "ReduceMax", "ReduceMin", "TopK")


@dataclass(frozen=True)
class HtpSelectPlan:
    op: str
    axes: tuple | None  # ReduceMax / ReduceMin (None: every axis), TopK (one axis)
    keepdims: bool
    k: int              # TopK
    largest: bool       # TopK
    index_dtype: str    # TopK


def _prepare(node, ctx) -> HtpSelectPlan:
    data = [ctx.inputs[i] for i in ((1, 2) if node.op == "Where" else (0, 1) if node.op in ("Max", "Min") else (0,))]
    outs = ctx.outputs[:1]
    for t in data + outs:
        if not is_quantized(t):
            raise UnsupportedOpError(f"{where(node)}: a {node.op} on tensor '{t.name}' that is not quantized is "
                                     "not characterised on the HTP")
    for t in data:
        if t.dtype != outs[0].dtype or not same_params(t, outs[0]):
            raise UnsupportedOpError(f"{where(node)}: tensors '{t.name}' and '{outs[0].name}' have different "
                                     f"quantization; the HTP's requantizing {node.op} is not characterised")
    if len(data) != (2 if node.op in ("Where", "Max", "Min") else 1) or len(node.inputs) > (3 if node.op == "Where" else 2):
        raise UnsupportedOpError(f"{where(node)}: this form of {node.op} is not characterised on the HTP")
    if node.op in ("ReduceMin", "Min") and outs[0].dtype == "int16":  # measured: left to the CPU EP
        raise UnsupportedOpError(f"{where(node)}: onnxruntime-qnn's QNN EP does not run an int16 {node.op} on the "
                                 "HTP, so it is not characterised there")
    axes, k, index_dtype = None, 0, ""
    if node.op in ("ReduceMax", "ReduceMin"):
        rank = len(ctx.inputs[0].shape) if ctx.inputs[0].shape is not None else None
        c = ctx.const(1)
        if len(node.inputs) > 1 and node.inputs[1] and c is None:
            raise UnsupportedOpError(f"{where(node)}: {node.op} axes that are not constant are not characterised")
        if c is not None and np.size(c):
            if rank is None:
                raise UnsupportedOpError(f"{where(node)}: {node.op} on an input of unknown rank")
            axes = tuple(sorted(int(a) % rank for a in np.asarray(c).ravel()))
        elif int(node.attr("noop_with_empty_axes", 0)):
            raise UnsupportedOpError(f"{where(node)}: {node.op} with noop_with_empty_axes is not characterised")
    if node.op == "TopK":
        c = ctx.const(1)
        if c is None or np.size(c) != 1:
            raise UnsupportedOpError(f"{where(node)}: a TopK k that is not a constant is not characterised")
        if not int(node.attr("sorted", 1)):
            raise UnsupportedOpError(f"{where(node)}: TopK with sorted=0 is not characterised on the HTP")
        kind = node.attrs.get("htp_input_from", "input")
        if kind not in TOPK_MEASURED:
            raise UnsupportedOpError(f"{where(node)}: a TopK of codes made by "
                                     f"{'a graph input' if kind == 'input' else kind}: the HTP folds it into the "
                                     "producer there, not characterised")
        k = int(np.asarray(c).ravel()[0])
        axes = (int(node.attr("axis", -1)),)
        index_dtype = ctx.outputs[1].dtype if len(ctx.outputs) > 1 and ctx.outputs[1] is not None else "int64"
    return HtpSelectPlan(node.op, axes, bool(int(node.attr("keepdims", 1))), k, bool(int(node.attr("largest", 1))),
                         index_dtype)


def _topk(p: HtpSelectPlan, x):
    ax = p.axes[0] % x.ndim
    n = x.shape[ax]
    # equal codes: the higher index first -- a stable sort of the reversed axis, indices mapped back
    rev = np.flip(x.astype(np.int64), axis=ax)
    order = np.argsort(-rev if p.largest else rev, axis=ax, kind="stable")
    idx = (n - 1) - np.take(order, np.arange(p.k), axis=ax)
    return np.take_along_axis(x, idx, axis=ax), idx.astype(p.index_dtype)


def _run(p: HtpSelectPlan, *args):
    if p.op == "Where":
        cond, a, b = args
        return np.where(np.asarray(cond).astype(bool), a, b).astype(a.dtype)
    if p.op in ("Max", "Min"):
        a, b = args
        return (np.maximum if p.op == "Max" else np.minimum)(a, b).astype(a.dtype)
    x = args[0]
    if p.op == "TopK":
        return _topk(p, x)
    if p.op == "GlobalMaxPool":
        return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
    f = np.max if p.op == "ReduceMax" else np.min
    return f(x, axis=p.axes, keepdims=p.keepdims)


for _variant in ARCHS:
    for _op in _SELECT:
        htp_kernel(_op, _variant, _prepare)(_run)
