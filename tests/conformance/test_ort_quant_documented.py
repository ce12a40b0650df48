"""Documented-only ONNX Runtime paths (not runnable on this VNNI x86 machine): checked against
independent hand / exact-rational derivations of the cited source formulas, plus the scheme wiring.

* onnxruntime-cpu-avx2: vpmaddubsw pairs (QgemmU8S8KernelAvx2.S) -> int16 saturation;
* onnxruntime-arm64: fixed-point "rndnu" requantization (MlasFloatToFixedPoint) and NEON QLinearAdd.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from refinterp.quant import mlas


def test_pair_saturation_by_hand():
    a = np.array([[255, 255, 255, 255, 1]], np.uint8)
    b = np.array([[127], [127], [-128], [-128], [5]], np.int8)
    # pairs: 255*127*2 = 64770 -> 32767; 255*-128*2 = -65280 -> -32768; 1*5 + 0 (padding) = 5
    assert mlas.u8s8_pair_sat16(a, b).tolist() == [[32767 - 32768 + 5]]
    small = np.array([[10, 20, 30]], np.uint8)
    w = np.array([[1], [-2], [3]], np.int8)
    assert mlas.u8s8_pair_sat16(small, w).tolist() == [[10 - 40 + 90]]  # no saturation: exact


def _rndnu_exact(acc: int, scale: np.float32) -> int:
    """floor(acc * scale + 1/2) with the exact rational value of the float32 scale."""
    v = Fraction(int(acc)) * Fraction(float(scale))
    return int((v + Fraction(1, 2)).__floor__())


@pytest.mark.parametrize("scale", [np.float32(0.0123), np.float32(2.0 ** -10), np.float32(0.75), np.float32(3e-5)])
def test_fixed_point_rndnu_is_one_half_up_rounding(scale):
    rng = np.random.default_rng(1)
    acc = np.concatenate([rng.integers(-(1 << 24), 1 << 24, 500), np.arange(-40, 41)]).astype(np.int64)
    if float(scale) == 2.0 ** -10:
        acc = np.concatenate([acc, np.array([512, -512, 1536, -1536])])  # exact ties: half up
    got = mlas.requant_fixed_rndnu(acc, scale, 0, -(1 << 40), 1 << 40)
    want = [_rndnu_exact(int(a), scale) for a in acc]
    assert got.tolist() == want


def test_neon_add_close_to_float_and_ties_away():
    a, b = np.meshgrid(np.arange(256), np.arange(256))
    y = mlas.qladd_neon(a, b, np.float32(0.05), 3, np.float32(0.07), 200, np.float32(0.09), 17, 0, 255)
    exact = np.clip(np.round((0.05 * (a - 3) + 0.07 * (b - 200)) / 0.09) + 17, 0, 255)
    assert np.max(np.abs(y - exact)) <= 1 and np.mean(y == exact) > 0.99
    # ratios 1/2 and 1/2 (exact multipliers): sums +-1 give +-0.5, rounded away from zero
    t = mlas.qladd_neon(np.array([1, 0]), np.array([0, -1]), np.float32(1), 0, np.float32(1), 0,
                        np.float32(2), 0, -128, 127)
    assert t.tolist() == [1, -1]


def test_avx2_scheme_saturates_where_vnni_is_exact(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import refinterp

    a = np.full((2, 8), 255, np.uint8)
    b = np.full((8, 3), 127, np.int8)
    inits = [numpy_helper.from_array(v, n) for n, v in (("as", np.float32(1.0)), ("az", np.uint8(0)), ("b", b),
                                                        ("bs", np.float32(1.0)), ("bz", np.int8(0)),
                                                        ("ys", np.float32(2048.0)), ("yz", np.uint8(0)))]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    g = helper.make_graph([node], "mm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "mm.onnx"))
    graph = refinterp.load(str(tmp_path / "mm.onnx"))
    exact = refinterp.Session(graph, "onnxruntime-cpu").run({"a": a})["y"]
    sat = refinterp.Session(graph, "onnxruntime-cpu-avx2").run({"a": a})["y"]
    assert exact.tolist() == [[127] * 3] * 2  # 8 * 255 * 127 / 2048 = 126.504 -> 127
    assert sat.tolist() == [[64] * 3] * 2  # 4 saturated pairs: 4 * 32767 / 2048 = 63.998 -> 64


@pytest.mark.parametrize("reduce_range", [False, True])
def test_avx2_conv_saturation_only_without_reduce_range(tmp_path, reduce_range):
    """255 * 64 * 2 < 32768: 7-bit weights (quantize_static reduce_range) never saturate a pair, so the
    AVX2 scheme then equals the exact one; full-range weights on large activations do saturate."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import refinterp

    rng = np.random.default_rng(3)
    x = rng.integers(200, 256, (1, 8, 6, 6)).astype(np.uint8)
    hi = 64 if reduce_range else 127
    w = np.where(rng.random((4, 8, 3, 3)) < 0.5, hi, -hi - (0 if reduce_range else 1)).astype(np.int8)
    inits = [numpy_helper.from_array(v, n) for n, v in (
        ("xs", np.float32(0.01)), ("xz", np.uint8(0)), ("w", w), ("ws", np.float32(0.01)), ("wz", np.int8(0)),
        ("ys", np.float32(20.0)), ("yz", np.uint8(128)))]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "c", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "c.onnx"))
    graph = refinterp.load(str(tmp_path / "c.onnx"))
    exact = refinterp.Session(graph, "onnxruntime-cpu").run({"x": x})["y"]
    sat = refinterp.Session(graph, "onnxruntime-cpu-avx2").run({"x": x})["y"]
    assert np.array_equal(exact, sat) == reduce_range
