"""Documented (not runtime-verified) schemes: vitis-dpu, glow-cpu, glow-interpreter, tvm-qnn,
cmsis-nn, fbgemm-avx2.  Each loads, says what it follows, and runs a small model; the arithmetic
of refinterp/quant/{vitis,glow,tvmqnn}.py is checked on examples worked by hand from the cited
sources (docs/arithmetic/README.md)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refinterp
from refinterp.quant import glow, tvmqnn, vitis
from refinterp.quant.fixedpoint import srdhm
from refinterp.quant.requant import requantize
from refinterp.schemes.loader import load_scheme

DOCUMENTED = ["vitis-dpu", "glow-cpu", "glow-interpreter", "tvm-qnn", "cmsis-nn", "fbgemm-avx2"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_scheme_is_documented_and_cites_sources(name):
    s = load_scheme(name)
    raw = s.data
    assert raw.get("status") == "documented"
    assert "not verified against a runtime" in raw.get("notes", "").lower()
    assert raw.get("source") and raw.get("backend_version")


def _pow2_int8_model(path: Path) -> None:
    """int8 QDQ, power-of-two scales, zero points 0: Conv(+bias) -> Add(residual) -> LeakyRelu ->
    AveragePool 2x2 -> GlobalAveragePool."""
    rng = np.random.default_rng(3)
    inits, nodes = [], []

    def c(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name

    def qdq(x, s, name):
        nodes.append(helper.make_node("QuantizeLinear", [x, c(name + "_s", np.float32(s)), c(name + "_z", np.int8(0))],
                                      [name + "_q"], name=name + "_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_dq"],
                                      name=name + "_DQ"))
        return name + "_dq"

    x = qdq("input", 2.0 ** -5, "in")
    w = c("w", rng.integers(-90, 90, (4, 4, 3, 3)).astype(np.int8))
    nodes.append(helper.make_node("DequantizeLinear", [w, c("w_s", np.float32(2.0 ** -7)), c("w_z", np.int8(0))],
                                  ["w_dq"], name="w_DQ"))
    b = c("b", rng.integers(-2000, 2000, 4).astype(np.int32))
    nodes.append(helper.make_node("DequantizeLinear", [b, c("b_s", np.float32(2.0 ** -12))], ["b_dq"], name="b_DQ"))
    nodes.append(helper.make_node("Conv", [x, "w_dq", "b_dq"], ["conv"], name="conv", pads=[1, 1, 1, 1]))
    h = qdq("conv", 2.0 ** -4, "conv")
    nodes.append(helper.make_node("Add", [h, x], ["add"], name="add"))
    h = qdq("add", 2.0 ** -4, "add")
    nodes.append(helper.make_node("LeakyRelu", [h], ["lrelu"], name="lrelu", alpha=0.1015625))
    h = qdq("lrelu", 2.0 ** -4, "lrelu")
    nodes.append(helper.make_node("AveragePool", [h], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    h = qdq("pool", 2.0 ** -5, "pool")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"], name="gap"))
    h = qdq("gap", 2.0 ** -5, "gap")
    nodes.append(helper.make_node("Identity", [h], ["output"], name="out"))
    g = helper.make_graph(nodes, "pow2", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 1, 1])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


@pytest.mark.parametrize("name", ["vitis-dpu", "glow-cpu", "glow-interpreter", "tvm-qnn", "fbgemm-avx2"])
def test_documented_scheme_runs_small_onnx_model(tmp_path, name):
    _pow2_int8_model(tmp_path / "m.onnx")
    graph = refinterp.load(str(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)
    got = refinterp.Session(graph, scheme=name).run({"input": x}, capture="all")
    ref = refinterp.Session(graph, scheme="float32").run({"input": x})
    assert got["output"].shape == (1, 4, 1, 1)
    # with power-of-two scales every scheme lands within a few LSB (2^-5) of float32
    assert np.max(np.abs(got["output"] - ref["output"])) <= 4 * 2.0 ** -5
    for t in ("conv_q", "add_q", "lrelu_q", "pool_q", "gap_q"):
        assert got[t].dtype == np.int8
    if name != "fbgemm-avx2":
        # the scheme's own Add ran: half-up / half-away ties of x*2^-1 differ from ORT's RNE
        ort = refinterp.Session(graph, scheme="onnxruntime-cpu").run({"input": x}, capture="all")
        assert not np.array_equal(got["add_q"], ort["add_q"])


def test_vitis_dpu_conv_matches_hand_formula(tmp_path):
    """The DPU conv output equals sat8(floor(acc / 2^shift_cut + 1/2)) computed here by hand."""
    _pow2_int8_model(tmp_path / "m.onnx")
    graph = refinterp.load(str(tmp_path / "m.onnx"))
    x = np.random.default_rng(1).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)
    got = refinterp.Session(graph, scheme="vitis-dpu").run({"input": x}, capture="all")
    xq = got["in_q"].astype(np.int64)
    assert np.array_equal(xq, np.clip(np.floor(x.astype(np.float64) * 32 + 0.5), -128, 127))
    w = np.random.default_rng(3).integers(-90, 90, (4, 4, 3, 3))
    b = np.random.default_rng(3)
    b.integers(-90, 90, (4, 4, 3, 3))
    bias = b.integers(-2000, 2000, 4)
    xp = np.pad(xq[0], ((0, 0), (1, 1), (1, 1)))
    acc = np.zeros((4, 8, 8), np.int64)
    for o in range(4):
        for i in range(4):
            for dy in range(3):
                for dx in range(3):
                    acc[o] += w[o, i, dy, dx] * xp[i, dy:dy + 8, dx:dx + 8]
        acc[o] += bias[o]
    # fp_in 5, fp_w 7, fp_out 4: shift_cut = 8; half up
    expect = np.clip((acc + 128) >> 8, -128, 127)
    assert np.array_equal(got["conv_q"][0].astype(np.int64), expect)


def test_vitis_dpu_arithmetic_hand_examples():
    assert vitis.fix_pos(0.125) == 3 and vitis.fix_pos(4.0) == -2
    with pytest.raises(ValueError):
        vitis.fix_pos(0.1)
    assert list(vitis.dpu_round([2.5, -2.5, -0.5, 0.49, -1.5])) == [3, -2, 0, 0, -1]
    assert list(vitis.rshift_half_up([-5, 5, -6, 7], 1)) == [-2, 3, -3, 4]
    # conv-fix, fp_in 4, fp_w 5, fp_out 3 -> shift_cut 6: 96/64 = 1.5 -> 2, -96/64 -> -1, 32/64 -> 1
    assert list(vitis.conv_fix([96, -96, 32, -32, 100000], None, 4, 5, 9, 3)) == [2, -1, 1, 0, 127]
    # bias at fp 7 (shift_bias = 2): b = 3 adds 12 to the accumulator: (20 + 12) / 64 = 0.5 -> 1
    assert list(vitis.conv_fix([20], [3], 4, 5, 7, 3)) == [1]
    # LeakyReLU alpha 26/256 (0.1 -> 0.1015625): -64 * 26/256 = -6.5 -> -6 (half up), -10 -> -1.015625 -> -1
    assert vitis.LEAKY_ALPHA == 0.1015625
    assert list(vitis.leaky_relu_fix([-64, -10, -128, 5], 4, 4)) == [-6, -1, -13, 5]
    # fused LEAKYRELU acts on the unrounded value: acc -640 >> 6 = -10 -> -10 * 26/256 -> -1
    assert list(vitis.conv_fix([-640], None, 4, 5, 9, 3, "LEAKYRELU")) == [-1]
    # RELU6 clamp is the literal 96 only when fp_out <= 4
    assert list(vitis.conv_fix([64 * 120], None, 4, 5, 9, 3, "RELU6")) == [96]
    assert list(vitis.conv_fix([64 * 120], None, 4, 5, 9, 5, "RELU6")) == [127]
    # hard sigmoid 2731/2^14: x = 0 at fp_in 4, fp_out 7 -> 3*2731*16 / 2^11 = 64.0078 -> 64 (0.5)
    assert list(vitis.hsigmoid_fix([0, -48, 48], 4, 7)) == [64, 0, 127]


def test_vitis_dpu_avgpool_factors():
    assert vitis.avgpool_factor(3, 3) == (7, 6)
    assert vitis.avgpool_factor(5, 5) == (10, 8)
    assert vitis.avgpool_factor(7, 7) == (21, 10)
    assert vitis.avgpool_factor(14, 14) == (21, 12)
    assert vitis.avgpool_factor(2, 2) == (1, 2)
    assert vitis.avgpool_factor(2, 3) == (85, 9)        # 85/512
    assert vitis.avgpool_factor(3, 6) == (57, 10)       # 57/1024
    assert vitis.avgpool_factor(9, 9) == (101, 13)      # 101/8192
    # 3x3 window sum 64: 64*7/64 = 7 (a true mean would give 7.11); sum 10 -> 1.09 -> 1
    assert list(vitis.avgpool_fix(np.array([64, 10, -36]), 3, 3, 4, 4)) == [7, 1, -4]


def test_glow_scale_transform_hand_examples():
    assert glow.scale_transform(0.41) == (0, 10, 420)      # 420/1024 = 0.41015625
    assert glow.scale_transform(0.001) == (3, 15, 262)     # 262/2^18 = 0.00099945
    assert glow.scale_transform(0.25) == (0, 2, 1)
    assert glow.scale_transform(4.0) == (0, 0, 4)
    assert list(glow.transform([-3, 3, 5], 0, 1, 1)) == [-1, 2, 3]   # half up after the multiply
    assert list(glow.transform([7, -1], 3, 0, 1)) == [0, -1]         # truncating (floor) pre-shift
    assert list(glow.transform([1000], 0, 10, 420, 5)) == [415]      # 1000*0.41015625 = 410.16 -> 410 + 5
    assert list(glow.round_half_away([-2.5, 2.5, 0.49])) == [-3, 3, 0]
    # Interpreter: zero point added in float before std::round: -5*0.5 + 1 = -1.5 -> -2
    assert list(glow.interp_requant([5, -5], 0.5, 1, -128, 127)) == [4, -2]


def test_tvm_requantize_rounding_options():
    assert tvmqnn.multiplier_shift(0.5) == (2 ** 30, 0)
    assert tvmqnn.multiplier_shift(0.75) == (1610612736, 0)
    assert tvmqnn.multiplier_shift(0.25) == (2 ** 30, -1)
    x = np.array([3, -3, 1, -1, 5])
    assert list(tvmqnn.requantize(x, 0.5, "UPWARD")) == [2, -1, 1, 0, 3]
    assert list(tvmqnn.requantize(x, 0.5, "TONEAREST")) == [2, -2, 1, -1, 3]
    assert list(tvmqnn.requantize(x, 0.5, "TFLITE")) == [2, -1, 1, 0, 3]
    # m = 0.25, x = 1: exact 0.25 -> 0 with one rounding; TFLITE rounds twice (0.5 at bit 31 -> 1)
    assert list(tvmqnn.requantize([1, 2, -2, 6], 0.25, "UPWARD")) == [0, 1, 0, 2]
    assert list(tvmqnn.requantize([1, 2, -2, 6], 0.25, "TONEAREST")) == [0, 1, -1, 2]
    assert list(tvmqnn.requantize([1, 2, -2, 6], 0.25, "TFLITE")) == [1, 1, -1, 2]
    with pytest.raises(ValueError):
        tvmqnn.requantize([1], 0.5, "DOWN")


def test_cmsis_nn_first_stage_equals_tflite_srdhm_and_single_rounding():
    rng = np.random.default_rng(0)
    m = rng.integers(2 ** 30, 2 ** 31 - 1, 2000)
    a = rng.integers(-2 ** 31, 2 ** 31 - 1, 2000)
    a[:4] = [-3, 3, -(2 ** 20) - 1, 7]
    m[:4] = 2 ** 30  # products exactly at the bit-30 tie
    cmsis = (a * m.astype(object) + 2 ** 30) // 2 ** 31  # arbitrary precision, floor
    assert np.array_equal(np.asarray(cmsis, np.int64), srdhm(a, m))
    # CMSIS_NN_USE_SINGLE_ROUNDING: ((val*M) >> (30 - shift) + 1) >> 1 == refinterp "single"
    val = rng.integers(-2 ** 20, 2 ** 20, 500)
    for shift in (-9, -3, 0, 1):
        mult = int(rng.integers(2 ** 30, 2 ** 31 - 1))
        single = ((val * mult) >> (30 - shift)) + 1 >> 1
        assert np.array_equal(single, requantize(val, mult, shift, "single"))


def test_cmsis_nn_runs_tflite_model():
    model = FIXTURES / "tflite" / "ops_zoo_int8.tflite"
    graph = refinterp.load(str(model))
    sess = refinterp.Session(graph, scheme="cmsis-nn")
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        shape = tuple(d or 1 for d in t.shape)
        feeds[name] = (np.random.default_rng(0).integers(-128, 128, shape).astype(t.dtype) if t.dtype == "int8"
                       else np.random.default_rng(0).uniform(-1, 1, shape).astype(t.dtype))
    out = sess.run(feeds)
    ref = refinterp.Session(graph, scheme="tflite-micro").run(feeds)
    for k in out:  # the default CMSIS-NN build has TFLM's arithmetic
        assert np.array_equal(out[k], ref[k])


def test_fbgemm_avx2_pair_saturation_example():
    """pytorch#44939: 211*71 + 171*107 = 33278 > 32767 -> the vpmaddubsw pair saturates."""
    from refinterp.ir import Graph, Node, QuantParams, TensorInfo

    def qp(s, z):
        return QuantParams(np.asarray([s], np.float32), np.asarray([z], np.int64))

    w = np.array([[71, 107]], np.int8)
    t = {"x": TensorInfo("x", (1, 2), "uint8", qp(1.0, 0)),
         "w": TensorInfo("w", (1, 2), "int8", qp(1 / 256, 0), w),
         "y": TensorInfo("y", (1, 1), "uint8", qp(1.0, 0))}
    g = Graph("g", "onnx", t, [Node("fc", "Gemm", ["x", "w"], ["y"], {"transB": 1}, source_op="QDQ:Gemm")],
              ["x"], ["y"])
    x = np.array([[211, 171]], np.uint8)
    exact = refinterp.Session(g, scheme="fbgemm").run({"x": x})["y"]
    sat = refinterp.Session(g, scheme="fbgemm-avx2").run({"x": x})["y"]
    assert int(exact[0, 0]) == 130   # RNE(33278 / 256 = 129.99)
    assert int(sat[0, 0]) == 128     # RNE(32767 / 256 = 127.996)
