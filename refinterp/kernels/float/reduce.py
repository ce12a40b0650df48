"""Reductions (ONNX opset-18 form: ``axes`` is an optional input) and ArgMax / ArgMin.

Sums and products accumulate in the input dtype (float32 stays float32; integer sums wrap) with
NumPy's pairwise summation.  Reducing an empty set gives the ONNX identities: 0 for sums, 1 for
products, -inf / +inf (or the integer type's min / max) for ReduceMax / ReduceMin.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.ir import Node
from ..registry import PrepareContext, kernel

_REDUCE_OPS = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceAny", "ReduceAll",
               "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


@dataclass(frozen=True)
class ReducePlan:
    op: str
    keepdims: bool
    noop: bool  # noop_with_empty_axes
    axes: list[int] | None  # None: every axis, or given at run time (``dynamic_axes``)
    dynamic_axes: bool


def _reduce_prepare(node: Node, ctx: PrepareContext) -> ReducePlan:
    axes = ctx.const(1)
    if axes is None and "axes" in node.attrs:  # pre-opset-18 attribute form
        axes = np.asarray(node.attrs["axes"], dtype=np.int64)
    return ReducePlan(node.op, bool(int(node.attr("keepdims", 1))), bool(int(node.attr("noop_with_empty_axes", 0))),
                      None if axes is None else [int(a) for a in np.asarray(axes).ravel()],
                      axes is None and len(node.inputs) > 1 and bool(node.inputs[1]))


def _extreme(dtype: np.dtype, high: bool):
    if dtype.kind == "f":
        return dtype.type(np.inf if high else -np.inf)
    if dtype.kind == "b":
        return dtype.type(high)
    info = np.iinfo(dtype)
    return dtype.type(info.max if high else info.min)


def _reduce(op: str, x: np.ndarray, ax: tuple[int, ...], keep: bool) -> np.ndarray:
    dt = x.dtype
    w = x.astype(np.float32) if dt == np.float16 else x
    if op == "ReduceSum":
        return np.sum(w, axis=ax, keepdims=keep, dtype=w.dtype)
    if op == "ReduceMean":
        if x.size == 0 or any(x.shape[a] == 0 for a in ax):
            s = np.sum(w, axis=ax, keepdims=keep, dtype=w.dtype)
            with np.errstate(invalid="ignore", divide="ignore"):
                return s / w.dtype.type(0) if w.dtype.kind == "f" else s
        if w.dtype.kind in "iu":
            n = int(np.prod([x.shape[a] for a in ax]))
            return np.sum(w, axis=ax, keepdims=keep, dtype=w.dtype) // n
        return np.mean(w, axis=ax, keepdims=keep, dtype=w.dtype)
    if op == "ReduceAny":  # TFLite REDUCE_ANY / REDUCE_ALL: bool tensors
        return np.any(w, axis=ax, keepdims=keep)
    if op == "ReduceAll":
        return np.all(w, axis=ax, keepdims=keep)
    if op == "ReduceMax":
        return np.max(w, axis=ax, keepdims=keep, initial=_extreme(w.dtype, False))
    if op == "ReduceMin":
        return np.min(w, axis=ax, keepdims=keep, initial=_extreme(w.dtype, True))
    if op == "ReduceProd":
        return np.prod(w, axis=ax, keepdims=keep, dtype=w.dtype)
    if op == "ReduceL1":
        return np.sum(np.abs(w), axis=ax, keepdims=keep, dtype=w.dtype)
    if op == "ReduceSumSquare":
        return np.sum(w * w, axis=ax, keepdims=keep, dtype=w.dtype)
    if op == "ReduceL2":
        s = np.sum(w * w, axis=ax, keepdims=keep, dtype=w.dtype)
        return np.sqrt(s.astype(np.float64) if s.dtype.kind in "iu" else s)
    with np.errstate(divide="ignore"):
        if op == "ReduceLogSum":
            return np.log(np.sum(w, axis=ax, keepdims=keep, dtype=w.dtype))
        # ReduceLogSumExp: max-shifted so large inputs do not overflow.
        if w.size == 0:
            return np.log(np.sum(np.exp(w), axis=ax, keepdims=keep))
        m = np.max(w, axis=ax, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(w.dtype)
        s = np.log(np.sum(np.exp(w - m), axis=ax, keepdims=True)) + m
        return s if keep else np.squeeze(s, axis=ax)


def _reduce_run(plan, x, axes=None):
    axes_list = plan.axes
    if axes_list is None and axes is not None:
        axes_list = [int(a) for a in np.asarray(axes).ravel()]
    if not axes_list:
        # noop_with_empty_axes reduces over the empty set: only the element-wise part applies
        # (ReduceSumSquare squares, ReduceL2 takes |x| ...), as onnx.reference and ONNX Runtime do.
        ax = () if plan.noop else tuple(range(x.ndim))
    else:
        ax = tuple(sorted({a % x.ndim for a in axes_list})) if x.ndim else ()
    y = _reduce(plan.op, x, ax, plan.keepdims)
    return np.asarray(y).astype(x.dtype, copy=False)


for _op in _REDUCE_OPS:
    kernel(_op, "float", prepare=_reduce_prepare)(_reduce_run)


@dataclass(frozen=True)
class ArgPlan:
    axis: int
    keepdims: bool
    last: bool  # select_last_index
    dtype: np.dtype
    max: bool


def _arg_prepare(node: Node, ctx: PrepareContext) -> ArgPlan:
    axis = node.attr("axis")
    if axis is None:  # TFLite ARG_MAX / ARG_MIN pass the axis as a constant input
        c = ctx.const(1)
        axis = 0 if c is None else int(np.asarray(c).ravel()[0])
    out = ctx.outputs[0].dtype if ctx.outputs and ctx.outputs[0].dtype else "int64"
    return ArgPlan(int(axis), bool(int(node.attr("keepdims", 1))), bool(int(node.attr("select_last_index", 0))),
                   np.dtype(out), node.op == "ArgMax")


@kernel(("ArgMax", "ArgMin"), ("float", "int"), prepare=_arg_prepare)
def _arg(plan, x, axis_in=None):
    ax = plan.axis % max(x.ndim, 1)
    fn = np.argmax if plan.max else np.argmin
    if plan.last:
        idx = x.shape[ax] - 1 - fn(np.flip(x, axis=ax), axis=ax, keepdims=True)
    else:
        idx = fn(x, axis=ax, keepdims=True)
    if not plan.keepdims:
        idx = np.squeeze(idx, axis=ax)
    return idx.astype(plan.dtype)
