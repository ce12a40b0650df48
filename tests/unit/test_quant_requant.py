"""Hand tables and an independent big-int model for refinterp.quant.requant."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from refinterp.quant import Rounding, requantize, requantize_float
from refinterp.quant.requant import mbqm64

I32MIN, I32MAX = -(2 ** 31), 2 ** 31 - 1


def half_up(v: Fraction) -> int:
    return math.floor(v + Fraction(1, 2))


def half_away(v: Fraction) -> int:
    return (1 if v >= 0 else -1) * math.floor(abs(v) + Fraction(1, 2))


def wrap32(x: int) -> int:
    return (x + 2 ** 31) % 2 ** 32 - 2 ** 31


def ref_double(x, M, s):
    l, r = max(s, 0), max(-s, 0)
    a = wrap32(x * 2 ** l)
    y = I32MAX if (a == I32MIN and M == I32MIN) else half_up(Fraction(a * M, 2 ** 31))
    return half_away(Fraction(y, 2 ** r))


def ref_upward(x, M, s):
    l, r = max(s, 0), max(-s, 0)
    y = half_up(Fraction(wrap32(x * 2 ** l) * M, 2 ** 31))
    return half_up(Fraction(y, 2 ** r))


def ref_single(x, M, s):
    return half_up(Fraction(x * M, 2 ** (31 - s)))


def ref_mbqm64(x, M, s):
    mr = 0x7FFF if M >= 0x7FFF0000 else half_up(Fraction(M, 2 ** 16))
    return wrap32(half_up(Fraction(x * mr, 2 ** (15 - s))))


@pytest.mark.parametrize("x,M,s,want_double,want_single", [
    (1, 2 ** 30, -1, 1, 0),                 # TF#25087: exact 0.25; SRDHM 0.5 -> 1, RDBP(1,1) = 1
    (7984, 1583594044, -9, 12, 11),          # TF#25087 worked example
    (-1, 2 ** 30, -1, 0, 0),                 # negative: SRDHM(-1, 2^30) = 0 (tie toward +inf)
    (3, 2 ** 30, -1, 1, 1),                  # 0.75 exact: SRDHM = 2 (1.5 up), RDBP(2,1) = 1
    (-3, 2 ** 30, -1, -1, -1),               # SRDHM(-3,2^30) = -1, RDBP(-1,1) = -1 (tie away)
    (5, 2 ** 30, 0, 3, 3),                   # 2.5: ties up in both
    (-5, 2 ** 30, 0, -2, -2),                # -2.5: SRDHM ties to +inf
    (I32MIN, I32MIN, 0, I32MAX, 2 ** 31),    # saturation (single has no saturation: exact 2^31)
    (I32MAX, I32MAX, 0, I32MAX - 1, I32MAX - 1),
    (100, 2 ** 30, 30, wrap32(100 * 2 ** 30) // 2, 100 * 2 ** 29),  # left shift at the limit wraps int32
    (2 ** 30, 2 ** 30, -31, 0, 0),           # 2^30 * 2^-32 = 0.25
    (3 * 2 ** 30 // 2, 2 ** 31 - 1, -31, 1, 1),
])
def test_hand_table(x, M, s, want_double, want_single):
    assert ref_double(x, M, s) == want_double
    assert ref_single(x, M, s) == want_single
    assert int(requantize(x, M, s, Rounding.DOUBLE)) == want_double
    assert int(requantize(x, M, s, "single")) == want_single


def test_upward_table():
    # 7984 * 1583594044 / 2^31 = 5887.6..., SRDHM = 5888; 5888/512 = 11.5 -> up = 12 ; -x: -11.5 -> -11
    assert ref_upward(7984, 1583594044, -9) == 12
    assert int(requantize(7984, 1583594044, -9, "upward")) == 12
    assert int(requantize(-7984, 1583594044, -9, "upward")) == ref_upward(-7984, 1583594044, -9) == -11
    assert int(requantize(-7984, 1583594044, -9, "double")) == ref_double(-7984, 1583594044, -9) == -12


@pytest.mark.parametrize("form,ref", [("double", ref_double), ("upward", ref_upward), ("single", ref_single)])
def test_random_vs_bigint(form, ref):
    rng = random.Random(hash(form) % 1000)
    xs = [rng.randint(-(2 ** 24), 2 ** 24) for _ in range(1500)] + [rng.randint(I32MIN, I32MAX) for _ in range(300)]
    Ms = [rng.randint(2 ** 30, I32MAX) for _ in xs]
    ss = [rng.randint(-31, 0) if rng.random() < 0.8 else rng.randint(0, 3) for _ in xs]
    if form == "single":  # keep x*M inside the documented int64 contract
        pass
    got = requantize(np.array(xs), np.array(Ms), np.array(ss), form).tolist()
    assert got == [ref(x, m, s) for x, m, s in zip(xs, Ms, ss)]


def test_mbqm64_table_and_random():
    assert int(mbqm64(1 << 40, 0x7FFF0000, 0)) == ref_mbqm64(1 << 40, 0x7FFF0000, 0)
    assert int(mbqm64(3, 2 ** 30, 0)) == 2         # Mr = 2^14; 3*2^14/2^15 = 1.5 -> 2
    assert int(mbqm64(-3, 2 ** 30, 0)) == -1        # -1.5 -> half up -> -1
    rng = random.Random(7)
    xs = [rng.randint(-(2 ** 46), 2 ** 46) for _ in range(1000)]
    Ms = [rng.randint(2 ** 30, I32MAX) for _ in xs]
    ss = [rng.randint(-31, 7) for _ in xs]
    got = requantize(np.array(xs), np.array(Ms), np.array(ss), Rounding.MBQM64).tolist()
    assert got == [ref_mbqm64(x, m, s) for x, m, s in zip(xs, Ms, ss)]


def test_pot():
    got = requantize(np.array([5, -5, 6, -6, 3]), 0, np.array([-1, -1, -2, -2, 2]), "pot").tolist()
    assert got == [3, -3, 2, -2, 12]


def test_per_channel_broadcast_last_axis():
    acc = np.arange(-12, 12).reshape(2, 3, 4) * 1000
    M = np.array([2 ** 30, 1500000000, 2 ** 31 - 1, 1234567890])
    s = np.array([-3, -5, 0, -10])
    got = requantize(acc, M, s, "double")
    want = np.array([ref_double(int(a), int(M[i % 4]), int(s[i % 4])) for i, a in enumerate(acc.ravel())])
    assert got.shape == acc.shape and got.ravel().tolist() == want.tolist()


def test_float_forms():
    acc = np.array([1, -1, 3, -3, 5, 7])
    # float64 half away: 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, -1.5 -> -2, 2.5 -> 3, 3.5 -> 4
    assert requantize_float(acc, 0.5, "float64_half_away").tolist() == [1, -1, 2, -2, 3, 4]
    # float32 half even: 0.5 -> 0, -0.5 -> -0, 1.5 -> 2, -1.5 -> -2, 2.5 -> 2, 3.5 -> 4
    assert requantize_float(acc, 0.5, "float32_half_even").tolist() == [0, 0, 2, -2, 2, 4]
    # float32 product rounding: 16777217 is not a float32 -> becomes 16777216 before scaling
    assert requantize_float(np.array([16777217]), 1.0, "float32_half_even").tolist() == [16777216]
    assert requantize_float(np.array([16777217]), 1.0, "float64_half_away").tolist() == [16777217]


def test_bad_rounding_names():
    with pytest.raises(ValueError, match="dobule"):
        requantize(1, 1, 0, "dobule")
    with pytest.raises(ValueError):
        requantize(1, 1, 0, "float32_half_even")
    with pytest.raises(ValueError):
        requantize_float(1, 1.0, "double")
