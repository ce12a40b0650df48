"""Reduce* and ArgMax/ArgMin kernels against onnx.reference (opset 18+ form, axes as an input)."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_same, check_vs_onnx, onnx_ref, run_kernel

RNG = np.random.default_rng(7)

REDUCE = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
AXES = [None, [0], [-1], [1, 2], [0, 2], [2, 0, 1]]


def _axes(a):
    return None if a is None else np.array(a, np.int64)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_float(op, axes, keepdims):
    lo = 0.1 if op == "ReduceLogSum" else -2.0
    x = RNG.uniform(lo, 2.0, (3, 4, 5)).astype(np.float32)
    ins = [x] if axes is None else [x, _axes(axes)]
    check_vs_onnx(op, ins, {"keepdims": keepdims})
    if axes is not None:
        check_vs_onnx(op, ins, {"keepdims": keepdims}, const=False)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"])
def test_reduce_other_floats(op, dtype):
    x = RNG.uniform(-2, 2, (4, 6)).astype(dtype)
    h = dtype == np.float16
    check_vs_onnx(op, [x, _axes([1])], {"keepdims": 0}, rtol=3e-3 if h else 1e-4, atol=3e-3 if h else 1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"])
def test_reduce_int(op, dtype):
    x = RNG.integers(0 if dtype == np.uint8 else -5, 5, (3, 4)).astype(dtype)
    if op != "ReduceSumSquare":
        check_vs_onnx(op, [x, _axes([1])], {"keepdims": 1})
        return
    # onnx.reference widens integer ReduceSumSquare to (u)int64; ONNX (and ONNX Runtime) keep T.
    want = onnx_ref(op, [x, _axes([1])], {"keepdims": 1})[0]
    got = run_kernel(op, [x, _axes([1])], {"keepdims": 1})[0]
    assert got.dtype == x.dtype
    assert_same(got, want.astype(x.dtype))


def test_reduce_mean_int_matches_reference():
    x = np.array([[1, 2, 4], [-3, -4, 9]], np.int32)
    check_vs_onnx("ReduceMean", [x, _axes([1])], {"keepdims": 0})


@pytest.mark.parametrize("op", REDUCE)
def test_empty_axes_noop(op):
    x = RNG.uniform(0.1, 2, (2, 3)).astype(np.float32)
    check_vs_onnx(op, [x, np.array([], np.int64)], {"noop_with_empty_axes": 1})
    check_vs_onnx(op, [x, np.array([], np.int64)], {"noop_with_empty_axes": 0, "keepdims": 0})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                                "ReduceL2"])
def test_reduce_empty_set_identities(op):
    x = np.zeros((2, 0, 3), np.float32)
    check_vs_onnx(op, [x, _axes([1])], {"keepdims": 1})


def test_reduce_pre18_attribute_axes():
    x = RNG.uniform(-2, 2, (3, 4)).astype(np.float32)
    want = onnx_ref("ReduceMean", [x], {"axes": [1], "keepdims": 0}, opset=13)[0]
    assert_same(run_kernel("ReduceMean", [x], {"axes": [1], "keepdims": 0})[0], want)


@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg(op, axis, keepdims, last):
    # Few distinct values so ties (first vs last index) are exercised.
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    want = onnx_ref(op, [x], attrs)[0]
    got = run_kernel(op, [x], attrs, out_dtype="int64")[0]
    assert_same(got, want)
    got_int = run_kernel(op, [x.astype(np.int8)], attrs, variant="int", out_dtype="int64")[0]
    assert_same(got_int, want)


def test_arg_default_attrs():
    x = RNG.uniform(-1, 1, (4, 3)).astype(np.float32)
    check_vs_onnx("ArgMax", [x])
    check_vs_onnx("ArgMin", [x])


def test_tflite_argmax_axis_input_and_int32_output():
    x = RNG.uniform(-1, 1, (2, 3, 5)).astype(np.float32)
    got = run_kernel("ArgMax", [x, np.array([2], np.int32)], {"keepdims": 0}, out_dtype="int32")[0]
    want = onnx_ref("ArgMax", [x], {"axis": 2, "keepdims": 0})[0].astype(np.int32)
    assert_same(got, want)
