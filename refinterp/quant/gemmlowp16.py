"""gemmlowp fixed point with int16 raws (``FixedPoint<int16_t, ib>``, ``fixedpoint/fixedpoint.h``):
``logistic`` and ``tanh``, as LiteRT's optimized int16 LOGISTIC / TANH run them for power-of-two
input scales (input ``FixedPoint<int16, 3>``, output ``FixedPoint<int16, 0>``).

Differences from the int32 versions in ``gemmlowp.py``:

* raws are int16 (``real = raw * 2^(ib - 15)``); + and - wrap modulo 2^16;
* ``*`` is the int16 SaturatingRoundingDoublingHighMul (``srdhm16``);
* constants are the int32 ones divided by 2^16 with RoundingDivideByPOT
  (``RescaleConstantInitializer``);
* the last add of ``exp_on_interval_between_negative_one_quarter_and_0_excl`` saturates
  (``AddSaturatingIf16Bit``); ``One()`` of F0 is 32767.

All values are int16-valued int64 arrays.
"""
from __future__ import annotations

import numpy as np

from .fixedpoint import INT16_MAX, INT16_MIN, rdbp, srdhm16
from .gemmlowp import (_EXP_BARREL, _EXP_MINUS_ONE_EIGHTH, _F2_48_OVER_17, _F2_NEG_32_OVER_17, _ONE_THIRD,
                       rounding_half_sum)

_I64 = np.int64


def _c(int32_value: int) -> int:
    """``RescaleConstantInitializer<int16>``: RoundingDivideByPOT(int32 constant, 16)."""
    return int(rdbp(np.int64(int32_value), 16))


def wrap16(x) -> np.ndarray:
    x = np.asarray(x, _I64)
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def sat_mul_pot(x, e: int) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOT<e>`` (int16): e > 0 saturating shift (threshold
    2^(15-e) - 1), e < 0 RoundingDivideByPOT."""
    x = np.asarray(x, _I64)
    if e == 0:
        return x
    if e < 0:
        return rdbp(x, -e)
    thr = (1 << (15 - e)) - 1
    return np.where(x > thr, INT16_MAX, np.where(x < -thr, INT16_MIN, x << e)).astype(_I64)


def _one(ib: int) -> int:
    return INT16_MAX if ib == 0 else 1 << (15 - ib)


def exp_on_interval_between_negative_one_quarter_and_0_excl(a) -> np.ndarray:
    c, third = _c(_EXP_MINUS_ONE_EIGHTH), _c(_ONE_THIRD)
    x = wrap16(np.asarray(a, _I64) + (1 << 12))
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    poly = rdbp(wrap16(srdhm16(wrap16(rdbp(x4, 2) + x3), third) + x2), 1)
    return np.clip(c + srdhm16(c, wrap16(x + poly)), INT16_MIN, INT16_MAX)


def exp_on_negative_values(a, ib: int) -> np.ndarray:
    a = np.asarray(a, _I64)
    fb = 15 - ib
    quarter = 1 << (fb - 2)
    amq = wrap16((a & (quarter - 1)) - quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(sat_mul_pot(amq, ib))
    remainder = wrap16(amq - a)
    for exponent, mult in _EXP_BARREL:
        if ib > exponent:
            bit = (remainder >> (fb + exponent)) & 1
            result = np.where(bit != 0, srdhm16(result, _c(mult)), result)
    return np.where(a == 0, INT16_MAX, result).astype(_I64)


def _newton_f2(half_den: np.ndarray) -> np.ndarray:
    x = wrap16(_c(_F2_48_OVER_17) + srdhm16(half_den, _c(_F2_NEG_32_OVER_17)))
    for _ in range(3):
        one_minus = wrap16(_one(2) - srdhm16(half_den, x))
        x = wrap16(x + sat_mul_pot(srdhm16(x, one_minus), 2))
    return x


def tanh(a, ib: int) -> np.ndarray:
    a = np.asarray(a, _I64)
    neg = a < 0
    n = np.where(neg, a, wrap16(-a))
    half_den = rounding_half_sum(exp_on_negative_values(n, ib + 1), INT16_MAX)
    t = sat_mul_pot(wrap16(_newton_f2(half_den) - _one(2)), 2)
    return np.where(a == 0, 0, np.where(neg, wrap16(-t), t)).astype(_I64)


def logistic(a, ib: int) -> np.ndarray:
    a = np.asarray(a, _I64)
    pos = a > 0
    abs_a = np.where(pos, a, wrap16(-a))
    half_den = rounding_half_sum(exp_on_negative_values(wrap16(-abs_a), ib), INT16_MAX)
    r_pos = sat_mul_pot(_newton_f2(half_den), 1)
    r_neg = wrap16(INT16_MAX - r_pos)
    return np.where(a == 0, _c(1 << 30), np.where(pos, r_pos, r_neg)).astype(_I64)
