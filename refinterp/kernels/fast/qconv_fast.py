"""Fast TFLite integer Conv / DepthwiseConv for a ``qconv.QConvPlan`` (2-D, NHWC), bit-exact.

``fast_conv(plan, x)`` / ``fast_depthwise(plan, x)`` return the same array as ``qconv.qconv`` /
``qconv.qdepthwise_conv`` or None when the case is not covered (then the NumPy path runs).

Exactness contract:

* Conv (group 1): the sum ``sum (x - zx) * (w - zw)`` is one BLAS GEMM over im2col patches (a plain
  GEMM for 1x1 kernels).  float32 when every partial sum of a K-chunk is below 2^24 in magnitude:
  chunk length ``k <= floor((2^24 - 1) / (max|x - zx| * max|w - zw|))`` with ``max|x - zx|`` taken
  over the whole input dtype range, so any summation order in BLAS is exact; chunks are added in
  float64 (exact below 2^53).  float64 when chunks would be shorter than 32 (16-bit activations).
  Padded cells hold 0 after the zero point is subtracted, as in the reference.
* DepthwiseConv: int64 accumulation in Numba over the cells inside the input (padding adds 0).
* Then the fused requantizer of fast/requant.py (bias, int32 wrap/saturate, rounding, clamp).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import conv as _fconv
from .._spatial import ints, resolve_window, window_offsets
from .requant import _fused, _rescale, _wrap32, bias_array, overflow_mode, rq_arrays

_F32_EXACT = (1 << 24) - 1
_MIN_F32_CHUNK = 32
_CACHE: dict[int, tuple] = {}  # id(plan) -> (plan, prepared weights); the plan is kept alive


def _conv_weights(plan, cin: int):
    hit = _CACHE.get(id(plan))
    if hit is not None and hit[0] is plan:
        return hit[1]
    fp = plan.fplan
    wk = _fconv.internal_weights(plan.w, fp.weight_layout, 1, 2, fp.name)  # (KH, KW, 1, Cg, M)
    kh, kw, _, cg, m = wk.shape
    if cg != cin:
        return None
    w2 = np.ascontiguousarray(wk.reshape(kh * kw * cg, m))  # rows in (ky, kx, c) order
    prep = (w2, (kh, kw), float(np.max(np.abs(w2))) if w2.size else 0.0)
    _CACHE[id(plan)] = (plan, prep)
    return prep


def _chunks(K: int, x_dtype: np.dtype, zx: int, wmax: float):
    """(compute dtype, chunk length) for an exact GEMM over K terms."""
    ii = np.iinfo(x_dtype)
    xmax = max(abs(int(ii.min) - zx), abs(int(ii.max) - zx))
    prod = xmax * wmax
    if prod == 0:
        return np.float32, max(K, 1)
    k = int(_F32_EXACT // prod)
    if k >= min(K, _MIN_F32_CHUNK):
        return np.float32, max(1, min(k, K))
    if K * prod >= 2.0 ** 53:
        return None, 0
    return np.float64, K


def fast_conv(plan, x) -> np.ndarray | None:
    x = np.asarray(x)
    fp = plan.fplan
    if fp.group != 1 or fp.layout != "NHWC" or x.ndim != 4 or plan.w is None or x.dtype.kind not in "iu":
        return None
    prep = _conv_weights(plan, x.shape[-1])
    if prep is None:
        return None
    w2, kshape, wmax = prep
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != kshape:
        return None
    win = resolve_window(x.shape[1:3], kshape, ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad, where=fp.name)
    K, M = w2.shape
    cdt, chunk = _chunks(K, x.dtype, plan.zx, wmax)
    if cdt is None:
        return None
    arrs = rq_arrays(plan.requant, M)
    if arrs is None:
        return None
    xs = x.astype(cdt)
    xs -= cdt(plan.zx)  # exact: |x - zx| < 2^17
    n = x.shape[0]
    if kshape == (1, 1) and not any(win.pad_begin) and not any(win.pad_end):
        sh, sw = win.strides
        xs = xs[:, : (win.out[0] - 1) * sh + 1: sh, : (win.out[1] - 1) * sw + 1: sw]
        cols = np.ascontiguousarray(xs).reshape(-1, K)
    else:
        xp = _fconv.pad_channels_last(xs, win)  # zeros: padded cells contribute 0
        cols = np.concatenate([xp[(slice(None),) + sl] for _, sl in window_offsets(win)], axis=-1)
        cols = cols.reshape(-1, K)
    wc = w2.astype(cdt, copy=False)
    acc = cols[:, :chunk] @ wc[:chunk]
    if chunk < K:
        acc = acc.astype(np.float64)
        for k0 in range(chunk, K, chunk):
            acc += cols[:, k0:k0 + chunk] @ wc[k0:k0 + chunk]
    out = np.empty(acc.shape, np.dtype(plan.requant.dtype))
    rq = plan.requant
    _fused(acc, bias_array(plan.bias, M), *arrs, overflow_mode(plan.acc32, plan.settings), int(rq.zo),
           int(rq.lo), int(rq.hi), out)
    return out.reshape((n,) + win.out + (M,))


@numba.njit(cache=True, parallel=True)
def _dw_int(x, w, zx, sh, sw, dh, dw, pt, pl, mg, bias, M, shf, sc32, sc64, code, overflow, zo, lo, hi,
            out):  # pragma: no cover - compiled
    n, oh, ow, oc = out.shape
    kh, kw, _ = w.shape
    h, wd = x.shape[1], x.shape[2]
    for r in numba.prange(n * oh):
        b = r // oh
        oy = r - b * oh
        acc = np.empty(oc, np.int64)
        for ox in range(ow):
            for c in range(oc):
                acc[c] = 0
            for ky in range(kh):
                iy = oy * sh + ky * dh - pt
                if iy < 0 or iy >= h:
                    continue
                for kx in range(kw):
                    ix = ox * sw + kx * dw - pl
                    if ix < 0 or ix >= wd:
                        continue
                    if mg == 1:
                        for c in range(oc):
                            acc[c] += (np.int64(x[b, iy, ix, c]) - zx) * w[ky, kx, c]
                    else:
                        for c in range(oc):
                            acc[c] += (np.int64(x[b, iy, ix, c // mg]) - zx) * w[ky, kx, c]
            for c in range(oc):
                v = acc[c] + bias[c]
                if overflow == 1:
                    v = _wrap32(v)
                elif overflow == 2:
                    v = min(max(v, -2147483648), 2147483647)
                y = _rescale(v, M[c], shf[c], sc32[c], sc64[c], code[c]) + zo
                out[b, oy, ox, c] = min(max(y, lo), hi)


def _dw_weights(plan, cin: int):
    hit = _CACHE.get(id(plan))
    if hit is not None and hit[0] is plan:
        return hit[1]
    fp = plan.fplan
    wk = _fconv.internal_weights(plan.w, fp.weight_layout, cin, 2, fp.name)  # (KH, KW, C, 1, Mg)
    kh, kw, c, cg, mg = wk.shape
    if cg != 1 or c != cin or not np.all(wk == np.round(wk)):
        return None
    prep = (np.ascontiguousarray(wk.reshape(kh, kw, c * mg)).astype(np.int64), mg)
    _CACHE[id(plan)] = (plan, prep)
    return prep


def fast_depthwise(plan, x) -> np.ndarray | None:
    x = np.asarray(x)
    fp = plan.fplan
    if fp.group != 0 or fp.layout != "NHWC" or x.ndim != 4 or plan.w is None or x.dtype.kind not in "iu":
        return None
    prep = _dw_weights(plan, x.shape[-1])
    if prep is None:
        return None
    w, mg = prep
    kshape = w.shape[:2]
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != tuple(kshape):
        return None
    win = resolve_window(x.shape[1:3], kshape, ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad, where=fp.name)
    oc = w.shape[-1]
    arrs = rq_arrays(plan.requant, oc)
    if arrs is None:
        return None
    rq = plan.requant
    out = np.empty((x.shape[0],) + win.out + (oc,), np.dtype(rq.dtype))
    _dw_int(np.ascontiguousarray(x), w, int(plan.zx), win.strides[0], win.strides[1], win.dilations[0],
            win.dilations[1], win.pad_begin[0], win.pad_begin[1], mg, bias_array(plan.bias, oc), *arrs,
            overflow_mode(plan.acc32, plan.settings), int(rq.zo), int(rq.lo), int(rq.hi), out)
    return out
