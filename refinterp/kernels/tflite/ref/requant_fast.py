"""Fused integer requantization in Numba: accumulator -> (+ bias) -> int32 wrap/saturate ->
MultiplyByQuantizedMultiplier -> + zero point -> clamp -> output dtype, in one pass.

Replaces, bit for bit, ``Requant.__call__(accumulate_overflow(acc + bias, settings))`` of
refinterp/quant/params.py for the roundings ``double``, ``upward``, ``single``,
``float32_half_even`` and ``float64_half_away`` (channel blocks included).  ``mbqm64`` and ``pot``
are not handled: ``fused_requant`` returns None and the caller keeps the NumPy path.

Arithmetic (int64 throughout, as refinterp/quant/requant.py): for int32-valued ``a`` and
``0 <= M < 2^31``, ``a * 2^l`` with l <= 30 and ``a * M`` stay below 2^62; ``single`` forms
``acc * M`` with |acc| < 2^31 (< 2^62).  Float forms: ``rint(f32(acc) * f32(scale))`` in float32,
``round_half_away(f64(acc) * scale)`` then the int32 wrap; both clipped to +-2^62 first.
Channel is the last axis.
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.quant.fixedpoint_nb import rdbp, srdhm, wrap32
from refinterp.quant.requant import Rounding

_CODES = {Rounding.DOUBLE: 0, Rounding.UPWARD: 1, Rounding.SINGLE: 2, Rounding.FLOAT32_HALF_EVEN: 3,
          Rounding.FLOAT64_HALF_AWAY: 4}


@numba.njit(cache=True, inline="always")
def _clip62(f):  # pragma: no cover - compiled
    return min(max(f, -4611686018427387904.0), 4611686018427387904.0)


@numba.njit(cache=True, inline="always")
def rescale(v, m, sh, sc32, sc64, code):  # pragma: no cover - compiled
    if code == 3:  # float32_half_even
        return np.int64(_clip62(np.rint(np.float64(np.float32(v) * sc32))))
    if code == 4:  # float64_half_away, then static_cast<int32_t>
        f = np.float64(v) * sc64
        t = np.trunc(f)
        if abs(f - t) >= 0.5:
            t += 1.0 if f > 0 else -1.0
        return wrap32(np.int64(_clip62(t)))
    if code == 2:  # single
        total = 31 - sh
        return (v * m + (np.int64(1) << (total - 1))) >> total
    left = sh if sh > 0 else 0
    right = -sh if sh < 0 else 0
    y = srdhm(wrap32(v << left), m)
    if code == 1:  # upward
        if right > 0:
            y = (y + (np.int64(1) << (right - 1))) >> right
        return y
    return rdbp(y, right)  # double


@numba.njit(cache=True)
def _fused(acc, bias, M, sh, sc32, sc64, code, overflow, zo, lo, hi, out):  # pragma: no cover - compiled
    rows, c = acc.shape
    for r in range(rows):  # serial: memory-bound, ~1-2 ns per element
        for j in range(c):
            v = np.int64(acc[r, j]) + bias[j]
            if overflow == 1:
                v = wrap32(v)
            elif overflow == 2:
                v = min(max(v, -2147483648), 2147483647)
            y = rescale(v, M[j], sh[j], sc32[j], sc64[j], code[j]) + zo
            out[r, j] = min(max(y, lo), hi)


@numba.njit(cache=True)
def _fused_srdhm(acc, bias, M, left, right, upward, wrap, zo, lo, hi, out):  # pragma: no cover - compiled
    """Branch-free ``double`` / ``upward`` forms for int32-wrapped accumulators and 0 <= M < 2^31
    (so SRDHM's INT32_MIN * INT32_MIN saturation cannot occur); vectorises over channels."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            v = np.int64(acc[r, j]) + bias[j]
            if wrap:
                v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
            a = (((v << left[j]) + 2147483648) & 0xFFFFFFFF) - 2147483648
            ab = a * M[j]
            num = ab + (1073741824 if ab >= 0 else -1073741823)
            q = (num + ((num >> 63) & 2147483647)) >> 31  # C division by 2^31 (toward zero)
            e = right[j]
            mask = (np.int64(1) << e) - 1
            if upward:
                y = (q + (mask >> 1) + (1 if e > 0 else 0)) >> e
            else:
                y = (q >> e) + (1 if (q & mask) > (mask >> 1) - (q >> 63) else 0)
            out[r, j] = min(max(y + zo, lo), hi)


@numba.njit(cache=True)
def _fused_f32(acc, bias, sc32, wrap, zo, lo, hi, out):  # pragma: no cover - compiled
    """``float32_half_even`` for every channel: rint(f32(acc) * f32(scale)) (|.| < 2^62 after the
    clamp to the output range anyway; the +-2^62 clip only matters for inf/NaN-free huge values)."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            v = np.int64(acc[r, j]) + bias[j]
            if wrap:
                v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
            f = np.rint(np.float64(np.float32(v) * sc32[j]))
            f = min(max(f, -4611686018427387904.0), 4611686018427387904.0)
            out[r, j] = min(max(np.int64(f) + zo, lo), hi)


@numba.njit(cache=True, inline="always")
def _srdhm32_one(v, bias32, M32, left32, right32, half32, adj32, has_left, ylo, yhi):  # pragma: no cover
    a = np.int32(v + bias32)
    if has_left:
        a = np.int32(a << left32)
    q = np.int32((np.int64(a) * np.int64(M32) + 1073741824) >> 31)
    y = np.int32(q + half32 - ((q >> 31) & adj32)) >> right32
    return min(max(y, ylo), yhi)


@numba.njit(cache=True)
def _fused_srdhm32(acc, bias32, M32, left32, right32, half32, adj32, has_left, zo, ylo, yhi, out):  # pragma: no cover
    """``double`` / ``upward`` for 8/16-bit outputs, in 32-bit lanes except the one 64-bit product.

    Same result as ``_fused_srdhm`` (int32 wrapping makes ``wrap32(wrap32(acc) + wrap32(bias))``
    equal ``wrap32(acc + bias)``).  ``acc`` int-valued with |acc| < 2^63.  With 0 <= M < 2^31 and
    ``a`` int32, SRDHM's ``(a*M + nudge) / 2^31`` (C division, nudge 2^30 or 1 - 2^30) equals
    ``(a*M + 2^30) >> 31`` (floor) in both signs; the result is int32-valued.  RDBP by ``e``:
    ``(q + half - (q < 0 ? adj : 0)) >> e`` with half = 2^(e-1) (0 when e = 0), adj = 1 for
    ``double`` when e > 0 (ties away from zero) and 0 for ``upward`` (ties up).  The result is
    clamped to [ylo, yhi] = [lo - zo, hi - zo] (int32) before adding zo, so nothing overflows.
    ``has_left`` False: every left shift is 0 (skipped)."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            out[r, j] = _srdhm32_one(np.int32(np.int64(acc[r, j])), bias32[j], M32[j], left32[j], right32[j],
                                     half32[j], adj32[j], has_left, ylo, yhi) + zo


@numba.njit(cache=True)
def _fused_srdhm32f(acc, bias32, M32, left32, right32, half32, adj32, has_left, zo, ylo, yhi, out):  # pragma: no cover
    """``_fused_srdhm32`` for a float32 accumulator, converted straight to int32: the float32
    GEMMs hand over integer values below 2^24 in magnitude (any float32 accumulator given here
    must be integer-valued and below 2^31)."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            out[r, j] = _srdhm32_one(np.int32(acc[r, j]), bias32[j], M32[j], left32[j], right32[j],
                                     half32[j], adj32[j], has_left, ylo, yhi) + zo


@numba.njit(cache=True)
def _fused_f32w(acc, bias32, sc32, zo, flo, fhi, out):  # pragma: no cover - compiled
    """``float32_half_even`` with the int32 wrap, for 8/16-bit outputs, in 32-bit lanes:
    ``rint(f32(wrap32(acc + bias)) * f32(scale))`` clamped in float32 to [lo - zo, hi - zo]
    (integers below 2^17, exact in float32; the clamp commutes with the monotone int conversion),
    then + zo.  Equals ``_fused_f32`` with ``wrap`` set."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            v = np.int32(np.int64(acc[r, j]) + bias32[j])
            f = np.rint(np.float32(v) * sc32[j])
            out[r, j] = np.int32(min(max(f, flo), fhi)) + zo


@numba.njit(cache=True)
def _fused_f32wf(acc, bias32, sc32, zo, flo, fhi, out):  # pragma: no cover - compiled
    """``_fused_f32w`` for a float32 accumulator (integer-valued, below 2^31: converted straight
    to int32)."""
    rows, c = acc.shape
    for r in range(rows):
        for j in range(c):
            v = np.int32(np.int32(acc[r, j]) + bias32[j])
            f = np.rint(np.float32(v) * sc32[j])
            out[r, j] = np.int32(min(max(f, flo), fhi)) + zo


def rq_arrays(rq, C: int):
    """Per-channel (M, shift, f32 scale, f64 scale, rounding code) int64/float arrays of a
    ``Requant`` over ``C`` channels, or None when a rounding form is not supported here."""
    code0 = _CODES.get(rq.rounding)
    if code0 is None:
        return None
    code = np.full(C, code0, np.int64)
    if rq.block:
        bcode = _CODES.get(rq.block_rounding)
        if bcode is None:
            return None
        code[: rq.block * (C // rq.block)] = bcode

    def per_c(v, dt):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(v).astype(dt), (C,)))

    return (per_c(rq.M, np.int64), per_c(rq.shift, np.int64), per_c(rq.scale, np.float32),
            per_c(rq.scale, np.float64), code)


def overflow_mode(acc32: bool, settings: dict | None) -> int:
    """0 exact, 1 wrap to int32, 2 saturate (``accumulate_overflow``)."""
    a = (settings or {}).get("accumulator") or {}
    if not acc32 or int(a.get("bits", 64)) != 32:
        return 0
    return 2 if a.get("overflow", "wrap") == "saturate" else 1


def bias_array(bias, C: int) -> np.ndarray:
    if bias is None:
        return np.zeros(C, np.int64)
    return np.ascontiguousarray(np.broadcast_to(np.asarray(bias, np.int64).reshape(-1), (C,)))


def fused_requant(rq, acc: np.ndarray, bias: np.ndarray | None = None, acc32: bool = False,
                  settings: dict | None = None) -> np.ndarray | None:
    """``rq(accumulate_overflow(acc + bias))`` (``rq`` a quant.params.Requant); ``acc`` int64 or
    integer-valued float (|acc| < 2^53), channels on the last axis.  None when not supported."""
    acc = np.asarray(acc)
    if acc.ndim == 0 or acc.dtype.kind not in "iuf" or acc.shape[-1] == 0:
        return None
    C = acc.shape[-1]
    arrs = rq_arrays(rq, C)
    if arrs is None:
        return None
    a2 = np.ascontiguousarray(acc).reshape(-1, C)
    if a2.dtype.kind == "u":
        a2 = a2.astype(np.int64)
    out = np.empty(a2.shape, np.dtype(rq.dtype))
    run_fused(a2, bias_array(bias, C), arrs, overflow_mode(acc32, settings), rq, out)
    return out.reshape(acc.shape)


def run_fused(a2, bias, arrs, overflow: int, rq, out) -> None:
    """``fused_runner(arrs, overflow, rq)(a2, bias, out)``."""
    fused_runner(arrs, overflow, rq)(a2, bias, out)


def fused_runner(arrs, overflow: int, rq):
    """The requantization loop for fixed per-channel arrays, chosen once (callers with a prepared
    plan keep it): a branch-free loop when every channel uses one form (double / upward with
    M >= 0, or float32_half_even) and the accumulator is wrapped or exact (32-bit lanes when the
    output is 8/16-bit); else the general loop.
    Returns ``f(a2, bias, out)`` for a 2-D accumulator ``a2`` (channels last) and ``out`` alike;
    ``bias`` int64, as ``bias_array`` makes it."""
    M, sh, sc32, _, code = arrs
    zo, lo, hi = int(rq.zo), int(rq.lo), int(rq.hi)
    c0 = int(code[0]) if code.size else 0
    narrow = np.dtype(rq.dtype).itemsize <= 2 and -(1 << 17) < lo - zo <= hi - zo < (1 << 17)
    if overflow != 2 and c0 in (0, 1) and np.all(code == c0) and np.all(M >= 0):
        left, right, upward, wrap = np.maximum(sh, 0), np.maximum(-sh, 0), c0 == 1, overflow == 1
        if narrow and np.all(M < (1 << 31)) and np.all(right < 32):
            i32 = np.int32
            M32, l32, r32 = M.astype(i32), np.minimum(left, 63).astype(i32), right.astype(i32)
            half = ((np.int64(1) << right) >> 1).astype(i32)
            adj = np.zeros_like(r32) if upward else (right > 0).astype(i32)
            ylo, yhi, has_left = i32(lo - zo), i32(hi - zo), bool(np.any(left))

            def run32(a2, bias, out):
                f = _fused_srdhm32f if a2.dtype == np.float32 else _fused_srdhm32
                f(a2, _wrap_i32(bias), M32, l32, r32, half, adj, has_left, i32(zo), ylo, yhi, out)
            return run32
        return lambda a2, bias, out: _fused_srdhm(a2, bias, M, left, right, upward, wrap, zo, lo, hi, out)
    if overflow != 2 and c0 == 3 and np.all(code == 3):
        wrap = overflow == 1
        if wrap and narrow:
            f32 = np.float32

            def runf(a2, bias, out):
                f = _fused_f32wf if a2.dtype == np.float32 else _fused_f32w
                f(a2, _wrap_i32(bias), sc32, np.int32(zo), f32(lo - zo), f32(hi - zo), out)
            return runf
        return lambda a2, bias, out: _fused_f32(a2, bias, sc32, wrap, zo, lo, hi, out)
    return lambda a2, bias, out: _fused(a2, bias, *arrs, overflow, zo, lo, hi, out)


def _wrap_i32(b: np.ndarray) -> np.ndarray:
    """int64 bias -> int32 modulo 2^32 (the fused 32-bit loops add it with int32 wrap)."""
    return b.astype(np.int32) if b.dtype != np.int32 else b


def conv_finish(plan, acc_f: np.ndarray) -> np.ndarray | None:
    """Fast ``conv.finish(plan, acc_f)`` for a ``QConvPlan`` (None: use the NumPy path)."""
    return fused_requant(plan.requant, acc_f, plan.bias, plan.acc32, plan.settings)
