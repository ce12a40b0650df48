"""Element-wise kernels against onnx.reference on single-node models."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_same, check_vs_onnx, onnx_ref, run_kernel

RNG = np.random.default_rng(1234)


def _f(shape, dtype=np.float32, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _i(shape, dtype=np.int32, lo=-20, hi=20):
    return RNG.integers(lo, hi, shape).astype(dtype)


BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"]
SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2)), ((1, 3, 1, 2), (2, 1, 1, 1))]


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", BINARY)
def test_binary_float(op, dtype, shapes):
    a, b = _f(shapes[0], dtype), _f(shapes[1], dtype, 0.5, 3.0)
    tol = {"rtol": 1e-3 if dtype == np.float16 else 1e-4}
    if op == "Mean":
        # onnx.reference's Mean needs the first input at the full broadcast shape, and ONNX
        # Runtime has no float64 Mean: compare against the reference on a pre-broadcast copy.
        full = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)).copy()
        assert_same(run_kernel(op, [a, b])[0], onnx_ref(op, [full, b])[0], **tol)
        return
    check_vs_onnx(op, [a, b], **tol)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"])
def test_binary_int(op, dtype):
    lo = 0 if dtype == np.uint8 else -20
    a = _i((3, 4), dtype, lo, 20)
    b = _i((4,), dtype, 1, 7)
    if dtype != np.uint8:
        b = b * np.where(RNG.random(4) < 0.5, -1, 1).astype(dtype)
    check_vs_onnx(op, [a, b], const=False)


def test_div_int_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -5], np.int32)
    got = run_kernel("Div", [a, b])[0]
    assert_same(got, onnx_ref("Div", [a, b])[0])
    np.testing.assert_array_equal(got, [3, -3, -3, 3, 0, -1])


def test_variadic_three_inputs():
    xs = [_f((2, 3)), _f((3,)), _f((1, 3))]
    for op in ("Max", "Min", "Sum", "Mean"):
        check_vs_onnx(op, xs, const=False, oracle="ort")


def test_single_input_variadic():
    x = _f((2, 3))
    for op in ("Max", "Sum", "Mean"):
        check_vs_onnx(op, [x])


@pytest.mark.parametrize("case", [
    (_f((2, 5), lo=0.1, hi=3), _f((2, 5), lo=-2, hi=2)),
    (_f((2, 5), lo=-3, hi=3), np.array(2.0, np.float32)),
    (_f((2, 5), lo=-3, hi=3), np.array(3, np.int64)),
    (_i((2, 5), np.int32, -4, 4), np.array(3, np.int32)),
    (_i((2, 5), np.int64, -4, 4), np.array([2.0], np.float32)),
], ids=["float", "float-scalar", "float-intexp", "int", "int-floatexp"])
def test_pow(case):
    check_vs_onnx("Pow", list(case))


UNARY_POS = ["Sqrt", "Log", "Reciprocal"]
UNARY = ["Abs", "Neg", "Exp", "Erf", "Floor", "Ceil", "Sign", "Sin", "Cos", "Tan", "Atan", "Sinh",
         "Cosh", "Asinh"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op", UNARY + UNARY_POS)
def test_unary(op, dtype):
    x = _f((3, 7), dtype, 0.05, 4.0) if op in UNARY_POS else _f((3, 7), dtype)
    check_vs_onnx(op, [x], rtol=2e-3 if dtype == np.float16 else 1e-4, atol=1e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
def test_unary_int(op, dtype):
    check_vs_onnx(op, [_i((4, 5), dtype)])


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 2.4, -2.6, 1e8 + 0.5], np.float32)
    check_vs_onnx("Round", [x])
    np.testing.assert_array_equal(run_kernel("Round", [x[:6]])[0], [0, 2, 2, -0, -2, -2])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-40], np.float32)
    for op in ("Sqrt", "Log", "Exp", "Reciprocal", "Abs", "Neg", "Sign", "Erf"):
        check_vs_onnx(op, [x])


def test_div_by_zero_float():
    a = np.array([1.0, -1.0, 0.0], np.float32)
    b = np.zeros(3, np.float32)
    check_vs_onnx("Div", [a, b])


def test_max_min_nan_propagates():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    b = np.array([np.nan, 2.0, 1.0], np.float32)
    check_vs_onnx("Max", [a, b])
    check_vs_onnx("Min", [a, b])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8])
def test_compare(op, dtype):
    a = _i((3, 4), np.int32, 0, 4).astype(dtype)
    b = _i((4,), np.int32, 0, 4).astype(dtype)
    check_vs_onnx(op, [a, b], const=False)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    a = RNG.random((2, 3, 4)) < 0.5
    b = RNG.random((3, 1)) < 0.5
    check_vs_onnx(op, [a, b])


def test_not():
    check_vs_onnx("Not", [RNG.random((3, 4)) < 0.5])


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64])
def test_where(dtype):
    c = RNG.random((2, 1, 4)) < 0.5
    x = _i((3, 4), np.int32).astype(dtype)
    y = _i((2, 3, 1), np.int32).astype(dtype)
    check_vs_onnx("Where", [c, x, y], const=False)
    got = run_kernel("Where", [c, x, y], variant="int", const=False)[0]
    assert_same(got, onnx_ref("Where", [c, x, y])[0])


@pytest.mark.parametrize("fmod,dtype", [(0, np.int32), (1, np.int32), (1, np.float32), (0, np.float32),
                                        (0, np.float64)])
def test_mod(fmod, dtype):
    a = _i((3, 4), np.int32, -9, 9).astype(dtype)
    b = np.array([3, -4, 5, 2], dtype)
    check_vs_onnx("Mod", [a, b], {"fmod": fmod})


def test_tflite_extras_match_compositions():
    a, b = _f((2, 3)), _f((3,))
    sub = onnx_ref("Sub", [a, b])[0]
    assert_same(run_kernel("SquaredDifference", [a, b])[0], onnx_ref("Mul", [sub, sub])[0])
    x = _f((4, 5), lo=0.1, hi=5)
    sq = onnx_ref("Sqrt", [x])[0]
    assert_same(run_kernel("Rsqrt", [x])[0], onnx_ref("Reciprocal", [sq])[0])
    assert_same(run_kernel("Square", [a])[0], onnx_ref("Mul", [a, a])[0])


def test_bitshift():
    a = np.array([1, 2, 255, 16], np.uint8)
    b = np.array([1, 3, 1, 4], np.uint8)
    for d in ("LEFT", "RIGHT"):
        check_vs_onnx("BitShift", [a, b], {"direction": d})


def test_isnan_isinf():
    x = np.array([0.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
    check_vs_onnx("IsNaN", [x])
    for pos, neg in ((1, 1), (1, 0), (0, 1)):
        check_vs_onnx("IsInf", [x], {"detect_positive": pos, "detect_negative": neg})
