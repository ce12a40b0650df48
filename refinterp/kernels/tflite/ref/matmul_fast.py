"""Fast TFLite integer FullyConnected / BatchMatMul (``matmul.QFCPlan`` / ``QBMMPlan``), bit-exact.

``fast_fc(plan, x)`` / ``fast_bmm(plan, a, b)`` return the same array as ``matmul.qfully_connected``
/ ``matmul.qbatch_matmul`` or None when the case is not covered (then the NumPy path runs).

Exactness contract (as kernels/tflite/ref/conv_fast.py): the integer sum ``sum (x - zx) * (w - zw)`` is a BLAS
GEMM in float32 over K-chunks whose every partial sum is below 2^24 in magnitude (bound taken over
the whole input dtype range, so any BLAS summation order is exact), chunks added in float64 (exact
below 2^53); float64 in one piece when float32 chunks would be shorter than 32 terms; None when even
float64 could round (``K * max|x| * max|w| >= 2^53``).  Then the fused requantizer of
kernels/tflite/ref/requant_fast.py: + bias, the scheme's int32 wrap/saturate, any of the roundings ``double``,
``upward``, ``single``, ``float32_half_even`` (XNNPACK), ``float64_half_away`` (LiteRT FC REF);
``mbqm64`` / ``pot`` -> None.  FullyConnected with at most 8 input rows (batch-1 classifier heads)
uses int32 dot products over int8/int16 weights instead (``_gemv_i32``; exact when
``max|x - zx| * max_o sum_k |w[o, k]| < 2^31``, else the GEMM path): a quarter of the float32
weights' memory traffic.
"""
from __future__ import annotations

import numba
import numpy as np

from ...prepared import prepared
from .conv_fast import _chunks, _minus_zp
from .requant_fast import bias_array, fused_runner, overflow_mode, rq_arrays, run_fused

_GEMV_ROWS = 8  # at most this many input rows: integer dot products instead of a float32 GEMM



@numba.njit(cache=True)
def _gemv_i32(xs, w, acc):  # pragma: no cover - compiled
    """acc[r, o] = sum_k xs[r, k] * w[o, k] in int32; exact when max|xs| * max_o sum_k |w[o, k]|
    < 2^31 (checked by the caller), so no partial sum wraps."""
    rows, K = xs.shape
    O = w.shape[0]
    for r in range(rows):
        x = xs[r]
        for o in range(O):
            wr = w[o]
            a = np.int32(0)
            for k in range(K):
                a += np.int32(x[k]) * np.int32(wr[k])
            acc[r, o] = a


def _int_weights(w: np.ndarray, xmax: int) -> np.ndarray | None:
    """(O, K) int8 / int16 copy of integer-valued weights for ``_gemv_i32``, or None when an int32
    sum could wrap (``xmax`` = largest |x - zx| of the input dtype)."""
    if w.size == 0 or xmax > (1 << 15) - 1:
        return None
    aw = np.abs(w)
    if float(np.max(aw.sum(axis=1))) * xmax >= 2.0 ** 31 - 1:
        return None
    dt = np.int8 if np.max(aw) <= 127 else np.int16 if np.max(aw) <= (1 << 15) - 1 else None
    return None if dt is None else np.ascontiguousarray(w, dtype=dt)


def _fc_prep(plan, x_dtype: np.dtype):
    """Per (plan, input dtype): compute dtype, chunk, (K, O) weights, requantizer arrays, bias,
    and the (O, K) integer weights of the few-rows path (or None)."""
    return prepared(plan, ("fc", x_dtype.str), _build_fc_prep, x_dtype)


def _build_fc_prep(plan, x_dtype: np.dtype):
    w = np.asarray(plan.w)  # (O, K) float64 holding w - zw
    o, k = w.shape
    prep = None
    if np.all(w == np.round(w)):
        aw = np.abs(w.astype(np.float64))  # (O, K)
        cdt, chunk = _chunks(k, x_dtype, plan.zx, float(np.max(aw)) if w.size else 0.0,
                             float(np.max(aw.sum(axis=1))) if w.size else 0.0)
        arrs = rq_arrays(plan.requant, o)
        if cdt is not None and arrs is not None:
            ii = np.iinfo(x_dtype)
            xmax = max(abs(int(ii.min) - plan.zx), abs(int(ii.max) - plan.zx))
            prep = (cdt, chunk, np.ascontiguousarray(w.T, dtype=cdt), bias_array(plan.bias, o),
                    fused_runner(arrs, overflow_mode(plan.acc32, plan.settings), plan.requant),
                    _int_weights(w, xmax))
    return prep


def _chunked_matmul(a, b, chunk: int):
    """a (..., K) @ b (..., K, N) with K split into ``chunk``-long pieces summed in float64."""
    K = a.shape[-1]
    acc = np.matmul(a[..., :chunk], b[..., :chunk, :])
    if chunk < K:
        acc = acc.astype(np.float64)
        for k0 in range(chunk, K, chunk):
            acc += np.matmul(a[..., k0:k0 + chunk], b[..., k0:k0 + chunk, :])
    return acc


def fast_fc(plan, x) -> np.ndarray | None:
    """``matmul.qfully_connected(plan, x, w, b)`` for a constant filter, or None."""
    x = np.asarray(x)
    if plan.w is None or x.dtype.kind not in "iu" or x.size == 0:
        return None
    prep = _fc_prep(plan, x.dtype)
    if prep is None:
        return None
    cdt, chunk, wc, bias, requant, wi = prep
    K, O = wc.shape
    if x.size % K:
        return None  # the NumPy path raises the error
    if wi is not None and x.size // K <= _GEMV_ROWS:
        xi = np.empty(x.size, np.int16)
        _minus_zp(np.ascontiguousarray(x).reshape(-1), plan.zx, xi)  # |x - zx| <= 2^15 - 1 (checked)
        acc = np.empty((x.size // K, O), np.int32)
        _gemv_i32(xi.reshape(-1, K), wi, acc)
    else:
        xs = np.empty(x.size, cdt)
        _minus_zp(np.ascontiguousarray(x).reshape(-1), plan.zx, xs)  # exact: |x - zx| < 2^17
        acc = _chunked_matmul(xs.reshape(-1, K), wc, chunk)
    out = np.empty(acc.shape, np.dtype(plan.requant.dtype))
    requant(np.ascontiguousarray(acc), bias, out)
    if plan.keep_num_dims:
        out = out.reshape(x.shape[:-1] + (O,))
    return out


def _span(dt: np.dtype, z: int) -> int:
    ii = np.iinfo(dt)
    return max(abs(int(ii.min) - z), abs(int(ii.max) - z))


def fast_bmm(plan, a, b) -> np.ndarray | None:
    """``matmul.qbatch_matmul(plan, a, b)`` or None (bounds over both operands' dtype ranges)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu" or a.ndim < 2 or b.ndim < 2:
        return None
    K = a.shape[-2] if plan.adj_x else a.shape[-1]
    N = b.shape[-2] if plan.adj_y else b.shape[-1]
    arrs = rq_arrays(plan.requant, N)
    if arrs is None or K == 0 or N == 0:
        return None
    prod = _span(a.dtype, plan.za) * _span(b.dtype, plan.zb)
    k = int(((1 << 24) - 1) // prod)
    if k >= min(K, 32):
        cdt, chunk = np.float32, max(1, min(k, K))
    elif K * prod < 2.0 ** 53:
        cdt, chunk = np.float64, K
    else:
        return None
    af = a.astype(cdt) - cdt(plan.za)  # exact: integers below 2^17
    bf = b.astype(cdt) - cdt(plan.zb)
    if plan.adj_x:
        af = np.swapaxes(af, -1, -2)
    if plan.adj_y:
        bf = np.swapaxes(bf, -1, -2)
    if af.shape[-1] != bf.shape[-2]:
        return None  # the NumPy path raises NumPy's error
    acc = _chunked_matmul(af, bf, chunk)
    out = np.empty(acc.shape, np.dtype(plan.requant.dtype))
    run_fused(np.ascontiguousarray(acc).reshape(-1, N), np.zeros(N, np.int64), arrs,
              overflow_mode(plan.acc32, plan.settings), plan.requant, out.reshape(-1, N))
    return out
