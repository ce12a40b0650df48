"""Fixed-point primitives of TFLite / gemmlowp, vectorised over int64 NumPy arrays.

Contract for every array function here: arguments are integer arrays (or Python ints) holding
*int32 values* (int16 for the ``*16`` functions) stored in int64; results are int64 arrays
holding the exact value the C++ function returns.  Intermediate products of two int32 values fit
in int64 (|a*b| <= 2^62), so nothing here can overflow int64.

Multiplier convention (TFLite ``QuantizeMultiplier``): a real multiplier ``d`` is represented as
``d ~= M * 2^(shift - 31)`` with ``M`` in [2^30, 2^31) (or 0) and ``shift`` an int, positive
meaning a left shift.
"""
from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT16_MIN = -(1 << 15)
INT16_MAX = (1 << 15) - 1


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


# --- scalar rounding of floats ------------------------------------------------------------------

def round_half_away(x):
    """C ``std::round``/``roundf``: nearest integer, ties away from zero; keeps the float dtype.

    Exact for every finite input (``x - trunc(x)`` is exact in binary floating point; no ``+0.5``
    that could round up 0.49999999999999994).
    """
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    t = np.trunc(x)
    frac = x - t
    return t + np.where(np.abs(frac) >= 0.5, np.sign(x), 0).astype(x.dtype)


def round_half_even(x):
    """IEEE round-to-nearest-even (``rint``/``nearbyint``/``lrintf`` in the default mode)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    return np.rint(x)


# --- QuantizeMultiplier -------------------------------------------------------------------------

def quantize_multiplier(d: float, single_rounding: bool = False) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier(double)`` -> (M, shift) with ``d ~= M * 2^(shift-31)``.

    * ``d == 0`` -> (0, 0).
    * mantissa ``q`` of ``frexp`` scaled by 2^31 and rounded half away from zero; the rounding can
      reach 2^31 exactly, then M = 2^30 and shift += 1.
    * shift < -31 (|d| < ~2^-32) flushes to (0, 0).
    * ``single_rounding`` (``TFLITE_SINGLE_ROUNDING`` builds): shift > 30 saturates to
      (2^31 - 1, 30).
    Negative ``d`` gives a negative M (as the C++ does).
    """
    d = float(d)
    if d == 0.0:
        return 0, 0
    q, shift = math.frexp(d)
    # q * 2^31 is exact (power-of-two scaling); |q*2^31| < 2^31 so the +-0.5 test is exact.
    qf = int(round_half_away(q * float(1 << 31)))
    if abs(qf) > (1 << 31):
        raise ValueError(f"quantize_multiplier({d!r}): mantissa out of range")
    if abs(qf) == (1 << 31):
        qf //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if single_rounding and shift > 30:
        return INT32_MAX, 30
    return int(qf), int(shift)


def quantize_multiplier_smaller_than_one_exp(d: float) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``: 0 < d < 1, returns (M, shift) with shift <= 0."""
    if not 0.0 < float(d) < 1.0:
        raise ValueError(f"quantize_multiplier_smaller_than_one_exp: {d!r} not in (0, 1)")
    m, s = quantize_multiplier(d)
    if s > 0:
        raise ValueError(f"quantize_multiplier_smaller_than_one_exp: {d!r} gave shift {s}")
    return m, s


def quantize_multiplier_greater_than_one(d: float) -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: d > 1, returns (M, shift) with shift >= 0."""
    if not float(d) > 1.0:
        raise ValueError(f"quantize_multiplier_greater_than_one: {d!r} not > 1")
    m, s = quantize_multiplier(d)
    if s < 0:
        raise ValueError(f"quantize_multiplier_greater_than_one: {d!r} gave shift {s}")
    return m, s


def quantize_multipliers(ds) -> tuple[np.ndarray, np.ndarray]:
    """``quantize_multiplier`` over a 1-D sequence of doubles -> (int64 M[k], int64 shift[k])."""
    pairs = [quantize_multiplier(float(d)) for d in np.asarray(ds, dtype=np.float64).ravel()]
    return (np.array([p[0] for p in pairs], dtype=np.int64),
            np.array([p[1] for p in pairs], dtype=np.int64))


def trunc_div(a, b) -> np.ndarray:
    """C integer division ``a / b`` (truncation toward zero) of integer arrays / scalars, b != 0."""
    a, b = np.asarray(a), np.asarray(b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


# --- gemmlowp fixed point ----------------------------------------------------------------------

def _trunc_div_pow2(num: np.ndarray, e: int) -> np.ndarray:
    """C integer division ``num / 2^e`` (truncation toward zero)."""
    return np.where(num >= 0, num >> e, -((-num) >> e))


def srdhm(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 values.

    ``round(a*b / 2^31)`` with nudge 2^30 (ab >= 0) or 1 - 2^30 (ab < 0) and C truncating
    division, i.e. ties round toward +inf; the single overflow case a == b == INT32_MIN
    saturates to INT32_MAX.  Result is int32-valued.
    """
    a = _i64(a)
    b = _i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    r = _trunc_div_pow2(ab + nudge, 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), r)


def srdhm16(a, b) -> np.ndarray:
    """int16 ``SaturatingRoundingDoublingHighMul``: nudge 2^14 / 1 - 2^14, divide by 2^15,
    INT16_MIN * INT16_MIN saturates to INT16_MAX.  Inputs/result int16-valued."""
    a = _i64(a)
    b = _i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 14), np.int64(1 - (1 << 14)))
    r = _trunc_div_pow2(ab + nudge, 15)
    return np.where((a == INT16_MIN) & (b == INT16_MIN), np.int64(INT16_MAX), r)


def rdbp(x, e) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT(x, e)``, 0 <= e <= 31: x / 2^e rounded half away from zero.

    ``e`` may be an array broadcasting against ``x``.
    """
    x = _i64(x)
    e = _i64(e)
    if np.any(e < 0) or np.any(e > 62):
        raise ValueError("rdbp: exponent out of range [0, 62]")
    mask = (np.int64(1) << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> e) + (rem > thr).astype(np.int64)


def vqrdmulh(a, M) -> np.ndarray:
    """NEON ``vqrdmulh`` on int32 lanes with 0 <= M < 2^31: (a*M + 2^30) >> 31, ties toward +inf
    (SRDHM without its truncating nudge; the saturating case, both INT32_MIN, cannot occur)."""
    return (_i64(a) * _i64(M) + (1 << 30)) >> 31


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (what C++ int32 overflow does in practice)."""
    x = _i64(x)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def sat_left_shift(x, s, bits: int = 32) -> np.ndarray:
    """gemmlowp ``SaturatingShiftLeft``/``vqshl``: x * 2^s saturated to the signed ``bits`` range
    (s >= 0)."""
    x = _i64(x)
    s = _i64(s)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    # Saturate before shifting so large shifts cannot overflow int64.
    limit_hi = np.int64(hi) >> s
    limit_lo = -((np.int64(-lo)) >> s)
    out = np.where(x > limit_hi, hi, np.where(x < limit_lo, lo, x << np.minimum(s, 62)))
    return out.astype(np.int64)
