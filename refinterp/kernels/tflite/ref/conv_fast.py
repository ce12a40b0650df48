"""Fast TFLite integer Conv for a ``conv.QConvPlan`` (2-D, NHWC, group 1), bit-exact.

``fast_conv(plan, x)`` returns the same array as ``conv.qconv`` or None when the case is not
covered (then the NumPy path runs).  DepthwiseConv: kernels/tflite/ref/depthwise_fast.py.

Exactness contract:

* Conv (group 1): the sum ``sum (x - zx) * (w - zw)`` is one BLAS GEMM over im2col patches (a plain
  GEMM for 1x1 kernels).  float32 when every partial sum of a K-chunk is below 2^24 in magnitude:
  chunk length ``k <= floor((2^24 - 1) / (max|x - zx| * max|w - zw|))`` with ``max|x - zx|`` taken
  over the whole input dtype range, so any summation order in BLAS is exact; chunks are added in
  float64 (exact below 2^53).  float64 when chunks would be shorter than 32 (16-bit activations).
  Padded cells hold 0 after the zero point is subtracted, as in the reference.
* Then the fused requantizer of kernels/tflite/ref/requant_fast.py (bias, int32 wrap/saturate, rounding, clamp).
"""
from __future__ import annotations

import numba
import numpy as np

from ...float import conv as float_conv
from ...spatial import ints, resolve_window
from ...prepared import per_shape, prepared
from .requant_fast import bias_array, fused_runner, overflow_mode, rq_arrays

_F32_EXACT = (1 << 24) - 1
_MIN_F32_CHUNK = 32


def _conv_prep(plan, cin: int, x_dtype: np.dtype):
    """Per (plan, input channels, input dtype), computed once: kernel shape, compute dtype, chunk
    length, the weights as a (K, M) matrix in the compute dtype (rows in (ky, kx, c) order) and the
    requantizer arrays; None when not covered."""
    return prepared(plan, ("conv", cin, x_dtype.str), _build_conv_prep, cin, x_dtype)


def _build_conv_prep(plan, cin: int, x_dtype: np.dtype):
    fp = plan.fplan
    wk = float_conv.internal_weights(plan.w, fp.weight_layout, 1, 2, fp.name)  # (KH, KW, 1, Cg, M)
    kh, kw, _, cg, m = wk.shape
    prep = None
    if cg == cin:
        w2 = wk.reshape(kh * kw * cg, m)
        aw = np.abs(w2.astype(np.float64))
        cdt, chunk = _chunks(w2.shape[0], x_dtype, plan.zx, float(np.max(aw)) if w2.size else 0.0,
                             float(np.max(aw.sum(axis=0))) if w2.size else 0.0)
        arrs = rq_arrays(plan.requant, m)
        if cdt is not None and arrs is not None:
            prep = ((kh, kw), cdt, chunk, np.ascontiguousarray(w2, dtype=cdt), bias_array(plan.bias, m),
                    fused_runner(arrs, overflow_mode(plan.acc32, plan.settings), plan.requant))
    return prep


@numba.njit(cache=True)
def _minus_zp(x, zx, out):  # pragma: no cover - compiled
    for i in range(x.size):
        out[i] = x[i] - zx


@numba.njit(cache=True)
def _pad_minus_zp(x, zx, pt, pl, xp):  # pragma: no cover - compiled
    """xp (N, Hp, Wp, C) <- x - zx placed at (pt, pl), 0 elsewhere (|x - zx| < 2^17: exact)."""
    n, h, w, c = x.shape
    hp, wp = xp.shape[1], xp.shape[2]
    xf = x.reshape(n, h, w * c)
    pf = xp.reshape(n, hp, wp * c)
    for b in range(n):
        for y in range(hp):
            row = pf[b, y]
            if y < pt or y >= pt + h:
                row[:] = 0
                continue
            src = xf[b, y - pt]
            row[:pl * c] = 0
            row[(pl + w) * c:] = 0
            mid = row[pl * c:(pl + w) * c]  # sliced views: plain loop indices vectorise (an offset
            for t in range(w * c):          # index would carry Numba's negative-index wraparound)
                mid[t] = src[t] - zx


@numba.njit(cache=True)
def _im2col(xp, kh, kw, sh, sw, dh, dw, oh, ow, cols):  # pragma: no cover - compiled
    """cols[(b, oy, ox), (ky, kx, c)] = xp[b, oy*sh + ky*dh, ox*sw + kx*dw, c]; with dw == 1 each
    (ky) row is one contiguous run of kw*C values."""
    n, hp, wp, c = xp.shape
    flat = xp.reshape(n, hp, wp * c)
    run = kw * c
    for line in range(n * oh):  # output lines (b, oy)
        b = line // oh
        oy = line - b * oh
        for ky in range(kh):
            src = flat[b, oy * sh + ky * dh]
            k0 = ky * run
            for ox in range(ow):
                dst = cols[line * ow + ox]
                if dw == 1:
                    d = dst[k0:k0 + run]
                    sv = src[ox * sw * c:ox * sw * c + run]
                    for t in range(run):
                        d[t] = sv[t]
                else:
                    for kx in range(kw):
                        d = dst[k0 + kx * c:k0 + kx * c + c]
                        sv = src[(ox * sw + kx * dw) * c:(ox * sw + kx * dw) * c + c]
                        for t in range(c):
                            d[t] = sv[t]


def _chunks(K: int, x_dtype: np.dtype, zx: int, wmax: float, col_l1: float | None = None):
    """(compute dtype, chunk length) for an exact GEMM over K terms.  ``col_l1``: the largest
    sum over k of |w[k, m]| of any output column m; every partial sum of column m, in any order,
    is at most ``max|x - zx| * col_l1`` in magnitude, so below 2^24 one float32 GEMM is exact."""
    ii = np.iinfo(x_dtype)
    xmax = max(abs(int(ii.min) - zx), abs(int(ii.max) - zx))
    if col_l1 is not None and xmax * col_l1 <= _F32_EXACT:
        return np.float32, max(K, 1)
    prod = xmax * wmax
    if prod == 0:
        return np.float32, max(K, 1)
    k = int(_F32_EXACT // prod)
    if k >= min(K, _MIN_F32_CHUNK):
        return np.float32, max(1, min(k, K))
    if K * prod >= 2.0 ** 53:
        return None, 0
    return np.float64, K


def _geometry(plan, x: np.ndarray):
    """Per (plan, input shape, dtype), computed once (a few recent shapes kept): (prepared weights,
    window, plain GEMM?) or None when the case is not covered."""
    return per_shape(plan, ("conv", x.dtype.str), x.shape, _build_geometry, x)


def _build_geometry(plan, x: np.ndarray):
    fp = plan.fplan
    geo = None
    if fp.group == 1 and fp.layout == "NHWC" and x.ndim == 4 and plan.w is not None and x.dtype.kind in "iu":
        prep = _conv_prep(plan, x.shape[-1], x.dtype)
        if prep is not None and (fp.kernel_shape is None or tuple(fp.kernel_shape) == prep[0]):
            win = resolve_window(x.shape[1:3], prep[0], ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                                 fp.auto_pad, where=fp.name)
            plain = prep[0] == (1, 1) and not any(win.pad_begin) and not any(win.pad_end)
            geo = (prep, win, plain)
    return geo


def fast_conv(plan, x) -> np.ndarray | None:
    x = np.ascontiguousarray(x)
    geo = _geometry(plan, x)
    if geo is None:
        return None
    (kshape, cdt, chunk, wc, bias, requant), win, plain = geo
    K, M = wc.shape
    n = x.shape[0]
    rows = n * win.out[0] * win.out[1]
    cols = np.empty((rows, K), cdt)
    if plain:
        sh, sw = win.strides
        if sh > 1 or sw > 1:
            x = np.ascontiguousarray(x[:, : (win.out[0] - 1) * sh + 1: sh, : (win.out[1] - 1) * sw + 1: sw])
        _minus_zp(x.reshape(-1), plan.zx, cols.reshape(-1))  # exact: |x - zx| < 2^17
    else:  # padded cells hold 0 after the zero point is subtracted: they contribute 0
        (pt, pl), (pb, pr) = win.pad_begin, win.pad_end
        xp = np.empty((n, pt + x.shape[1] + max(pb, 0), pl + x.shape[2] + max(pr, 0), x.shape[3]), cdt)
        _pad_minus_zp(x, plan.zx, pt, pl, xp)
        _im2col(xp, kshape[0], kshape[1], win.strides[0], win.strides[1], win.dilations[0], win.dilations[1],
                win.out[0], win.out[1], cols)
    # BLAS threads the GEMM itself (REFINTERP_THREADS); the Numba passes run on the calling thread
    acc = cols[:, :chunk] @ wc[:chunk]
    if chunk < K:
        acc = acc.astype(np.float64)
        for k0 in range(chunk, K, chunk):
            acc += cols[:, k0:k0 + chunk] @ wc[k0:k0 + chunk]
    out = np.empty((rows, M), np.dtype(plan.requant.dtype))
    requant(acc, bias, out)
    return out.reshape((n,) + win.out + (M,))

