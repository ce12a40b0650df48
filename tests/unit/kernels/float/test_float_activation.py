"""Activation kernels against onnx.reference / onnxruntime on single-node models."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_same, check_vs_onnx, onnx_ref, run_kernel

RNG = np.random.default_rng(99)


def _f(shape, dtype=np.float32, lo=-6.0, hi=6.0):
    x = RNG.uniform(lo, hi, shape).astype(dtype)
    return x


# Inputs with the edge points of piecewise functions and large magnitudes.
EDGE = np.array([-100.0, -20.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 20.0, 100.0], np.float32)

CASES = [
    ("Relu", {}), ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}),
    ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("Elu", {}), ("Elu", {"alpha": 0.5}),
    ("Selu", {}), ("Selu", {"alpha": 1.5, "gamma": 2.0}), ("Softplus", {}), ("Softsign", {}),
    ("Celu", {}), ("Celu", {"alpha": 2.0}), ("ThresholdedRelu", {}), ("ThresholdedRelu", {"alpha": 0.5}),
    ("Mish", {}), ("Shrink", {}), ("Shrink", {"bias": 0.5, "lambd": 1.0}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op,attrs", CASES, ids=lambda v: v if isinstance(v, str) else
                         "-".join(f"{k}{w}" for k, w in v.items()) or "default")
def test_activation(op, attrs, dtype):
    x = np.concatenate([EDGE.astype(dtype), _f((31,), dtype)])
    h = dtype == np.float16
    check_vs_onnx(op, [x], attrs, rtol=3e-3 if h else 1e-4, atol=3e-3 if h else 1e-5)


def test_gelu_against_onnxruntime():
    x = np.concatenate([EDGE, _f((50,))])
    for approx in ("none", "tanh"):
        check_vs_onnx("Gelu", [x], {"approximate": approx}, oracle="ort", opset=20)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_relu_int(dtype):
    check_vs_onnx("Relu", [RNG.integers(-50, 50, (4, 5)).astype(dtype)])


def test_relu6_and_n1_to_1_match_clip():
    x = np.concatenate([EDGE, _f((20,))])
    lo, hi = np.array(0, np.float32), np.array(6, np.float32)
    assert_same(run_kernel("Relu6", [x])[0], onnx_ref("Clip", [x, lo, hi])[0])
    lo, hi = np.array(-1, np.float32), np.array(1, np.float32)
    assert_same(run_kernel("ReluN1To1", [x])[0], onnx_ref("Clip", [x, lo, hi])[0])


@pytest.mark.parametrize("slope_shape", [(1,), (4,), (3, 1, 1), (2, 3, 5, 4), (1, 1, 4)])
def test_prelu_unidirectional(slope_shape):
    x = _f((2, 3, 5, 4))
    slope = RNG.uniform(0, 0.5, slope_shape).astype(np.float32)
    check_vs_onnx("PRelu", [x, slope])
    check_vs_onnx("PRelu", [x, slope], const=False)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("bounds", ["both", "min", "max", "none", "inverted"])
def test_clip(dtype, bounds):
    lo_v, hi_v = {"both": (-3, 4), "min": (-3, None), "max": (None, 4), "none": (None, None),
                  "inverted": (5, 2)}[bounds]
    if dtype == np.uint8:
        lo_v = None if lo_v is None else abs(lo_v)
    x = (RNG.integers(0, 20, (3, 7)) if dtype == np.uint8 else RNG.integers(-10, 10, (3, 7))).astype(dtype)
    if dtype == np.float32:
        x = x + RNG.uniform(-0.5, 0.5, x.shape).astype(np.float32)
    lo = None if lo_v is None else np.array(lo_v, dtype)
    hi = None if hi_v is None else np.array(hi_v, dtype)
    ins = [x, lo, hi]
    while ins and ins[-1] is None:
        ins.pop()
    check_vs_onnx("Clip", ins)


@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((3, 7), 0), ((2, 3, 4, 5), 1), ((2, 3, 4), 2), ((6,), 0)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(op, shape, axis):
    x = _f(shape, lo=-20, hi=20)
    check_vs_onnx(op, [x], {"axis": axis})
    check_vs_onnx(op, [x.astype(np.float64)], {"axis": axis})
    # float16: onnx.reference evaluates log(softmax) in float16 (underflows to -inf); compare with
    # the float32 reference rounded to float16 instead.
    h = x.astype(np.float16)
    want = onnx_ref(op, [h.astype(np.float32)], {"axis": axis})[0].astype(np.float16)
    assert_same(run_kernel(op, [h], {"axis": axis})[0], want, rtol=3e-3, atol=3e-3)


def test_softmax_default_axis_is_last():
    x = _f((2, 3, 4))
    check_vs_onnx("Softmax", [x], {})


@pytest.mark.parametrize("beta", [1.0, 0.5, 2.5])
def test_softmax_tflite_beta_scales_logits(beta):
    x = _f((2, 10), lo=-5, hi=5)
    want = onnx_ref("Softmax", [(x * np.float32(beta)).astype(np.float32)], {"axis": -1})[0]
    assert_same(run_kernel("Softmax", [x], {"beta": beta})[0], want)


def test_softmax_extreme_logits_are_finite():
    x = np.array([[1000.0, 0.0, -1000.0], [-np.inf, 0.0, 1.0]], np.float32)
    check_vs_onnx("Softmax", [x], {"axis": -1})
    check_vs_onnx("LogSoftmax", [x[:1]], {"axis": -1}, oracle="ort")  # reference: log(0) = -inf
