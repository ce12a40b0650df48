"""Float pooling: MaxPool (+ optional Indices), AveragePool, LpPool and the Global* pools.

Windows follow ONNX (kernel_shape, strides, dilations, pads/auto_pad, ceil_mode); ``layout`` picks
NCHW or NHWC.  Average divisor: with count_include_pad the cells of the explicit/SAME padding count,
never the extra cells a ceil_mode window hangs past the padding (ORT / onnx.reference rule); without
it only real input cells count (TFLite AVERAGE_POOL_2D).  Sums accumulate in float32 (float64 for
float64 input).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ..spatial import (compute_dtype, from_channels_last, ints, out_dtype, pad_channels_last,
                       resolve_window, to_channels_last, window_offsets)
from ..registry import kernel


@dataclass(frozen=True)
class PoolPlan:
    name: str
    layout: str
    kernel_shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    dilations: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    auto_pad: str
    ceil_mode: bool
    count_include_pad: bool
    storage_order: int
    p: float
    n_outputs: int
    mean: bool  # LpPool only: divide by the cell count before the root (TFLite L2_POOL_2D)


def prepare_node(node, ctx) -> PoolPlan:
    a = node.attrs
    ks = a.get("kernel_shape")
    if ks is None:
        raise ModelError(f"node '{node.name}' ({node.op}): missing kernel_shape")
    tup = (lambda v: None if v is None else tuple(int(t) for t in np.asarray(v).ravel()))
    return PoolPlan(node.name, a.get("layout") or "NCHW", tup(ks), tup(a.get("strides")),
                    tup(a.get("dilations")), tup(a.get("pads")), str(a.get("auto_pad", "NOTSET") or "NOTSET"),
                    bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0)),
                    int(a.get("storage_order", 0)), float(a.get("p", 2)),
                    len([o for o in node.outputs if o]), bool(a.get("mean", 0)))


def window(plan: PoolPlan, spatial):
    n = len(spatial)
    if len(plan.kernel_shape) != n:
        raise ModelError(f"node '{plan.name}': kernel_shape {plan.kernel_shape} vs {n} spatial dims")
    return resolve_window(spatial, plan.kernel_shape, ints(plan.strides, n, 1), ints(plan.dilations, n, 1),
                          plan.pads, plan.auto_pad, plan.ceil_mode, where=plan.name)


def _flat_index(pos: list[np.ndarray], spatial, n: int, c: int, col_major: bool) -> np.ndarray:
    """ONNX MaxPool Indices: flat offset in (N, C, *S), spatial part row- or column-major."""
    sp = np.zeros(np.broadcast_shapes(*[p.shape for p in pos]), dtype=np.int64)
    order = range(len(spatial) - 1, -1, -1) if col_major else range(len(spatial))
    for i in order:
        sp = sp * spatial[i] + pos[i]
    size = int(np.prod(spatial))
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * size  # (N, C)
    shape_nc = (n,) + (1,) * len(spatial) + (c,)
    return sp[None, ..., None] + base.reshape(shape_nc)


@kernel("MaxPool", "float", prepare=prepare_node)
def max_pool(plan: PoolPlan, x):
    """Ties keep the first kernel cell in row-major kernel order (as ORT); padding never wins."""
    xc = to_channels_last(x, plan.layout)
    spatial = xc.shape[1:-1]
    win = window(plan, spatial)
    low = -np.inf if xc.dtype.kind == "f" else np.iinfo(xc.dtype).min
    xp = pad_channels_last(xc, win, low)
    want_idx = plan.n_outputs > 1
    best = idx = None
    for kidx, sl in window_offsets(win):
        cand = xp[(slice(None),) + sl]
        if want_idx:
            flat = _flat_index(_positions(win, kidx), spatial, xc.shape[0], xc.shape[-1],
                               plan.storage_order == 1)
        if best is None:
            best = cand.copy()
            if want_idx:
                idx = np.broadcast_to(flat, best.shape).copy()
        elif want_idx:
            cur = cand > best
            best = np.where(cur, cand, best)
            idx = np.where(cur, flat, idx)
        else:
            np.maximum(best, cand, out=best)
    y = from_channels_last(best, plan.layout)
    if want_idx:
        return y, from_channels_last(idx, plan.layout)
    return y


def _positions(win, kidx) -> list[np.ndarray]:
    """Unpadded input coordinate of kernel cell ``kidx`` for every output position, per spatial dim."""
    n = len(kidx)
    pos = []
    for i, (k, d, s, o, pb) in enumerate(zip(kidx, win.dilations, win.strides, win.out, win.pad_begin)):
        view = [1] * n
        view[i] = -1
        pos.append((np.arange(o) * s + k * d - pb).reshape(view))
    return pos


def sum_windows(xp: np.ndarray, win, cdt, fn=None) -> np.ndarray:
    acc = np.zeros((xp.shape[0],) + win.out + (xp.shape[-1],), dtype=cdt)
    for _, sl in window_offsets(win):
        v = xp[(slice(None),) + sl]
        acc += v if fn is None else fn(v)
    return acc


def _count(plan: PoolPlan, win, spatial, cdt) -> np.ndarray:
    """Divisor per output position, shape (1, *O, 1): cells counted under count_include_pad."""
    mask = np.ones((1,) + tuple(spatial) + (1,), dtype=cdt)
    if plan.count_include_pad:
        cfg = [(0, 0)] + list(zip(win.pad_begin, win.pad_end)) + [(0, 0)]
        mask = np.pad(mask, cfg, constant_values=1.0)
        inner = type(win)(win.kernel, win.strides, win.dilations, (0,) * len(spatial),
                          (0,) * len(spatial), win.out)
        return sum_windows(pad_channels_last(mask, inner), inner, cdt)
    return sum_windows(pad_channels_last(mask, win), win, cdt)


@kernel("AveragePool", "float", prepare=prepare_node)
def average_pool(plan: PoolPlan, x):
    cdt = compute_dtype(x)
    xc = to_channels_last(x, plan.layout).astype(cdt, copy=False)
    spatial = xc.shape[1:-1]
    win = window(plan, spatial)
    total = sum_windows(pad_channels_last(xc, win), win, cdt)
    y = total / _count(plan, win, spatial, cdt)
    return from_channels_last(y, plan.layout).astype(out_dtype(x), copy=False)


@kernel("LpPool", "float", prepare=prepare_node)
def lp_pool(plan: PoolPlan, x):
    """ONNX: (sum |x|^p)^(1/p), padding adds 0.  Canonical extra ``mean`` = 1 (TFLite L2_POOL_2D):
    (sum |x|^p / count)^(1/p) with count as AveragePool's (padding excluded unless count_include_pad)."""
    cdt = compute_dtype(x)
    xc = to_channels_last(x, plan.layout).astype(cdt, copy=False)
    spatial = xc.shape[1:-1]
    win = window(plan, spatial)
    p = plan.p
    total = sum_windows(pad_channels_last(xc, win), win, cdt, lambda v: np.abs(v) ** p)
    if plan.mean:
        total = total / _count(plan, win, spatial, cdt)
    y = total ** (1.0 / p)
    return from_channels_last(y.astype(cdt), plan.layout).astype(out_dtype(x), copy=False)


def _global_axes(plan, x):
    return tuple(range(1, x.ndim - 1)) if plan.attr("layout") == "NHWC" else tuple(range(2, x.ndim))


@kernel("GlobalAveragePool", "float")
def global_average_pool(plan, x):
    cdt = compute_dtype(x)
    return np.mean(x.astype(cdt, copy=False), axis=_global_axes(plan, x), keepdims=True).astype(out_dtype(x))


@kernel("GlobalMaxPool", "float")
def global_max_pool(plan, x):
    return np.max(x, axis=_global_axes(plan, x), keepdims=True)


@kernel("GlobalLpPool", "float")
def global_lp_pool(plan, x):
    cdt = compute_dtype(x)
    p = float(plan.attr("p", 2))
    s = np.sum(np.abs(x.astype(cdt, copy=False)) ** p, axis=_global_axes(plan, x), keepdims=True)
    return (s ** (1.0 / p)).astype(out_dtype(x))
