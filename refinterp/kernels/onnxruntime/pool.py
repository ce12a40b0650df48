"""ONNX Runtime CPU integer pooling and softmax (variant ``ort``): MaxPool on stored integers,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearSoftmax.

Numeric contracts (docs/arithmetic/README.md; sources cited in refinterp/quant/mlas.py):
* MaxPool: max of stored integers (exact; padding never wins).
* AveragePool (qlinear_pool.cc): x dequantized to float32 f32(xs * f32(x - zx)); window summed in
  float32 in row-major cell order; divided by the cell count; y = sat(RNE(f32(f32(avg / ys) + zy))).
  A window covering the whole unpadded spatial extent runs the GlobalAveragePool path (as ORT does).
  ``int8_as_uint8`` (fuse_qdq_x86 pass): the float zero point is zy + 128, the result shifted back.
* GlobalAveragePool (qlgavgpool.cpp): acc = sum(x) - zx * N exact; y = MlasRequantizeOutput(acc,
  f32(xs / f32(ys * N))).
* Softmax (qlinear_softmax.cc, float table): table[i] = f32(exp((i - 255 + b) * xs)) in double with
  b = max(0, log(FLT_MAX / D) - 5) / xs; per row the value of x is table[x - max(x) + 255], the row
  sum is accumulated sequentially in float32; y = nearbyintf(f32(t * floor(1/ys)) / sum) + zy
  saturated above at the type's max (observed on onnxruntime 1.31.1 for int8: 128 -> 127; older
  sources wrap int8 values in (127, 255]).  x's zero point
  is ignored (softmax is shift invariant).  The reduced axis is ``axis`` (opset-13 form).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refinterp.quant import mlas
from ..float import pool as float_pool
from .common import ort_kernel
from ..tflite.common import qparams, qrange
from ..spatial import to_channels_last
from ..prepared import per_shape
from ..registry import require

_FLT_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class FloatOnCodesPlan:
    fplan: Any  # the float kernel's plan, run on the stored integers
    dtype: str
    fk: Any = None  # the float kernel (Resize)


@dataclass(frozen=True)
class AvgPoolPlan:
    xs: float
    zx: int
    ys: float
    zy: int  # + shift
    lo: int
    hi: int
    dtype: str
    layout: str
    shift: int = 0  # 128: an int8 tensor computed as uint8 (``int8_as_uint8``)
    fplan: Any = None  # AveragePool: the float pool's plan


@dataclass(frozen=True)
class QSoftmaxPlan:
    xs: float
    zy: int
    ys_inv: np.float32
    axis: int
    dtype: str


def _maxpool_prepare(node, ctx) -> FloatOnCodesPlan:
    return FloatOnCodesPlan(float_pool.prepare_node(node, ctx), ctx.outputs[0].dtype)


@ort_kernel("MaxPool", "ort", _maxpool_prepare)
def ort_max_pool(p, x):
    y = float_pool.max_pool(p.fplan, np.asarray(x).astype(np.float32))
    y = y[0] if isinstance(y, tuple) else y
    return y.astype(p.dtype)


def gap_prepare(node, ctx) -> AvgPoolPlan:
    xs, zx = qparams(ctx.inputs[0], node, "X")
    ys, zy = qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    return AvgPoolPlan(xs, zx, ys, zy, lo, hi, ctx.outputs[0].dtype, node.attrs.get("layout") or "NCHW")


def gap_window_sum(p, x: np.ndarray) -> tuple[np.ndarray, int]:
    """(exact sum of x - zx over the spatial axes, kept as size-1 axes; the cell count n)."""
    axes = tuple(range(1, x.ndim - 1)) if p.layout == "NHWC" else tuple(range(2, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    return np.asarray(x).astype(np.int64).sum(axis=axes, keepdims=True) - p.zx * n, n


def _gap(p, x: np.ndarray) -> np.ndarray:
    acc, n = gap_window_sum(p, x)
    return mlas.gap_mlas(acc, n, p.xs, p.ys, p.zy, p.lo, p.hi).astype(p.dtype)


@ort_kernel("GlobalAveragePool", "ort", gap_prepare)
def ort_global_average_pool(p, x):
    return _gap(p, np.asarray(x))


def _avg_prepare(node, ctx):
    p = gap_prepare(node, ctx)
    if node.attrs.get("int8_as_uint8") and p.dtype == "int8":  # see passes/qdq.py fuse_qdq_x86
        p = replace(p, zy=p.zy + 128, lo=0, hi=255, shift=128)
    return replace(p, fplan=float_pool.prepare_node(node, ctx))


def _is_global(plan, spatial) -> bool:
    pads = plan.pads or ()
    return (plan.kernel_shape is not None and tuple(plan.kernel_shape) == tuple(spatial)
            and not any(pads) and str(plan.auto_pad).upper() in ("NOTSET", "VALID"))


@ort_kernel("AveragePool", "ort", _avg_prepare)
def ort_average_pool(p, x):
    x = np.asarray(x)
    spatial = to_channels_last(x, p.layout).shape[1:-1]
    if _is_global(p.fplan, spatial):
        return _gap(replace(p, zy=p.zy - p.shift, lo=p.lo - p.shift, hi=p.hi - p.shift), x)
    xf = (np.float32(p.xs) * (x.astype(np.int64) - p.zx).astype(np.float32)).astype(np.float32)
    avg = float_pool.average_pool(p.fplan, xf)
    y = mlas.avgpool_requant(avg, p.ys, p.zy, p.lo, p.hi) - p.shift
    return y.astype(p.dtype)


def _softmax_prepare(node, ctx):
    xt, yt = ctx.inputs[0], ctx.outputs[0]
    xs, _ = qparams(xt, node, "X")
    ys, zy = qparams(yt, node, "Y")
    return QSoftmaxPlan(xs, zy, np.float32(np.floor(np.float32(1.0) / np.float32(ys))),
                        int(node.attrs.get("axis", -1)), yt.dtype)


def _softmax_table(xs: np.float32, d: int) -> np.ndarray:
    shift = max(0.0, np.log(_FLT_MAX / d) - 5.0) / float(xs)
    i = np.arange(256, dtype=np.float64)
    return np.exp((i - 255.0 + shift) * float(xs)).astype(np.float32)


@ort_kernel("Softmax", "ort", _softmax_prepare)
def ort_softmax(p, x):
    x = np.moveaxis(np.asarray(x).astype(np.int64), p.axis, -1)
    d = x.shape[-1]
    table = per_shape(p, "softmax_table", (d,), lambda plan: _softmax_table(plan.xs, d))
    t = table[x - x.max(axis=-1, keepdims=True) + 255]
    vsum = np.cumsum(t, axis=-1, dtype=np.float32)[..., -1:]  # sequential float32 sum
    q = np.rint((t * p.ys_inv).astype(np.float32) / vsum).astype(np.int64) + p.zy
    q = np.minimum(q, 127 if p.dtype == "int8" else 255)
    return np.moveaxis(q.astype(p.dtype), -1, p.axis)


def _resize_prepare(node, ctx):
    fk = require("Resize", "float")
    return FloatOnCodesPlan(fk.prepare(node, ctx), ctx.outputs[0].dtype, fk)


@ort_kernel("Resize", "ort", _resize_prepare)
def ort_resize(p, x, *rest):
    """Resize on stored integers (ORT's uint8/int8 Resize): the interpolation of the float kernel on
    the codes, then static_cast<T> (truncation toward zero).  Verified for nearest and 2x linear
    (half_pixel, asymmetric); ORT's own float weights/order can differ by 1 ulp elsewhere (an
    align_corners case differed in 1 of 360 elements)."""
    y = p.fk.run(p.fplan, np.asarray(x).astype(np.float32), *rest)
    info = np.iinfo(np.dtype(p.dtype))
    return np.clip(np.trunc(y), info.min, info.max).astype(p.dtype)
