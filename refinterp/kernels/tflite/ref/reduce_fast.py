"""Fast TFLite integer MEAN / SUM (one Numba pass), bit-exact with the NumPy kernels it replaces:
``reduce.qmean_or_sum`` (LiteRT reference / TFLM: ``QuantizedMeanOrSum``, impl ``typed`` and
``uint8_bytes``) and ``optimized.reduce._run_fast`` forms ``spatial_fast`` (LiteRT optimized int8 MEAN
over H, W) and ``xnn_float`` (XNNPACK MEAN / SUM).

Covered when the reduced axes are one contiguous block of dims (e.g. {1, 2} of NHWC, the last
axis, all axes): the input is viewed as (outer, R, inner) and summed over R in int64 (exact:
R * 2^16 < 2^63), then wrapped to int32 as the NumPy ``wrap_int32(np.sum(...))``.  Finish:

* reference: ``clamp(rescale(wrap32(S - zx*n), M', e') + zo)`` with MEAN's M' = (M << k) // n,
  e' = e - k, k = min(floor(log2 n), 32, 31 + e), in the plan's integer rounding (``quant.fixedpoint_nb``);
* spatial_fast: the plan's ``Requant`` through ``requant.fused_runner`` (channel blocks included);
* xnn_float: ``clamp(rint_even(float32(float32(S) * scale) + yzp))`` with scale / yzp computed
  here in NumPy float32 exactly as the NumPy kernel does.

Other axis sets, empty reductions, the optimized float_scale SUM and roundings without a loop
form return None (the NumPy path runs).
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.quant.params import qrange
from ...prepared import per_shape
from refinterp.quant.fixedpoint_nb import forms, mbqm_double, mbqm_single, mbqm_upward, wrap32
from .requant_fast import fused_runner, rq_arrays



@numba.njit(cache=True)
def _sum_mid(x3):  # pragma: no cover - compiled
    """int32-wrapped sums over the middle axis of an (outer, R, inner) array."""
    outer, R, inner = x3.shape
    acc = np.zeros((outer, inner), np.int64)
    for o in range(outer):
        for r in range(R):
            for i in range(inner):
                acc[o, i] += x3[o, r, i]
    for o in range(outer):
        for i in range(inner):
            acc[o, i] = wrap32(acc[o, i])
    return acc


@numba.njit(cache=True)
def _finish_ref(s, zxn, code, M, p1, p2, zo, lo, hi, out):  # pragma: no cover - compiled
    a = s.reshape(-1)
    o = out.reshape(-1)
    for i in range(a.size):
        v = wrap32(a[i] - zxn)
        if code == 0:
            y = mbqm_double(v, M, p1, p2)
        elif code == 1:
            y = mbqm_upward(v, M, p1, p2)
        else:
            y = mbqm_single(v, M, p1)
        o[i] = min(max(y + zo, lo), hi)


@numba.njit(cache=True)
def _finish_xnn(s, scale, yzp, lo, hi, out):  # pragma: no cover - compiled
    a = s.reshape(-1)
    o = out.reshape(-1)
    flo, fhi = np.float32(lo), np.float32(hi)
    for i in range(a.size):
        v = np.rint(np.float32(np.float32(np.float32(a[i]) * scale) + yzp))
        o[i] = np.int64(min(max(v, flo), fhi))


def _block(plan, shape: tuple) -> tuple[int, int, int, tuple] | None:
    """(outer, R, inner, output shape) when the reduced axes are one contiguous block."""
    nd = len(shape)
    if nd == 0:
        return None
    ax = tuple(range(nd)) if not plan.axes else tuple(sorted({int(a) % nd for a in plan.axes}))
    if ax != tuple(range(ax[0], ax[-1] + 1)):
        return None
    outer = int(np.prod(shape[:ax[0]], dtype=np.int64))
    R = int(np.prod(shape[ax[0]:ax[-1] + 1], dtype=np.int64))
    inner = int(np.prod(shape[ax[-1] + 1:], dtype=np.int64))
    if R == 0 or outer * inner == 0:
        return None
    oshape = tuple(1 if i in ax else d for i, d in enumerate(shape)) if plan.keepdims else \
        tuple(d for i, d in enumerate(shape) if i not in ax)
    return outer, R, inner, oshape


def _ref_finish(plan, n: int):
    """(code, M, p1, p2) of the reference requantization for ``n`` reduced elements, or None."""
    M, sh = plan.M, plan.shift
    if plan.op == "ReduceMean":
        k = min(n.bit_length() - 1, 32, 31 + sh)
        M = (M << k) // n
        sh = sh - k
    return forms(M, sh, plan.rounding)


def _xnn_scales(plan, n: int):
    scale = np.float32(plan.sx / plan.so)
    if plan.op == "ReduceMean":
        scale = np.float32(scale * np.float32(np.float32(1.0) / np.float32(n)))
    yzp = np.float32(np.float32(plan.zo) - np.float32(n * plan.zx) * scale)
    return scale, yzp


def fast_reduce(plan, x) -> np.ndarray | None:
    """``reduce.qmean_or_sum`` (a ``QReducePlan``) or ``optimized.reduce._run_fast`` (a
    ``FastReducePlan``) for MEAN / SUM, or None when not covered."""
    form = getattr(plan, "form", "reference")
    if plan.op not in ("ReduceMean", "ReduceSum") or form not in ("reference", "spatial_fast", "xnn_float"):
        return None
    x = np.asarray(x)
    dt = np.dtype(plan.dtype)
    byte_view = form == "reference" and plan.impl == "uint8_bytes"
    if form == "reference" and plan.impl not in ("typed", "uint8_bytes"):
        return None
    if x.dtype.kind not in "iu" or x.dtype.itemsize > 2 or (byte_view and x.dtype.itemsize != 1):
        return None
    # finish data per input shape (False: not covered), kept for a few recent shapes
    fin = per_shape(plan, ("mean", x.dtype.str, byte_view), x.shape, _finish_of, form, x.shape, byte_view)
    if fin is False:
        return None
    (outer, R, inner, oshape), kind, data = fin
    s = _sum_mid(np.ascontiguousarray(x.view(np.uint8) if byte_view else x).reshape(outer, R, inner))
    if kind == "rq":
        out = np.empty(s.shape, np.uint8 if byte_view else dt)
        _finish_ref(s, *data, out)
        if byte_view:
            out = out.view(np.int8) if dt == np.int8 else out.astype(dt)
    elif kind == "xnn":
        out = np.empty(s.shape, dt)
        _finish_xnn(s, *data, out)
    else:
        out = np.empty(s.shape, dt)
        runner, zero_bias = data
        runner(s, zero_bias, out)
    return out.reshape(oshape)


def _finish_of(plan, form: str, shape: tuple, byte_view: bool):
    blk = _block(plan, shape)
    if blk is None:
        return False
    n = blk[1]
    if form == "reference":
        f = _ref_finish(plan, n)
        if f is None:
            return False
        lo, hi = (0, 255) if byte_view else qrange(plan.dtype)
        code, M, p1, p2 = f
        return blk, "rq", (int(plan.zx) * n, code, M, p1, p2, int(plan.zo), lo, hi)
    if form == "xnn_float":
        lo, hi = qrange(plan.dtype)
        scale, yzp = _xnn_scales(plan, n)
        return blk, "xnn", (scale, yzp, lo, hi)
    rq = plan.requant
    arrs = rq_arrays(rq, blk[2])
    if arrs is None or rq.dtype != plan.dtype:
        return False
    return blk, "fused", (fused_runner(arrs, 0, rq), np.zeros(blk[2], np.int64))
