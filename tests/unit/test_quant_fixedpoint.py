"""Hand tables and an independent big-int model for refinterp.quant.fixedpoint."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from refinterp.quant import fixedpoint as fp

I32MIN, I32MAX = -(2 ** 31), 2 ** 31 - 1


def ref_round_half_away(v: Fraction) -> int:
    s = 1 if v >= 0 else -1
    return s * math.floor(abs(v) + Fraction(1, 2))


def ref_srdhm(a: int, b: int, bits: int = 32) -> int:
    """Definition: round(a*b / 2^(bits-1)) with ties toward +inf, saturating MIN*MIN."""
    lo = -(2 ** (bits - 1))
    if a == lo and b == lo:
        return 2 ** (bits - 1) - 1
    return math.floor(Fraction(a * b, 2 ** (bits - 1)) + Fraction(1, 2))


def ref_rdbp(x: int, e: int) -> int:
    return ref_round_half_away(Fraction(x, 2 ** e))


def test_round_half_away_table():
    got = fp.round_half_away(np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                                       2.4999999, 0.0, -0.0, 1e300]))
    assert got.tolist() == [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.0, -0.0, 2.0, 0.0, 0.0, 1e300]
    f32 = fp.round_half_away(np.array([0.5, 2.5, -3.5], np.float32))
    assert f32.dtype == np.float32 and f32.tolist() == [1.0, 3.0, -4.0]


def test_round_half_even_table():
    assert fp.round_half_even(np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5])).tolist() == [0, 2, 2, -0, -2, -2]


@pytest.mark.parametrize("a,b,want", [
    (I32MIN, I32MIN, I32MAX),          # the only saturating case
    (I32MIN, I32MAX, -I32MAX),         # -2^31*(2^31-1)/2^31 = -(2^31-1) exactly
    (I32MAX, I32MAX, I32MAX - 1),      # (2^31-1)^2/2^31 = 2^31 - 2 + 2^-31
    (1, 2 ** 30, 1),                   # 0.5 -> ties up -> 1
    (-1, 2 ** 30, 0),                  # -0.5 -> ties toward +inf -> 0
    (3, 2 ** 30, 2),                   # 1.5 -> 2
    (-3, 2 ** 30, -1),                 # -1.5 -> -1
    (0, I32MIN, 0),
    (I32MIN, 1, -1),                   # -2^31/2^31 = -1 exactly
])
def test_srdhm_table(a, b, want):
    assert ref_srdhm(a, b) == want
    assert int(fp.srdhm(a, b)) == want


def test_srdhm_random_vs_bigint():
    rng = random.Random(1)
    a = [rng.randint(I32MIN, I32MAX) for _ in range(3000)] + [rng.randint(-5, 5) * 2 ** 29 for _ in range(200)]
    b = [rng.randint(I32MIN, I32MAX) for _ in range(3000)] + [2 ** 30 + rng.choice([0, 2 ** 29]) for _ in range(200)]
    got = fp.srdhm(np.array(a), np.array(b)).tolist()
    assert got == [ref_srdhm(x, y) for x, y in zip(a, b)]


def test_srdhm16_table_and_random():
    assert int(fp.srdhm16(-32768, -32768)) == 32767
    assert int(fp.srdhm16(1, 16384)) == 1 and int(fp.srdhm16(-1, 16384)) == 0
    rng = random.Random(2)
    a = [rng.randint(-32768, 32767) for _ in range(2000)]
    b = [rng.randint(-32768, 32767) for _ in range(2000)]
    assert fp.srdhm16(np.array(a), np.array(b)).tolist() == [ref_srdhm(x, y, 16) for x, y in zip(a, b)]


@pytest.mark.parametrize("x,e,want", [
    (1, 1, 1), (-1, 1, -1), (3, 1, 2), (-3, 1, -2), (2, 2, 1), (-2, 2, -1), (5, 2, 1), (-5, 2, -1),
    (6, 2, 2), (-6, 2, -2), (7, 0, 7), (I32MAX, 31, 1), (I32MIN, 31, -1), (2 ** 30, 31, 1),
    (-(2 ** 30), 31, -1), (2 ** 30 - 1, 31, 0), (-(2 ** 30) + 1, 31, 0),
])
def test_rdbp_table(x, e, want):
    assert ref_rdbp(x, e) == want
    assert int(fp.rdbp(x, e)) == want


def test_rdbp_random_and_array_exponent():
    rng = random.Random(3)
    x = [rng.randint(I32MIN, I32MAX) for _ in range(2000)]
    e = [rng.randint(0, 31) for _ in range(2000)]
    assert fp.rdbp(np.array(x), np.array(e)).tolist() == [ref_rdbp(a, b) for a, b in zip(x, e)]


def ref_quantize_multiplier(d: float):
    """From the definition: d = q*2^k, q in [0.5,1); M = round_half_away(q*2^31) with fix-up."""
    if d == 0:
        return 0, 0
    v = Fraction(d)
    k = 0
    while abs(v) >= 1:
        v /= 2
        k += 1
    while abs(v) < Fraction(1, 2):
        v *= 2
        k -= 1
    m = ref_round_half_away(v * 2 ** 31)
    if abs(m) == 2 ** 31:
        m //= 2
        k += 1
    if k < -31:
        return 0, 0
    return m, k


@pytest.mark.parametrize("d,want", [
    (0.0, (0, 0)),
    (1.0, (2 ** 30, 1)),
    (0.5, (2 ** 30, 0)),
    (0.25, (2 ** 30, -1)),
    (2.0 ** -31, (2 ** 30, -30)),
    (2.0 ** -32, (2 ** 30, -31)),
    (2.0 ** -33, (0, 0)),            # shift -32 < -31: flushed
    (1e-12, (0, 0)),
    (1.0 - 2.0 ** -53, (2 ** 30, 1)),  # mantissa rounds up to 2^31: fix-up
    (1.0 - 2.0 ** -33, (2 ** 30, 1)),  # q*2^31 = 2^31 - 0.5 -> half away -> 2^31 -> fix-up
    (1.0 - 2.0 ** -31, (2 ** 31 - 1, 0)),
    (0.75, (3 * 2 ** 29, 0)),
    (2.0 ** 30, (2 ** 30, 31)),
])
def test_quantize_multiplier_table(d, want):
    assert ref_quantize_multiplier(d) == want
    assert fp.quantize_multiplier(d) == want


def test_quantize_multiplier_random_vs_definition():
    rng = random.Random(4)
    for _ in range(2000):
        d = rng.uniform(0.5, 1.0) * 2.0 ** rng.randint(-40, 10)
        assert fp.quantize_multiplier(d) == ref_quantize_multiplier(d)


def test_quantize_multiplier_variants():
    assert fp.quantize_multiplier(2.0 ** 40, single_rounding=True) == (I32MAX, 30)
    assert fp.quantize_multiplier_smaller_than_one_exp(0.3)[1] <= 0
    assert fp.quantize_multiplier_greater_than_one(3.0) == (3 * 2 ** 29, 2)
    with pytest.raises(ValueError):
        fp.quantize_multiplier_smaller_than_one_exp(1.5)
    with pytest.raises(ValueError):
        fp.quantize_multiplier_greater_than_one(0.5)


def test_sat_left_shift_and_wrap():
    assert fp.sat_left_shift(np.array([1, -1, 2 ** 30, -(2 ** 30), -(2 ** 30) - 1, 3]), 1).tolist() == \
        [2, -2, I32MAX, I32MIN, I32MIN, 6]
    assert fp.sat_left_shift(np.array([1, -1]), 40).tolist() == [I32MAX, I32MIN]
    assert fp.sat_left_shift(np.array([16384, -16385]), 1, bits=16).tolist() == [32767, -32768]
    assert fp.wrap_int32(np.array([2 ** 31, -(2 ** 31) - 1, 5])).tolist() == [I32MIN, I32MAX, 5]
