"""refinterp/quant/htp_ops.py and passes/qdq_htp.py without the emulator: the rules' arithmetic on
hand-worked values (the emulator comparisons are in tests/conformance/test_qnn_htp_*.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from refinterp.quant import htp, htp_ops, htp_pool

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.passes import fuse_qdq_htp  # noqa: E402


def test_v68_params_are_an_11_bit_multiplier_in_one_sixteenth_to_one_eighth():
    for M in (3.5, 1.0, 0.37, 0.0123, 0.00031, 2.0 ** -10):
        k, m = htp_ops.conv_requant_params_v68(M)
        assert 1 / 16 <= M * 2.0 ** k <= 1 / 8
        assert (m * 2.0 ** (11 - math.frexp(m)[1])).is_integer()  # 11 significant bits
        assert abs(m / (M * 2.0 ** k) - 1) <= 2.0 ** -11
    # 0.15: M * 2^k * 2^15 = 2457.6 -> the 11-bit grid (even units of 2^-15) -> 2458
    assert htp_ops.conv_requant_params_v68(0.15)[1] * 2 ** 15 == 2458


def test_v68_requant_folds_the_zero_point_before_the_shift():
    # M = 1/2**10 (k = 6): Z = 128 / M = 131072, a = (acc + Z) >> 6, y = floor(a * m + 1/2)
    M = 2.0 ** -10
    acc = np.array([-64, -1, 0, 63, 64, 511, 512])
    y = htp_ops.conv_requant_v68(acc, M, 128)
    want = np.floor(((acc + 131072) >> 6) * (M * 64) + 0.5)
    assert np.array_equal(y, want)


def test_folded_zero_point_rounds_the_float32_quotient():
    # 194 / 0.0008849254809319973 is 219227.4999... in float64 and exactly 219227.5 in float32
    M = 0.0008849254809319973
    assert math.floor(194 / M + 0.5) == 219227
    assert int(htp_ops.folded_zero_point(194, M)) == 219228


def test_per_channel_multipliers_go_through_the_largest_scale():
    ws = np.array([0.002630754, 0.004008978, 0.001], np.float32)
    xs, ys = 0.0180916, 0.0658
    got = htp_ops.per_channel_multipliers(xs, ws, ys)
    f32 = np.float32
    ms = f32(f32(f32(xs) * ws.max()) / f32(ys))
    assert got[1] == float(ms)
    assert got[0] == float(f32(ms * f32(ws[0] / ws.max())))
    direct = (f32(xs) * ws / f32(ys)).astype(f32)
    assert np.allclose(got, direct, rtol=1e-6)


def test_add_params_common_scale_and_offset_in_256ths():
    p, i1, i2, k = htp_ops.add_params(0.19476, 0.24063, 24, 67, 40)
    assert p == 15 and (0.19476 + 0.24063) * 2 ** p < 2 ** 14 <= (0.19476 + 0.24063) * 2 ** (p + 1)
    assert (i1, i2) == (round(0.19476 * 2 ** 15), round(0.24063 * 2 ** 15)) and k % 256 == 0
    q1, q2 = np.array([0, 24, 255]), np.array([0, 67, 255])
    y = htp_ops.add_u8(q1, q2, (p, i1, i2, k))
    assert y[1] == 40 and 0 <= y.min() and y.max() <= 255  # both inputs at their zero points -> zp_y


def test_sub_params_scale_of_the_larger_multiplier_offset_ties_down():
    # measured on the emulator: m 0.3179 / 1.6338, zero points 194 / 99 -> 139: p = 14 - e(1.63) = 13
    # (Add's e(m1 + m2) gives the same p here); the exact offset 1962624 is 7666.5 * 256: rounded down
    p, i1, i2, k = htp_ops.sub_params(0.3179, 1.6338, 194, 99, 139)
    assert (p, i1, i2) == (13, 2604, 13384)
    assert 139 * 2 ** 13 + 2 ** 12 - 194 * i1 + 99 * i2 == 1962624 and k == 7666 * 256
    # both multipliers below 1/4: p stays 15 (Add's rule would give 16)
    assert htp_ops.sub_params(0.103, 0.228, 122, 42, 56)[0] == 15
    with pytest.raises(ValueError, match="24 bits"):  # measured: every output 0
        htp_ops.sub_params(0.1196, 0.1569, 45, 131, 247)
    with pytest.raises(ValueError, match="outside the measured range"):
        htp_ops.sub_params(0.5, 9.0, 0, 0, 0)


def test_average_and_dw_stride2_are_15_bit():
    p, i = htp_pool.average_params(0.0386)
    assert 2 ** 14 <= i < 2 ** 15 and p == 15 - math.frexp(0.0386)[1]
    assert np.array_equal(htp_pool.average(np.array([0, 100, -100]), (p, i), 3, 0, 255),
                          np.array([3, 3 + round(100 * i / 2 ** p), 0]))  # 3 - 4 clamps at 0
    p2, i2 = htp_ops.dw_stride2_params(0.01)
    assert 2 ** 14 <= i2 < 2 ** 15
    with pytest.raises(ValueError):
        htp_ops.dw_stride2_params(0.6)


def test_pair_average_rounds_twice_below_one_half():
    """2x2 stride-2 AveragePool (htp_pool.pair_average): below A = 1/2 a second rounding by min(7, p - 12)
    bits lifts fractions from 1/2 - 2^(11-p) up (2 * 0.245 = 0.49 -> 1), above it one rounding (1.49 -> 1)."""
    assert htp_pool.pair_average_params(0.7)[2] == 0
    assert [htp_pool.pair_average_params(a)[2] for a in (0.3, 0.245, 0.1, 0.05, 0.02, 0.005)] == [4, 5, 6, 7, 7, 7]
    assert htp_pool.pair_average(np.array([2, -2]), htp_pool.pair_average_params(0.245), 10, 0, 255).tolist() == [11, 10]
    assert htp_pool.pair_average(np.array([2]), htp_pool.pair_average_params(0.24), 10, 0, 255).tolist() == [10]
    assert htp_pool.pair_average(np.array([2]), htp_pool.pair_average_params(0.745), 10, 0, 255).tolist() == [11]
    with pytest.raises(ValueError, match="below 2"):
        htp_pool.pair_average_params(2.0 ** -9)


def _model(tmp_path, scale_out):
    inits = [numpy_helper.from_array(np.asarray(v, dt), n) for v, n, dt in
             [(0.02, "s", np.float32), (128, "z", np.uint8), (scale_out, "s2", np.float32), (128, "z2", np.uint8),
              (np.array([1, -1], np.int64), "shape", np.int64)]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("MaxPool", ["d"], ["mp"], kernel_shape=[2, 2]),
             helper.make_node("QuantizeLinear", ["mp", "s", "z"], ["mq"]),
             helper.make_node("DequantizeLinear", ["mq", "s", "z"], ["md"]),
             helper.make_node("Reshape", ["md", "shape"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s2", "z2"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s2", "z2"], ["y"])]
    return load_graph(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])], inits)


def load_graph(tmp_path, nodes, inputs, inits):
    """An opset-21 model of ``nodes`` with graph output "y", written to tmp_path and loaded."""
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return refinterp.load(str(p))


def test_fuse_qdq_htp_runs_data_movement_on_codes(tmp_path):
    g = fuse_qdq_htp(_model(tmp_path, 0.02))
    ops = [(n.op, n.source_op) for n in g.nodes]
    assert ("Reshape", "QDQ:Reshape") in ops and ("MaxPool", "QDQ:MaxPool") in ops  # units on codes
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    out = refinterp.Session(_model(tmp_path, 0.02), "qnn-htp-v68").run({"x": x}, capture="all")
    q = out["q"].astype(np.int64).reshape(1, 2, 4, 4)
    assert out["rq"].dtype == np.uint8 and out["rq"].shape == (1, 18)
    want = np.max([q[:, :, i:i + 3, j:j + 3] for i in (0, 1) for j in (0, 1)], axis=0).reshape(1, -1)
    assert np.array_equal(out["rq"].astype(np.int64), want)


def test_requantizing_reshape_after_a_maxpool_is_refused(tmp_path):
    """The copy table is the HTP's requantization only after the producers measured (kernels/qnn_htp/shape.py
    REQUANT_MEASURED); after a MaxPool the HTP folds it into the producer: refused, naming the Reshape."""
    from refinterp.errors import UnsupportedOpError

    with pytest.raises(UnsupportedOpError, match="Reshape.*made by MaxPool"):
        refinterp.Session(_model(tmp_path, 0.03), "qnn-htp-v68")


def test_requantizing_reshape_of_a_graph_input_reads_the_clamped_float_input(tmp_path):
    """passes/qdq_htp.py ``_input_folds``: the Reshape reads x with the float32 range of x's QuantizeLinear,
    and its codes are quantize_float(clamp(x)) on its own parameters, not a copy of x's codes."""
    inits = [numpy_helper.from_array(np.asarray(v, dt), n) for v, n, dt in
             [(0.02, "s", np.float32), (100, "z", np.uint8), (0.021, "s2", np.float32), (110, "z2", np.uint8),
              (np.array([1, -1], np.int64), "shape", np.int64)]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("Reshape", ["d", "shape"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s2", "z2"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "s2", "z2"], ["y"])]
    g = load_graph(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])], inits)
    (r,) = [n for n in fuse_qdq_htp(g).nodes if n.op == "Reshape"]
    lo, hi = np.float32(-100) * np.float32(0.02), np.float32(155) * np.float32(0.02)
    assert r.inputs[0] == "x" and r.attrs["htp_input_clamp"] == [float(lo), float(hi)]
    x = np.linspace(-2.5, 3.5, 256, dtype=np.float32).reshape(1, 256)  # off the grid; beyond both ends of x's range
    out = refinterp.Session(g, "qnn-htp-v73").run({"x": x}, capture="all")
    want = htp.quantize_float(np.clip(x, lo, hi), 0.021, 110, 0, 255)
    assert np.array_equal(out["rq"].astype(np.int64), want)
    copy = htp.quantize_float((out["q"].astype(np.int64) - 100).astype(np.float32) * np.float32(0.02), 0.021, 110,
                              0, 255)
    assert not np.array_equal(copy, want)  # the input here tells the fold from a copy of x's codes ...
    assert not np.array_equal(htp.quantize_float(x, 0.021, 110, 0, 255), want)  # ... and from no clamp
