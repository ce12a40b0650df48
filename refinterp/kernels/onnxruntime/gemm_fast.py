"""Fast ONNX Runtime (MLAS) QLinearMatMul / QGemm with a constant 2-D 8-bit B, bit-exact with the
NumPy path of refinterp/kernels/onnxruntime/gemm.py (None when not covered: transA, computed B, a C that
is not per column, float output, impl other than ``mlas_f32``).

Exactness: up to ``_MATVEC_ROWS`` rows, integer dot products (int16 operands, int64 sums); more
rows: ``acc = (a - za) @ (b - zb[n])`` as float32 BLAS products over K-chunks short enough
that every partial sum stays below 2^24 (kernels/tflite/ref/conv_fast.py ``_chunks``), chunk results summed in
float64 (exact integers below 2^53); then kernels/onnxruntime/requant_fast.py with the bias per column.
"""
from __future__ import annotations

import numba
import numpy as np

from ..prepared import prepared
from .requant_fast import requant_consts, requant_rows
from ..tflite.ref.conv_fast import _chunks

_INT8 = ("int8", "uint8")
_MATVEC_ROWS = 8  # up to this many rows: integer dot products over int16 (B read as 2 bytes, not 4)


@numba.njit(cache=True)
def _int_rows(a, za, wt, acc):  # pragma: no cover - compiled
    """acc[r, n] = sum_k (a[r, k] - za) * wt[n, k]; wt int16 = (b - zb)^T; exact in int64."""
    r_n, k_n = a.shape
    for r in range(r_n):
        ar = np.empty(k_n, np.int16)
        for k in range(k_n):
            ar[k] = np.int16(np.int32(a[r, k]) - za)
        for n in range(wt.shape[0]):
            wr = wt[n]
            t = 0
            for k in range(k_n):
                t += np.int32(ar[k]) * np.int32(wr[k])
            acc[r, n] = np.float64(t)


def _prep(plan, a: np.ndarray):
    """Per (plan, A dtype), computed once: K-chunked float32 weights, requantizer constants and the
    int16 weights of the few-rows path; None when not covered."""
    return prepared(plan, ("gemm", a.dtype.str), _build_prep, a)


def _build_prep(plan, a: np.ndarray):
    w = plan.w
    if w is None or w.ndim != 2 or plan.w_raw is None or str(plan.w_raw.dtype) not in _INT8:
        return None
    wq = w.T if plan.fplan.transB else w  # (K, N) float64 integer values (b - zb)
    n = wq.shape[1]
    if plan.bias is not None:
        b = np.asarray(plan.bias)
        if not (b.ndim <= 1 or (b.ndim == 2 and b.shape[0] == 1)) or b.size not in (1, n):
            return None
    consts = requant_consts(plan, n)
    if consts is None:
        return None
    K = wq.shape[0]
    aw = np.abs(wq)
    cdt, chunk = _chunks(K, a.dtype, plan.zx, float(np.max(aw, initial=0.0)),
                         float(np.max(aw.sum(axis=0), initial=0.0)))
    if cdt is not np.float32:
        return None
    wch = [np.ascontiguousarray(wq[k0:k0 + chunk], np.float32) for k0 in range(0, K, chunk)]
    # (b - zb) fits int16 (|.| <= 255); (a - za) too
    prep = (chunk, wch, consts, np.ascontiguousarray(wq.T, np.int16))
    return prep


def fast_ort_gemm(plan, a, c=None) -> np.ndarray | None:
    a = np.asarray(a)
    if (plan.impl != "mlas_f32" or plan.dtype == "float32" or plan.fplan.transA or a.ndim < 2
            or str(a.dtype) not in _INT8 or (c is not None and plan.bias is None)):
        return None
    prep = _prep(plan, a)
    if prep is None:
        return None
    chunk, wch, (bias, mult, zy, flo, fhi), wt = prep
    K = a.shape[-1]
    if K != sum(w.shape[0] for w in wch):
        return None
    if a.size // K <= _MATVEC_ROWS:
        acc = np.empty((a.size // K, wt.shape[0]), np.float64)
        _int_rows(np.ascontiguousarray(a).reshape(-1, K), np.int32(plan.zx), wt, acc)
        out = np.empty(acc.shape, np.dtype(plan.dtype))
        requant_rows(acc, bias, mult, zy, flo, fhi, out)
        return out.reshape(a.shape[:-1] + (acc.shape[1],))
    a2 = a.reshape(-1, K).astype(np.float32)
    a2 -= np.float32(plan.zx)  # exact: |a - za| <= 255
    acc = (a2[:, :chunk] @ wch[0]).astype(np.float64)
    for i in range(1, len(wch)):
        acc += a2[:, i * chunk:(i + 1) * chunk] @ wch[i]
    out = np.empty(acc.shape, np.dtype(plan.dtype))
    requant_rows(acc, bias, mult, zy, flo, fhi, out)
    return out.reshape(a.shape[:-1] + (acc.shape[1],))
