"""``MlasRequantizeOutput`` fused with the bias add, in Numba (refinterp/quant/mlas.py
``requant_mlas`` is the NumPy reference it must equal).

Per element: ``a = acc + bias[m]`` (int64, exact), ``v = f32(f32(a) * mult[m])`` (int64 -> float32
rounds to nearest-even, as NumPy's astype and cvtdq2ps), clamp to ``[f32(lo - zy), f32(hi - zy)]``,
round half to even, ``+ zy``.  Accumulators arrive as float32 chunks holding exact integers
(|value| < 2^24); they, the chunk sums and the int32 bias are exact float64 integers, so
``f32(float64 sum)`` is the one RNE rounding of NumPy's int64 -> float32 cast.  Rounding: the
float32 magic-number add (1.5 * 2^23), RNE for the clamped |v| <= 2^22.  8-bit outputs only.

float32 lanes (``rq1f``, the ``f32ok`` rows): where ``bias[m]`` is exactly a float32 and the
accumulator is one exact float32 integer (a single K chunk; |acc| < 2^24), ``f32(acc) + f32(bias)``
is one correctly rounded IEEE addition of exact operands, i.e. RNE(acc + bias) = the reference's
``f32(int64 acc + bias)`` whatever its magnitude, so the float64 add is skipped and the loop runs
16 lanes per AVX-512 vector with the same result.
"""
from __future__ import annotations

import numba
import numpy as np


# float32 RNE by the magic-number add: exact for |v| <= 2^22 (v is clamped to [lo - zy, hi - zy])
_MAGIC = np.float32(12582912.0)  # 1.5 * 2^23


@numba.njit(cache=True, inline="always")
def rq1(a, mm, zy, flo, fhi):  # pragma: no cover - compiled
    """One element: ``a`` float64 holding the exact integer acc + bias (|a| < 2^53), so
    f32(a) is the single RNE rounding of NumPy's int64 -> float32 cast."""
    return rq1f(np.float32(a), mm, zy, flo, fhi)


@numba.njit(cache=True, inline="always")
def rq1f(a, mm, zy, flo, fhi):  # pragma: no cover - compiled
    """``rq1`` for ``a`` = f32(acc) + f32(bias) computed in float32 from exact operands (= f32(acc + bias))."""
    v = a * mm
    if v < flo:
        v = flo
    elif v > fhi:
        v = fhi
    return np.int32((v + _MAGIC) - _MAGIC) + zy


@numba.njit(cache=True, inline="always")
def _rq_f32_row(a0, bb, mm, zy, flo, fhi, o):  # pragma: no cover - compiled
    for p in range(a0.shape[0]):
        o[p] = rq1f(a0[p] + bb, mm, zy, flo, fhi)


@numba.njit(cache=True)
def _rq_chunks(acc3, bias, bias32, f32ok, mult, zy, flo, fhi, out):  # pragma: no cover - compiled
    """acc3 (nch, M, P) float32 integer-valued (|v| < 2^24); bias float64 (M,); out (M, P);
    rows with f32ok[m] (one chunk only) add bias32[m] = bias[m] in float32 (one rounding, as above)."""
    nch, m_n, p_n = acc3.shape
    for m in range(m_n):
        mm = mult[m]
        bb = bias[m]
        o = out[m]
        a0 = acc3[0, m]
        if nch == 1 and f32ok[m]:
            _rq_f32_row(a0, bias32[m], mm, zy, flo, fhi, o)
        elif nch == 1:
            for p in range(p_n):
                o[p] = rq1(np.float64(a0[p]) + bb, mm, zy, flo, fhi)
        else:
            for p in range(p_n):
                a = np.float64(a0[p]) + bb
                for c in range(1, nch):
                    a += np.float64(acc3[c, m, p])
                o[p] = rq1(a, mm, zy, flo, fhi)


@numba.njit(cache=True)
def _rq_rows(acc, bias, mult, zy, flo, fhi, out):  # pragma: no cover - compiled
    """acc (R, M) float64 exact integers with the channel on the last axis; out (R, M)."""
    r_n, m_n = acc.shape
    for r in range(r_n):
        for m in range(m_n):
            out[r, m] = rq1(acc[r, m] + bias[m], mult[m], zy, flo, fhi)


def requant_consts(plan, m: int):
    """(bias float64 (m,), mult float32 (m,), zy int32, f32(lo - zy), f32(hi - zy)) of a QGemmPlan,
    or None when not covered (8-bit output range and finite multipliers only; the bias must be
    below 2^52 so that acc + bias stays an exact float64 integer)."""
    if plan.bias is None:
        bias = np.zeros(m, np.float64)
    else:
        b = np.asarray(plan.bias, np.int64).reshape(-1)
        if b.size not in (1, m) or np.any(np.abs(b) >= (1 << 52)):
            return None
        bias = np.ascontiguousarray(np.broadcast_to(b, (m,)), np.float64)
    mult = np.asarray(plan.mult, np.float32).reshape(-1)
    if mult.size not in (1, m) or not np.all(np.isfinite(mult)) or not (-256 <= plan.lo <= plan.hi <= 255):
        return None
    mult = np.ascontiguousarray(np.broadcast_to(mult, (m,)))
    return (bias, mult, np.int32(plan.zy), np.float32(plan.lo - plan.zy), np.float32(plan.hi - plan.zy))


def f32_rows(bias: np.ndarray):
    """(bias32 float32 (M,), f32ok uint8 (M,)): f32ok[m] = 1 where bias[m] is exactly a float32, so
    that f32(acc) + bias32[m] rounds once, as the reference does (see the module docstring)."""
    bias32 = np.asarray(bias, np.float64).astype(np.float32)
    ok = bias32.astype(np.float64) == bias
    return np.where(ok, bias32, np.float32(0.0)), ok.astype(np.uint8)


def requant_chunks(acc3: np.ndarray, bias, bias32, f32ok, mult, zy, flo, fhi, out: np.ndarray) -> None:
    _rq_chunks(acc3, bias, bias32, f32ok, mult, zy, flo, fhi, out)


def requant_rows(acc: np.ndarray, bias, mult, zy, flo, fhi, out: np.ndarray) -> None:
    _rq_rows(np.ascontiguousarray(acc, np.float64), bias, mult, zy, flo, fhi, out)
