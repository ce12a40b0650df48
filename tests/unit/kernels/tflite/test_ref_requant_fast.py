"""The 32-bit-lane fused requantizers (``_fused_srdhm32``, ``_fused_f32w``) equal the NumPy
``Requant(accumulate_overflow(acc + bias))`` bit for bit, and are the ones chosen for 8/16-bit
outputs.

Beyond tests/unit/kernels/tflite/test_ref_fast_vs_numpy.py this covers: effective scales above 1 (left shifts), the
largest multipliers, every right shift 0..31, accumulators at the int32 edges and outside int32
(wrapped), float32 accumulators (what the float32 GEMM of fast_conv hands over), and exact ties
of both SRDHM and the rounding divide in both signs.
"""
from __future__ import annotations

import numpy as np
import pytest

from refinterp.kernels.tflite.ref.requant_fast import bias_array, fused_requant, fused_runner, overflow_mode, rq_arrays
from refinterp.quant.params import Requant, accumulate_overflow
from refinterp.quant.requant import Rounding

RNG = np.random.default_rng(32)
C = 40


def _eff(kind: str) -> np.ndarray:
    if kind == "small":
        e = RNG.uniform(1e-7, 0.999, C)
    elif kind == "large":
        e = RNG.uniform(1.0, 60.0, C)  # left shifts 1..6
    else:
        e = np.exp2(-(np.arange(C) % 33)).astype(np.float64)  # 1, 1/2, ... 2^-32: every right shift
    e[0] = np.nextafter(1.0, 0.0)  # M rounds up to 2^31 and is renormalised
    e[1] = 0.5 * (1 + 2.0 ** -31)
    return e


def _acc(dtype) -> np.ndarray:
    a = RNG.integers(-(1 << 23), 1 << 23, size=(61, C)).astype(np.int64)
    a[0] = [k * (1 << 9) + (1 << 8) for k in range(-C // 2, C // 2)]  # ties at shift 9
    a[1] = [-(k * (1 << 9) + (1 << 8)) for k in range(-C // 2, C // 2)]
    a[2] = 1 << np.arange(C) % 24
    a[3] = -a[2]
    a[4, :4] = [(1 << 24) - 1, -(1 << 24) + 1, 0, -1]
    if dtype != np.float32:
        a[5, :6] = [(1 << 31) - 1, -(1 << 31), (1 << 33) + 5, -(1 << 32) - 7, 1 << 31, -(1 << 31) - 1]
    return a


@pytest.mark.parametrize("rounding", ["double", "upward", "float32_half_even"])
@pytest.mark.parametrize("eff_kind", ["small", "large", "shifts"])
@pytest.mark.parametrize("overflow", [None, "wrap"])
@pytest.mark.parametrize("dtype,zo", [("int8", -7), ("int8", 127), ("uint8", 0), ("int16", 0), ("int16", -300)])
@pytest.mark.parametrize("acc_dtype", [np.int64, np.float64, np.float32])
def test_fused32_equals_numpy(rounding, eff_kind, overflow, dtype, zo, acc_dtype):
    info = np.iinfo(np.dtype(dtype))
    rq = Requant.build(_eff(eff_kind), Rounding(rounding), zo, int(info.min), int(info.max), dtype)
    acc = _acc(acc_dtype)
    bias = RNG.integers(-(1 << 20), 1 << 20, size=C).astype(np.int64)
    bias[:2] = [(1 << 31) - 1, -(1 << 31)]
    settings = {} if overflow is None else {"accumulator": {"bits": 32, "overflow": overflow}}
    acc32 = overflow is not None
    exp_acc = acc + bias
    if acc32:
        exp_acc = accumulate_overflow(exp_acc, settings)
    ref = rq(exp_acc)
    got = fused_requant(rq, acc.astype(acc_dtype), bias, acc32, settings)
    assert got.dtype == ref.dtype
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("rounding,overflow,name", [
    ("double", None, "_fused_srdhm32"), ("upward", "wrap", "_fused_srdhm32"),
    ("float32_half_even", "wrap", "_fused_f32w"), ("float32_half_even", None, "_fused_f32")])
def test_runner_choice(rounding, overflow, name):
    rq = Requant.build(_eff("small"), Rounding(rounding), 3, -128, 127, "int8")
    settings = {} if overflow is None else {"accumulator": {"bits": 32, "overflow": overflow}}
    f = fused_runner(rq_arrays(rq, C), overflow_mode(overflow is not None, settings), rq)
    assert name in f.__code__.co_names
    acc = _acc(np.float32).astype(np.float32)
    out = np.empty(acc.shape, np.int8)
    f(acc, bias_array(None, C), out)
    exp = accumulate_overflow(acc.astype(np.int64), settings) if overflow else acc.astype(np.int64)
    assert np.array_equal(out, rq(exp))


def test_int32_outputs_keep_the_64bit_loop():
    rq = Requant.build(_eff("small"), Rounding("double"), 0, -(1 << 31), (1 << 31) - 1, "int32")
    f = fused_runner(rq_arrays(rq, C), 1, rq)
    assert "_fused_srdhm" in f.__code__.co_names and "_fused_srdhm32" not in f.__code__.co_names
