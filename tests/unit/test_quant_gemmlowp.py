"""refinterp.quant.gemmlowp and refinterp.quant.lut: accuracy bounds against real maths, exact
special values of the gemmlowp algorithms, saturation edges, and an independent scalar (pure
Python int) evaluation of the fixed-point operators for vectorisation errors.  Bit-exactness
against the real runtimes is covered by tests/conformance/test_tflite_int_*.py (softmax, TFLM
logistic/tanh, RSQRT, L2_NORMALIZATION use these functions)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refinterp.quant import gemmlowp as g
from refinterp.quant import lut
from refinterp.quant.fixedpoint import INT32_MAX, INT32_MIN

Q31 = float(1 << 31)


# --- independent scalar operators ---------------------------------------------------------------

def _wrap(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    num = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return int(num / (1 << 31)) if abs(num) < (1 << 52) else (abs(num) >> 31) * (1 if num >= 0 else -1)


def _rdbp(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def _scalar_one_over_one_plus_x(a: int) -> int:
    s = a + INT32_MAX
    half = int((s + (1 if s >= 0 else -1)) / 2)
    x = _wrap(1515870810 + _srdhm(half, -1010580540))
    for _ in range(3):
        om = _wrap((1 << 29) - _srdhm(half, x))
        p = _srdhm(x, om)
        p = INT32_MAX if p > (1 << 29) - 1 else INT32_MIN if p < -((1 << 29) - 1) else p << 2
        x = _wrap(x + p)
    return INT32_MAX if x > (1 << 30) - 1 else INT32_MIN if x < -((1 << 30) - 1) else x << 1


def test_srdhm_scalar_helper_agrees_with_python_rounding():
    assert _srdhm(1 << 30, 1) == 1  # 0.5 rounds up
    assert _srdhm(-(1 << 30), 1) == 0  # -0.5 rounds toward +inf
    assert _rdbp(-3, 1) == -2 and _rdbp(3, 1) == 2


# --- exp / reciprocal / logistic / tanh -----------------------------------------------------------

def test_exp_on_negative_values_accuracy_q5():
    raw = np.linspace(-(1 << 31) + 1, 0, 20001).astype(np.int64)
    got = g.exp_on_negative_values(raw, 5) / Q31
    want = np.exp(raw / float(1 << 26))
    assert np.max(np.abs(got - want)) < 5e-7
    assert int(g.exp_on_negative_values(np.array([0]), 5)[0]) == INT32_MAX


def test_exp_on_negative_values_monotone_and_clamps_below_minus_32():
    raw = np.arange(-(1 << 28), 0, 997, dtype=np.int64)  # Q4: [-16, 0)
    e = g.exp_on_negative_values(raw, 4)
    assert np.all(np.diff(e) >= 0)
    # with 6 integer bits inputs below -32 give exactly 0
    assert int(g.exp_on_negative_values(np.array([-(33 << 25)]), 6)[0]) == 0


def test_one_over_one_plus_x_accuracy_and_scalar_agreement():
    rng = np.random.default_rng(0)
    a = np.concatenate([[0, 1, INT32_MAX - 1, INT32_MAX, 1 << 30], rng.integers(0, INT32_MAX, 2000)])
    got = g.one_over_one_plus_x_for_x_in_0_1(a)
    assert np.max(np.abs(got / Q31 - 1.0 / (1.0 + a / Q31))) < 5e-9
    for v, r in zip(a[:300], got[:300]):
        assert int(r) == _scalar_one_over_one_plus_x(int(v))


@pytest.mark.parametrize("ib", [0, 3, 4, 5])
def test_logistic_and_tanh_accuracy(ib):
    raw = np.linspace(INT32_MIN + 1, INT32_MAX, 4001).astype(np.int64)
    x = raw / float(1 << (31 - ib))
    lg = g.logistic(raw, ib) / Q31
    th = g.tanh(raw, ib) / Q31
    assert np.max(np.abs(lg - 1 / (1 + np.exp(-x)))) < 3e-7
    assert np.max(np.abs(th - np.tanh(x))) < 3e-7
    assert int(g.logistic(np.array([0]), ib)[0]) == 1 << 30
    assert int(g.tanh(np.array([0]), ib)[0]) == 0


def test_logistic_is_antisymmetric_around_half():
    raw = np.arange(1, 1 << 27, 4099, dtype=np.int64)
    s = g.logistic(raw, 4) + g.logistic(-raw, 4)
    assert np.all(np.abs(s - INT32_MAX) <= 1)


def test_get_reciprocal():
    x = np.array([1 << 19, 3 << 19, 12345678, (1 << 31) - 1], dtype=np.int64)  # Q12
    r, over = g.get_reciprocal(x, 12)
    real = x / float(1 << 19)
    got = r / Q31 * np.exp2(-over.astype(float))
    assert np.allclose(got, 1 / real, rtol=1e-8)


def test_inv_sqrt_multiplier_exp():
    v = np.array([2, 3, 4, 17, 255 * 255, 1 << 20, (1 << 29) - 1, 1 << 29, INT32_MAX], dtype=np.int64)
    m, s = g.inv_sqrt_multiplier_exp(v, -1)
    approx = m / Q31 * np.exp2(s.astype(float))
    assert np.allclose(approx, 1 / np.sqrt(v), rtol=2e-6)
    m0, s0 = g.inv_sqrt_multiplier_exp(np.array([0, 1]), -1)
    assert m0.tolist() == [INT32_MAX, INT32_MAX] and s0.tolist() == [0, 0]


def test_sat_rounding_mul_pot_edges():
    x = np.array([(1 << 29) - 1, 1 << 29, -(1 << 29) + 1, -(1 << 29), -5], dtype=np.int64)
    assert g.sat_rounding_mul_pot(x, 2).tolist() == [((1 << 29) - 1) * 4, INT32_MAX, (-(1 << 29) + 1) * 4,
                                                     INT32_MIN, -20]
    assert g.sat_rounding_mul_pot(np.array([-5, 5, -6]), -1).tolist() == [-3, 3, -3]


def test_clz32():
    assert g.clz32(np.array([0, 1, 2, 3, (1 << 30), INT32_MAX])).tolist() == [32, 31, 30, 30, 1, 1]


# --- LUT builders ---------------------------------------------------------------------------------

def test_libm_float_functions():
    assert lut.expf(1.0) == np.float32(math.e)
    assert lut.tanhf(0.5) == np.float32(math.tanh(0.5))
    assert lut.sqrtf(2.0) == np.float32(math.sqrt(2.0))


def test_lut_int8_logistic_within_one_code_of_exact():
    t = lut.lut_int8(0.05, 3, 1 / 256, -128, lut.logistic_f32)
    v = np.arange(-128, 128)
    exact = np.clip(np.round(256 / (1 + np.exp(-0.05 * (v - 3)))) - 128, -128, 127)
    assert np.max(np.abs(t - exact)) <= 1
    assert t[0] == -128 or t[0] == -127


def test_lut_int16_interpolation_tracks_function():
    table = lut.lut_int16(1e-3, 0, 1e-3 * 1.2, 0, lut.gelu_f32)
    x = np.arange(-32768, 32768, 7)
    y = lut.lut_lookup_int16(x, table) * (1e-3 * 1.2)
    xf = x * 1e-3
    want = 0.5 * xf * (1 + np.vectorize(math.erf)(xf / math.sqrt(2)))
    want = np.clip(want, -32768 * 1e-3 * 1.2, 32767 * 1e-3 * 1.2)  # the output range saturates
    assert np.max(np.abs(y - want)) < 3 * 1e-3 * 1.2


def test_sigmoid_table_uint16_shape_and_accuracy():
    t = lut.sigmoid_table_uint16()
    i = np.arange(256)
    assert t.shape == (256,) and t[0] == 32768 and t[-1] == 65535
    assert np.all(np.diff(t) >= 0)
    assert np.max(np.abs(t[:255] - 65536 / (1 + np.exp(-i[:255] / 24)))) < 1.5  # biased by half the interpolation error
