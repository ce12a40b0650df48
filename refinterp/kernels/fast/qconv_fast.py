"""Fast TFLite integer Conv for a ``qconv.QConvPlan`` (2-D, NHWC, group 1), bit-exact.

``fast_conv(plan, x)`` returns the same array as ``qconv.qconv`` or None when the case is not
covered (then the NumPy path runs).  DepthwiseConv: fast/qdepthwise_fast.py.

Exactness contract:

* Conv (group 1): the sum ``sum (x - zx) * (w - zw)`` is one BLAS GEMM over im2col patches (a plain
  GEMM for 1x1 kernels).  float32 when every partial sum of a K-chunk is below 2^24 in magnitude:
  chunk length ``k <= floor((2^24 - 1) / (max|x - zx| * max|w - zw|))`` with ``max|x - zx|`` taken
  over the whole input dtype range, so any summation order in BLAS is exact; chunks are added in
  float64 (exact below 2^53).  float64 when chunks would be shorter than 32 (16-bit activations).
  Padded cells hold 0 after the zero point is subtracted, as in the reference.
* Then the fused requantizer of fast/requant.py (bias, int32 wrap/saturate, rounding, clamp).
"""
from __future__ import annotations

import numba
import numpy as np

from .. import conv as _fconv
from .._spatial import ints, resolve_window, window_offsets
from .requant import bias_array, fused_runner, overflow_mode, rq_arrays

_F32_EXACT = (1 << 24) - 1
_MIN_F32_CHUNK = 32
_CACHE: dict[tuple, tuple] = {}  # (id(plan), dtype) -> (plan, prepared weights); the plan is kept alive


def _conv_prep(plan, cin: int, x_dtype: np.dtype):
    """Per (plan, input dtype), computed once: kernel shape, compute dtype, chunk length, the
    weights as a (K, M) matrix in the compute dtype (rows in (ky, kx, c) order) and the
    requantizer arrays; None when not covered."""
    key = (id(plan), x_dtype.str)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    fp = plan.fplan
    wk = _fconv.internal_weights(plan.w, fp.weight_layout, 1, 2, fp.name)  # (KH, KW, 1, Cg, M)
    kh, kw, _, cg, m = wk.shape
    prep = None
    if cg == cin:
        w2 = wk.reshape(kh * kw * cg, m)
        cdt, chunk = _chunks(w2.shape[0], x_dtype, plan.zx, float(np.max(np.abs(w2))) if w2.size else 0.0)
        arrs = rq_arrays(plan.requant, m)
        if cdt is not None and arrs is not None:
            prep = ((kh, kw), cdt, chunk, np.ascontiguousarray(w2, dtype=cdt), bias_array(plan.bias, m),
                    fused_runner(arrs, overflow_mode(plan.acc32, plan.settings), plan.requant))
    _CACHE[key] = (plan, prep)
    return prep


@numba.njit(cache=True)
def _minus_zp(x, zx, out):  # pragma: no cover - compiled
    for i in range(x.size):
        out[i] = x[i] - zx


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
    x = np.ascontiguousarray(x)
    fp = plan.fplan
    if fp.group != 1 or fp.layout != "NHWC" or x.ndim != 4 or plan.w is None or x.dtype.kind not in "iu":
        return None
    prep = _conv_prep(plan, x.shape[-1], x.dtype)
    if prep is None:
        return None
    kshape, cdt, chunk, wc, bias, requant = prep
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != kshape:
        return None
    win = resolve_window(x.shape[1:3], kshape, ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad, where=fp.name)
    K, M = wc.shape
    xs = np.empty(x.shape, cdt)
    _minus_zp(x.reshape(-1), plan.zx, xs.reshape(-1))  # exact: |x - zx| < 2^17
    n = x.shape[0]
    if kshape == (1, 1) and not any(win.pad_begin) and not any(win.pad_end):
        sh, sw = win.strides
        if sh > 1 or sw > 1:
            xs = np.ascontiguousarray(xs[:, : (win.out[0] - 1) * sh + 1: sh, : (win.out[1] - 1) * sw + 1: sw])
        cols = xs.reshape(-1, K)
    else:
        xp = _fconv.pad_channels_last(xs, win)  # zeros: padded cells contribute 0
        cols = np.concatenate([xp[(slice(None),) + sl] for _, sl in window_offsets(win)], axis=-1)
        cols = cols.reshape(-1, K)
    acc = cols[:, :chunk] @ wc[:chunk]
    if chunk < K:
        acc = acc.astype(np.float64)
        for k0 in range(chunk, K, chunk):
            acc += cols[:, k0:k0 + chunk] @ wc[k0:k0 + chunk]
    out = np.empty(acc.shape, np.dtype(plan.requant.dtype))
    requant(acc, bias, out)
    return out.reshape((n,) + win.out + (M,))
