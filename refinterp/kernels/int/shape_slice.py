"""Slice, StridedSlice (TFLite masks), Gather and Split: index selection, dtype-agnostic."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from refinterp.ir import Node
from ..registry import PrepareContext, kernel
from .shape import BOTH, input_or_attr, ints, where


def _py_slice(start: int, stop: int, step: int) -> slice:
    """Python slice for already-clamped ONNX/TFLite bounds (-1 = 'before index 0' when step < 0)."""
    if step < 0:
        if start < 0:
            return slice(0, 0, 1)
        return slice(start, None if stop < 0 else stop, step)
    return slice(start, stop, step)


# -- Slice (ONNX) -----------------------------------------------------------------------------

@dataclass(frozen=True)
class SlicePlan:
    # each None: that input is computed at run time (or absent)
    starts: list[int] | None
    ends: list[int] | None
    axes: list[int] | None
    steps: list[int] | None
    where: str


def _slice_prepare(node: Node, ctx: PrepareContext) -> SlicePlan:
    return SlicePlan(input_or_attr(node, ctx, 1, "starts"), input_or_attr(node, ctx, 2, "ends"),
                     input_or_attr(node, ctx, 3, "axes"), input_or_attr(node, ctx, 4, "steps"), where(node))


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


@kernel("Slice", BOTH, prepare=_slice_prepare)
def _slice(plan, x, starts=None, ends=None, axes=None, steps=None):
    st = plan.starts if plan.starts is not None else ints(starts)
    en = plan.ends if plan.ends is not None else ints(ends)
    ax = plan.axes if plan.axes is not None else ints(axes)
    sp = plan.steps if plan.steps is not None else ints(steps)
    ax = list(range(len(st))) if ax is None else ax
    sp = [1] * len(st) if sp is None else sp
    idx = [slice(None)] * x.ndim
    for s, e, a, k in zip(st, en, ax, sp):
        if k == 0:
            raise InputError(f"{plan.where}: Slice step 0")
        a %= x.ndim
        d = x.shape[a]
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if k > 0:
            s, e = _clamp(s, 0, d), _clamp(e, 0, d)
        else:
            s, e = _clamp(s, 0, d - 1), _clamp(e, -1, d - 1)
        idx[a] = _py_slice(s, e, k)
    return x[tuple(idx)]


# -- StridedSlice (TFLite) ---------------------------------------------------------------------

@dataclass(frozen=True)
class StridedSlicePlan:
    begin_mask: int
    end_mask: int
    ellipsis_mask: int
    new_axis_mask: int
    shrink_axis_mask: int
    offset: bool
    begin: np.ndarray | None  # None: computed at run time
    end: np.ndarray | None
    strides: np.ndarray | None
    where: str


def _strided_prepare(node: Node, ctx: PrepareContext) -> StridedSlicePlan:
    masks = [int(node.attr(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                            "shrink_axis_mask")]
    return StridedSlicePlan(*masks, bool(node.attr("offset", False)), ctx.const(1), ctx.const(2), ctx.const(3),
                            where(node))


def _start_for_axis(b: int, d: int, k: int, masked: bool) -> int:
    # LiteRT strided_slice_logic: negative index + size, clamp to [0, d] (k > 0) / [-1, d-1] (k < 0),
    # then begin_mask overrides with the first element in iteration order.
    if masked:
        return 0 if k > 0 else d - 1
    b = b + d if b < 0 else b
    return _clamp(b, 0, d) if k > 0 else _clamp(b, -1, d - 1)


def _end_for_axis(e: int, d: int, k: int, start: int, masked: bool, offset: bool) -> int:
    if masked:
        return d if k > 0 else -1
    if offset:
        e += start
    e = e + d if e < 0 else e
    return _clamp(e, 0, d) if k > 0 else _clamp(e, -1, d - 1)


@kernel("StridedSlice", BOTH, prepare=_strided_prepare)
def _strided_slice(plan, x, begin=None, end=None, strides=None):
    b = ints(plan.begin if plan.begin is not None else begin)
    e = ints(plan.end if plan.end is not None else end)
    s = plan.strides if plan.strides is not None else strides
    s = [1] * len(b) if s is None else ints(s)
    bm, em, elm, nm, sm = (getattr(plan, k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                               "new_axis_mask", "shrink_axis_mask"))
    # Specs consume input dims left to right; new axes consume none; the ellipsis expands to
    # however many full-range dims are left over (TF / NumPy indexing semantics).
    consuming = sum(1 for i in range(len(b)) if not (nm >> i) & 1 and not (elm >> i) & 1)
    index: list = []
    dim = 0
    for i in range(len(b)):
        if (elm >> i) & 1:
            n = max(x.ndim - consuming, 0)
            index.extend([slice(None)] * n)
            dim += n
            continue
        if (nm >> i) & 1:
            index.append(np.newaxis)
            continue
        if dim >= x.ndim:
            raise InputError(f"{plan.where}: StridedSlice has more index specs than input dims")
        d, k = x.shape[dim], s[i]
        if k == 0:
            raise InputError(f"{plan.where}: StridedSlice stride 0")
        start = _start_for_axis(b[i], d, k, bool((bm >> i) & 1))
        if (sm >> i) & 1:
            if not 0 <= start < d:
                raise InputError(f"{plan.where}: StridedSlice shrink index {b[i]} out of range {d}")
            index.append(start)
        else:
            stop = _end_for_axis(e[i], d, k, start, bool((em >> i) & 1), plan.offset)
            index.append(_py_slice(start, stop, k))
        dim += 1
    return np.array(x[tuple(index)], copy=True)  # (ascontiguousarray would turn a shrunk scalar into 1-D)


# -- Gather -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class GatherPlan:
    axis: int
    where: str


def _gather_prepare(node: Node, ctx: PrepareContext) -> GatherPlan:
    if int(node.attr("batch_dims", 0)) != 0:
        raise UnsupportedOpError(f"{where(node)}: Gather with batch_dims != 0 is not supported")
    return GatherPlan(int(node.attr("axis", 0)), where(node))


@kernel("Gather", BOTH, prepare=_gather_prepare)
def _gather(plan, x, indices):
    ax = plan.axis % x.ndim
    idx = np.asarray(indices).astype(np.int64)
    d = x.shape[ax]
    idx = np.where(idx < 0, idx + d, idx)
    if idx.size and (idx.min() < 0 or idx.max() >= d):
        raise InputError(f"{plan.where}: Gather index out of range for axis size {d}")
    return np.take(x, idx, axis=ax)


# -- Split ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SplitPlan:
    axis: int
    split: list[int] | None  # None: equal parts, or sizes given at run time
    n: int
    where: str


def _split_prepare(node: Node, ctx: PrepareContext) -> SplitPlan:
    return SplitPlan(int(node.attr("axis", 0)), input_or_attr(node, ctx, 1, "split"),
                     int(node.attr("num_outputs", 0) or node.attr("num_splits", 0) or len(node.outputs)), where(node))


@kernel("Split", BOTH, prepare=_split_prepare)
def _split(plan, x, split=None):
    ax = plan.axis % x.ndim
    d = x.shape[ax]
    sizes = plan.split if plan.split is not None else ints(split)
    if sizes:
        if -1 in sizes:  # TFLite SPLIT_V: one size inferred
            sizes = list(sizes)
            sizes[sizes.index(-1)] = d - (sum(sizes) + 1)
        if sum(sizes) != d:
            raise InputError(f"{plan.where}: Split sizes {sizes} do not sum to {d}")
    else:
        n = plan.n
        chunk = -(-d // n)  # ONNX opset 18: ceil(d / n), the last chunk may be smaller
        sizes = [min(chunk, max(d - i * chunk, 0)) for i in range(n)]
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, cuts, axis=ax))
