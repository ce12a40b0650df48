"""gemmlowp fixed-point transcendental functions (``fixedpoint/fixedpoint.h``), vectorised.

Representation: a ``FixedPoint<int32, ib>`` value is its raw int32 stored in an int64 array;
``ib`` integer bits means ``real = raw * 2^(ib - 31)``.  Operator semantics copied from the
C++ class, not from real arithmetic:

* ``a + b`` / ``a - b`` / ``-a`` wrap modulo 2^32 (plain int32 arithmetic, no saturation);
* ``a * b`` is ``SaturatingRoundingDoublingHighMul`` on the raws (result has ib_a + ib_b bits);
* ``Rescale`` / ``SaturatingRoundingMultiplyByPOT<e>``: e > 0 saturating left shift, e < 0
  ``RoundingDivideByPOT`` (ties away from zero);
* ``F0::One()`` is INT32_MAX (1.0 is not representable with 0 integer bits).

Also the TFLite helpers built on them: ``get_reciprocal`` (softmax) and
``inv_sqrt_multiplier_exp`` (``GetInvSqrtQuantizedMultiplierExp``: L2 normalisation, RSQRT).
All functions take and return int64 arrays of int32 values; nothing here overflows int64.
"""
from __future__ import annotations

import numpy as np

from .fixedpoint import INT32_MAX, INT32_MIN, rdbp, srdhm, wrap_int32

# Q0.31 constants of the published gemmlowp algorithms (see the function docstrings).
_EXP_MINUS_ONE_EIGHTH = 1895147668        # exp(-1/8)
_ONE_THIRD = 715827883                    # 1/3
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))   # exp(-2^k) for k = -2..4
_F2_48_OVER_17 = 1515870810               # 48/17 with 2 integer bits
_F2_NEG_32_OVER_17 = -1010580540          # -32/17 with 2 integer bits
_HALF_SQRT2 = 1518500250                  # sqrt(2)/2


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def one(ib: int) -> int:
    """Raw of ``FixedPoint<int32, ib>::One()``."""
    return INT32_MAX if ib == 0 else 1 << (31 - ib)


def sat_rounding_mul_pot(x, e: int) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOT<e>``: e > 0 shifts left saturating at +-(2^(31-e) - 1)
    thresholds (to INT32_MAX / INT32_MIN); e < 0 is RoundingDivideByPOT(x, -e)."""
    x = _i64(x)
    if e == 0:
        return x
    if e < 0:
        return rdbp(x, -e)
    thr = (1 << (31 - e)) - 1
    return np.where(x > thr, INT32_MAX, np.where(x < -thr, INT32_MIN, x << e)).astype(np.int64)


def rescale(x, src_ib: int, dst_ib: int) -> np.ndarray:
    """``Rescale<dst_ib>(FixedPoint<src_ib>)``."""
    return sat_rounding_mul_pot(x, src_ib - dst_ib)


def rounding_half_sum(a, b) -> np.ndarray:
    """``RoundingHalfSum`` (int32): (a + b + sign) / 2 with C truncation, sign = +1 if a+b >= 0."""
    s = _i64(a) + _i64(b)
    s = s + np.where(s >= 0, 1, -1)
    return np.where(s >= 0, s >> 1, -((-s) >> 1))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series of degree 4 around -1/8."""
    x = wrap_int32(_i64(a) + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbp(x4, 2)
    poly = rdbp(wrap_int32(srdhm(wrap_int32(x4_over_4 + x3), _ONE_THIRD) + x2), 1)
    c = _EXP_MINUS_ONE_EIGHTH
    return wrap_int32(c + srdhm(c, wrap_int32(x + poly)))


def exp_on_negative_values(a, ib: int) -> np.ndarray:
    """exp(a) for a <= 0 given as ``FixedPoint<ib>``; result Q0.31 (a == 0 -> INT32_MAX)."""
    a = _i64(a)
    fb = 31 - ib
    quarter = 1 << (fb - 2)
    amq = wrap_int32((a & (quarter - 1)) - quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(rescale(amq, ib, 0))
    remainder = wrap_int32(amq - a)
    for exponent, mult in _EXP_BARREL:
        if ib > exponent:
            bit = (remainder >> (fb + exponent)) & 1
            result = np.where(bit != 0, srdhm(result, mult), result)
    if ib > 5:
        result = np.where(a < -(1 << (36 - ib)), 0, result)
    return np.where(a == 0, INT32_MAX, result).astype(np.int64)


def _newton_reciprocal_f2(half_den: np.ndarray) -> np.ndarray:
    """Three Newton-Raphson steps for 1/half_den (half_den in [0.5, 1) Q0.31); result Q2.29."""
    x = wrap_int32(_F2_48_OVER_17 + srdhm(half_den, _F2_NEG_32_OVER_17))
    for _ in range(3):
        one_minus = wrap_int32(one(2) - srdhm(half_den, x))
        x = wrap_int32(x + rescale(srdhm(x, one_minus), 4, 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + a) for a in [0, 1) Q0.31 -> Q0.31."""
    half_den = rounding_half_sum(a, INT32_MAX)
    x = _newton_reciprocal_f2(half_den)
    return rescale(x, 1, 0)  # ExactMulByPot<-1> (Q2 -> Q1, same raw), then Rescale<0>


def one_minus_x_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """(1 - a) / (1 + a) for a in [0, 1) Q0.31 -> Q0.31."""
    half_den = rounding_half_sum(a, INT32_MAX)
    x = _newton_reciprocal_f2(half_den)
    return rescale(wrap_int32(x - one(2)), 2, 0)


def tanh(a, ib: int) -> np.ndarray:
    """gemmlowp ``tanh(FixedPoint<ib>)`` -> Q0.31."""
    a = _i64(a)
    neg = a < 0
    n = np.where(neg, a, wrap_int32(-a))
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(n, ib + 1))
    return np.where(a == 0, 0, np.where(neg, wrap_int32(-t), t)).astype(np.int64)


def logistic(a, ib: int) -> np.ndarray:
    """gemmlowp ``logistic(FixedPoint<ib>)`` -> Q0.31 (a == 0 -> 2^30)."""
    a = _i64(a)
    pos = a > 0
    abs_a = np.where(pos, a, wrap_int32(-a))
    r_pos = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(wrap_int32(-abs_a), ib))
    r_neg = wrap_int32(INT32_MAX - r_pos)
    return np.where(a == 0, 1 << 30, np.where(pos, r_pos, r_neg)).astype(np.int64)


def clz32(x) -> np.ndarray:
    """Count leading zeros of non-negative int32 values (32 for 0)."""
    x = _i64(x)
    if np.any(x < 0):
        raise ValueError("clz32: negative input")
    # frexp's exponent is the bit length exactly for integers < 2^53.
    bits = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    return 32 - bits


def get_reciprocal(x, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetReciprocal``: for x > 0 (FixedPoint<x_integer_digits>) returns
    (Q0.31 reciprocal scale, num_bits_over_unit)."""
    x = _i64(x)
    hp1 = clz32(x)
    shifted = (x << hp1) - (1 << 31)  # top bit lands on bit 31: result in [0, 2^31)
    return one_over_one_plus_x_for_x_in_0_1(shifted), x_integer_digits - hp1


def inv_sqrt_multiplier_exp(value, reverse_shift: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp`` over an array of int32 values >= 0.

    Returns (multiplier, shift) such that 1/sqrt(value) ~= multiplier * 2^(shift - 31) when
    ``reverse_shift == -1``.  value <= 1 gives (INT32_MAX, 0).  Newton-Raphson in Q3.28, 5 steps.
    """
    v = _i64(value).copy()
    small = v <= 1
    v = np.where(small, 4, v)
    shift = np.full(v.shape, 11, np.int64)
    for _ in range(2):  # int32 inputs need at most one division by 4 to get below 2^29
        big = v >= (1 << 29)
        v = np.where(big, v // 4, v)
        shift = shift + big
    pairs = (clz32(v) - 1) // 2 - 1
    shift = shift - pairs
    v = v << (2 * pairs)
    f_in = v >> 1
    half_in = rdbp(f_in, 1)
    half_three = (1 << 28) + (1 << 27)
    x = np.full(v.shape, one(3), np.int64)
    for _ in range(5):
        x3 = rescale(srdhm(srdhm(x, x), x), 9, 3)
        x = rescale(wrap_int32(srdhm(half_three, x) - srdhm(half_in, x3)), 6, 3)
    x = srdhm(x, _HALF_SQRT2)
    neg = shift < 0
    x = np.where(neg, wrap_int32(x << np.where(neg, -shift, 0)), x)
    shift = np.where(neg, 0, shift)
    x = np.where(small, INT32_MAX, x)
    shift = np.where(small, 0, shift * reverse_shift)
    return x.astype(np.int64), shift.astype(np.int64)
