"""Fast TFLite integer DepthwiseConv for a ``qconv.QConvPlan`` (2-D, NHWC), bit-exact.

``fast_depthwise(plan, x)`` returns the same array as ``qconv.qdepthwise_conv`` or None when the
case is not covered (then the NumPy path runs).

Exactness contract: integer accumulation in Numba over the cells inside the input (padding adds
0), int32 when every partial sum is below 2^31 else int64; then the fused requantizer of
fast/requant.py (bias, int32 wrap/saturate, rounding, clamp).
"""
from __future__ import annotations

import numba
import numpy as np

from ...settings import kernel_threads
from . import numba_threads

from .. import conv as _fconv
from .._spatial import ints, resolve_window
from .requant import bias_array, fused_runner, overflow_mode, rq_arrays

_CACHE: dict[tuple, tuple] = {}  # (id(plan), dtype) -> (plan, prepared weights); the plan is kept alive


@numba.njit(cache=True, parallel=True)
def _dw_acc(x, w, zx, sh, sw, dh, dw, pt, pl, mg, acc):  # pragma: no cover - compiled
    """acc[b, oy, ox, c] = sum over in-range cells of (x - zx) * w, in acc's integer dtype."""
    n, oh, ow, oc = acc.shape
    kh, kw, _ = w.shape
    h, wd = x.shape[1], x.shape[2]
    zero = acc.dtype.type(0)
    for r in numba.prange(n * oh):
        b = r // oh
        oy = r - b * oh
        for ox in range(ow):
            a = acc[b, oy, ox]
            for c in range(oc):
                a[c] = zero
            for ky in range(kh):
                iy = oy * sh + ky * dh - pt
                if iy < 0 or iy >= h:
                    continue
                for kx in range(kw):
                    ix = ox * sw + kx * dw - pl
                    if ix < 0 or ix >= wd:
                        continue
                    xr = x[b, iy, ix]
                    wr = w[ky, kx]
                    if mg == 1:
                        for c in range(oc):
                            a[c] += (xr[c] - zx) * wr[c]
                    else:
                        for c in range(oc):
                            a[c] += (xr[c // mg] - zx) * wr[c]


def _dw_prep(plan, cin: int, x_dtype: np.dtype):
    """Per (plan, input dtype), computed once: (KH, KW, C*Mg) integer weights in the accumulator
    dtype, depth multiplier and requantizer arrays; None when not covered."""
    key = (id(plan), x_dtype.str)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    fp = plan.fplan
    wk = _fconv.internal_weights(plan.w, fp.weight_layout, cin, 2, fp.name)  # (KH, KW, C, 1, Mg)
    kh, kw, c, cg, mg = wk.shape
    prep = None
    arrs = rq_arrays(plan.requant, c * mg)
    if cg == 1 and c == cin and arrs is not None and np.all(wk == np.round(wk)):
        w = wk.reshape(kh, kw, c * mg)
        ii = np.iinfo(x_dtype)
        xmax = max(abs(int(ii.min) - plan.zx), abs(int(ii.max) - plan.zx))
        wsum = kh * kw * (int(np.max(np.abs(w))) if w.size else 0)
        # int32 arithmetic when every partial sum is below 2^31 (int8: 9 cells * 255 * 128 << 2^31)
        idt = np.int32 if xmax * wsum < (1 << 31) else np.int64
        prep = (np.ascontiguousarray(w, dtype=idt), mg, bias_array(plan.bias, c * mg),
                fused_runner(arrs, overflow_mode(plan.acc32, plan.settings), plan.requant))
    _CACHE[key] = (plan, prep)
    return prep


def fast_depthwise(plan, x) -> np.ndarray | None:
    x = np.ascontiguousarray(x)
    fp = plan.fplan
    if fp.group != 0 or fp.layout != "NHWC" or x.ndim != 4 or plan.w is None or x.dtype.kind not in "iu":
        return None
    prep = _dw_prep(plan, x.shape[-1], x.dtype)
    if prep is None:
        return None
    w, mg, bias, requant = prep
    kshape = w.shape[:2]
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != tuple(kshape):
        return None
    win = resolve_window(x.shape[1:3], kshape, ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad, where=fp.name)
    oc = w.shape[-1]
    acc = np.empty((x.shape[0],) + win.out + (oc,), w.dtype)
    with numba_threads(kernel_threads(acc.size * w.shape[0] * w.shape[1])):
        _dw_acc(x, w, int(plan.zx), win.strides[0], win.strides[1], win.dilations[0], win.dilations[1],
                win.pad_begin[0], win.pad_begin[1], mg, acc)
    out = np.empty(acc.shape, np.dtype(plan.requant.dtype))
    requant(acc.reshape(-1, oc), bias, out.reshape(-1, oc))
    return out
