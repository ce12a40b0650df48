"""The ``qnn-htp-v68`` / ``qnn-htp-v73`` schemes against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0,
QNN 2.51 host build of libQnnHtp.so) on single-op QDQ models: every QuantizeLinear output of the
emulator equals refinterp's Session under the scheme, code for code.  The emulator runs in a
subprocess (_qnn_oracle.py)."""
from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refinterp
from refinterp.errors import UnsupportedOpError
from refinterp.passes.qdq_htp import INPUT_FOLDS
from refinterp.quant import htp_ops

from tests.conformance.test_qnn_htp_numerics import _init, _model, htp_batch_outputs

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
# htp_arch 69 and 75 / 79 / 81: the qnn-htp-v69 scheme extends qnn-htp-v68, v75 / v79 / v81 extend
# qnn-htp-v73, all unchanged.  At those archs the suite runs the convolution over every accumulator,
# Add / Sub over every pair and the requantizing data movement (uint8), plus the whole models of
# test_qnn_htp_models.py: what keeps them verified aliases (every case of this file was run at every
# alias arch once, 0 differences, when the aliases were made)
V68_LIKE = ["68", "69"]
V73_LIKE = ["73", "75", "79", "81"]
ARCHS = V68_LIKE + V73_LIKE
ALIASES = ["69", "75", "79", "81"]
MAIN = ["68", "73"]
ARCH_ACT = [(a, act) for a in MAIN for act in ("uint8", "int8")] + [(a, "uint8") for a in ALIASES]
ORACLE = Path(__file__).with_name("_qnn_oracle.py")


def _q_outputs(m) -> list[str]:
    return [n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear"]


def _with_outputs(m, names):
    """Every QuantizeLinear output as a graph output, typed by its zero point."""
    have = {o.name for o in m.graph.output}
    ztype = {i.name: i.data_type for i in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type == "QuantizeLinear" and node.output[0] not in have:
            m.graph.output.append(helper.make_tensor_value_info(node.output[0], ztype[node.input[2]], None))
    return m


def _htp_many(tmp_path, jobs: list[tuple], arch: str) -> list[dict[str, np.ndarray]]:
    """Every job's QuantizeLinear outputs (and int64 graph outputs: TopK's indices) from the emulator, all
    models in one subprocess."""
    tapped = []
    for m, feeds in jobs:
        ints = [o.name for o in m.graph.output if o.type.tensor_type.elem_type == TensorProto.INT64]
        tapped.append((_with_outputs(m, _q_outputs(m)), feeds, _q_outputs(m) + ints))
    return htp_batch_outputs(tmp_path, tapped, arch)


def _check_many(tmp_path, jobs: list[tuple], arch: str) -> int:
    """Run the emulator and refinterp on every (model, feeds); assert every QuantizeLinear output
    equal; return the count of codes compared."""
    n = 0
    for i, ((m, feeds), got) in enumerate(zip(jobs, _htp_many(tmp_path, jobs, arch))):
        p = tmp_path / f"m{i}.onnx"
        ours = refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}").run(feeds, capture=list(got))
        for k, b in got.items():
            a = np.asarray(ours[k])
            assert a.dtype == b.dtype and a.shape == b.shape, (k, a.dtype, b.dtype, a.shape, b.shape)
            bad = np.flatnonzero(a.ravel() != b.ravel())
            assert bad.size == 0, f"job {i} {k}: {bad.size} of {a.size} codes differ, e.g. ours " \
                                  f"{a.ravel()[bad[:4]]} htp {b.ravel()[bad[:4]]}"
            n += a.size
    return n


def _check(tmp_path, m, feeds: dict, arch: str) -> int:
    return _check_many(tmp_path, [(m, feeds)], arch)


def _qdq_in(name, s, z, act):
    return ([_init(s, name + "_s", np.float32), _init(z, name + "_z", act)],
            [helper.make_node("QuantizeLinear", [name, name + "_s", name + "_z"], [name + "_q"]),
             helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_d"])])


def _qdq_out(src, name, s, z, act):
    return ([_init(s, name + "_s", np.float32), _init(z, name + "_z", act)],
            [helper.make_node("QuantizeLinear", [src, name + "_s", name + "_z"], [name]),
             helper.make_node("DequantizeLinear", [name, name + "_s", name + "_z"], [name + "_dq"])])


def _conv_model(x_shape, w, ws, bias, xs, xz, ys, yz, act, op="Conv", w_axis=0, wz=None, **attrs):
    """x -> Q/DQ -> Conv(DQ(w), DQ(bias)) -> Q -> DQ; per-channel (on ``w_axis``) when ``ws`` is an array;
    ``op``: ConvTranspose (its output channels on axis 1 of the weights); ``wz``: uint8 weight codes ``w``
    with that zero point (per tensor), else int8 ones with zero point 0."""
    pc = np.size(ws) > 1
    inits, nodes = _qdq_in("x", xs, xz, act)
    inits += [_init(w, "w", np.int8 if wz is None else np.uint8), _init(ws, "ws", np.float32),
              _init(np.zeros(np.size(ws), np.int8) if pc else 0, "wz", np.int8) if wz is None
              else _init(wz, "wz", np.uint8)]
    nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=w_axis))
    ins = ["x_d", "wd"]
    if bias is not None:
        bs = (F(xs) * np.asarray(ws, F)).astype(F)
        inits += [_init(bias, "b", np.int32), _init(bs, "bs", np.float32),
                  _init(np.zeros(np.size(bs), np.int32) if pc else 0, "bz", np.int32)]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0))
        ins.append("bd")
    nodes.append(helper.make_node(op, ins, ["c"], **attrs))
    i2, n2 = _qdq_out("c", "y", ys, yz, act)
    return _model(nodes + n2, inits + i2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])


# -- convolution: every accumulator in [-16384, 16256], one multiplier per output channel ------------

@pytest.mark.parametrize("arch,act", ARCH_ACT)
def test_conv_every_accumulator(tmp_path, arch, act):
    """Output channel c sees acc = a + 127 * b for every pair of input codes: its own multiplier M_c
    (per-channel weight scales: k from -5 to 8) over the whole accumulator range, plus an int32 bias per
    channel (v68 adds the codes; v73 re-quantizes the bias vector, htp.conv_bias_per_channel)."""
    info = np.iinfo(act)
    xz = 128 if act == "uint8" else 0
    a, b = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    q = np.stack([a.ravel(), b.ravel()]) + int(info.min)  # (2, 65536) codes
    Ms = np.array([3.5, 1.3, 0.71, 0.2, 0.093, 0.031, 0.0087, 0.0023, 0.00061, 0.00031])
    xs, ys = 0.01, 0.004
    ws = (Ms * ys / xs).astype(F)
    w = np.tile(np.array([1, 127], np.int8).reshape(1, 2, 1, 1), (Ms.size, 1, 1, 1))
    rng = np.random.default_rng(7 + (act == "int8"))
    bias = rng.integers(-20000, 20000, Ms.size).astype(np.int32)
    x = ((q - xz) * F(xs)).astype(F)[None, :, None, :]
    jobs = [(_conv_model((1, 2, 1, q.shape[1]), w, ws, bias, xs, xz, ys, yz, act), {"x": x})
            for yz in (int(info.min) + 3, int(rng.integers(int(info.min), int(info.max) + 1)))]
    assert _check_many(tmp_path, jobs, arch) > 2 * 65536 * Ms.size


CONV_LAYERS = [  # (kind, stride, per-channel, bias)
    ("conv", 1, False, True), ("conv", 2, True, False), ("conv", 1, True, True),
    ("dw", 1, False, True), ("dw", 1, True, True), ("dw", 2, False, True), ("dw", 2, True, True),
]


CONV_CASES = [(arch, act) + c for arch, act in ARCH_ACT for c in CONV_LAYERS if arch in MAIN]


@pytest.mark.parametrize("arch,act,kind,stride,pc,with_bias", CONV_CASES, ids=lambda v: str(v))
def test_conv_layers(tmp_path, arch, act, kind, stride, pc, with_bias, seed=0):
    info = np.iinfo(act)
    rng = np.random.default_rng(zlib.crc32(repr((kind, stride, pc, with_bias, act, seed)).encode()))
    C, H = 16, 11
    O, cg, group = (C, 1, C) if kind == "dw" else (8, C, 1)
    jobs = []
    for trial in range(4):
        xs, ws0 = (float(F(10 ** rng.uniform(-3, -1))) for _ in range(2))
        ws = (F(ws0) * rng.uniform(0.3, 3.0, O)).astype(F) if pc else F(ws0)
        # stride-2 depthwise is characterised for multipliers below 1/2 (and, per-channel with a bias,
        # for every channel's M >= 1e-4; the spread below is at most 10x)
        top = np.log10(0.45) if (kind == "dw" and stride == 2) else np.log10(3.0)
        M = 10 ** rng.uniform(-2.9 if (kind == "dw" and stride == 2 and pc) else -4, top)
        ys = float(F(xs * float(np.max(ws)) / M))
        xz, yz = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
        w = rng.integers(-127, 128, (O, cg, 3, 3)).astype(np.int8)
        bias = rng.integers(-4000, 4000, O).astype(np.int32) if with_bias else None
        m = _conv_model((1, C, H, H), w, ws, bias, xs, xz, ys, yz, act, group=group, pads=[1, 1, 1, 1],
                        strides=[stride, stride])
        q = rng.integers(int(info.min), int(info.max) + 1, (1, C, H, H))
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def _gemm_job(rng, act: str, op: str, pc: bool):
    """(model, feeds) of a 64 x 96 -> 24 Gemm (with an int32 bias) or MatMul on ``act`` activations,
    per-tensor or per-channel int8 weights; 16-bit ones with smaller input scales, larger biases and the
    output zero point away from the rails (int16: symmetric input)."""
    B, K, N = 64, 96, 24
    info = np.iinfo(act)
    wide = info.bits == 16
    xs, ws0 = float(F(10 ** rng.uniform(*((-5, -3) if wide else (-3, -1))))), float(F(10 ** rng.uniform(-3, -1)))
    ws = (F(ws0) * rng.uniform(0.3, 3.0, N)).astype(F) if pc else F(ws0)
    ys = float(F(xs * float(np.max(ws)) * 40 * (128 if wide else 1) / 10 ** rng.uniform(-1, 1)))
    xz = 0 if act == "int16" else int(rng.integers(int(info.min), int(info.max) + 1))
    yz = int(rng.integers(int(info.min) // 2, int(info.max) // 2)) if wide else int(rng.integers(int(info.min), int(info.max) + 1))
    inits, nodes = _qdq_in("x", xs, xz, act)
    zw = np.zeros(N, np.int8) if pc else 0
    if op == "Gemm":
        w = rng.integers(-127, 128, (N, K)).astype(np.int8)
        bias = rng.integers(*((-2 ** 22, 2 ** 22) if wide else (-5000, 5000)), N).astype(np.int32)
        bs = (F(xs) * np.asarray(ws, F)).astype(F)
        inits += [_init(w, "w", np.int8), _init(ws, "ws", np.float32), _init(zw, "wz", np.int8),
                  _init(bias, "b", np.int32), _init(bs, "bs", np.float32),
                  _init(np.zeros(N, np.int32) if pc else 0, "bz", np.int32)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                  helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
                  helper.make_node("Gemm", ["x_d", "wd", "bd"], ["c"], transB=1)]
    else:
        w = rng.integers(-127, 128, (K, N)).astype(np.int8)
        inits += [_init(w, "w", np.int8), _init(ws, "ws", np.float32), _init(zw, "wz", np.int8)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
                  helper.make_node("MatMul", ["x_d", "wd"], ["c"])]
    i2, n2 = _qdq_out("c", "y", ys, yz, act)
    m = _model(nodes + n2, inits + i2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, K])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    q = rng.integers(int(info.min), int(info.max) + 1, (B, K))
    return m, {"x": ((q - xz) * F(xs)).astype(F)}


@pytest.mark.parametrize("arch,op,pc", [(a, op, pc) for a in MAIN for op in ("Gemm", "MatMul") for pc in (False, True)])
def test_gemm_matmul(tmp_path, arch, op, pc):
    """Gemm (with an int32 bias) and MatMul, per-tensor and per-channel int8 weights, uint8 and int8."""
    rng = np.random.default_rng(zlib.crc32(repr((op, pc)).encode()))
    _check_many(tmp_path, [_gemm_job(rng, act, op, pc) for act in ("uint8", "int8")], arch)


# -- 16-bit activations (a16w8): the convolution family on v73 ---------------------------------------

A16_CONV = [("conv", 1, False, True), ("conv", 1, True, True), ("conv", 2, False, False), ("dw", 1, True, True)]
A16_CASES = [(a, act) + c for a in ("73", "79", "68") for act in ("uint16", "int16") for c in A16_CONV
             if not (act == "int16" and c[0] == "dw") and (a in ("73", "68") or c == A16_CONV[1])]


@pytest.mark.parametrize("arch,act,kind,stride,pc,with_bias", A16_CASES, ids=lambda v: str(v))
def test_a16_conv_layers(tmp_path, arch, act, kind, stride, pc, with_bias):
    """3x3 layers on 16-bit activations, int8 weights (htp.py, "16-bit activations"): random zero points,
    biases to +-2^22, multipliers 1e-4 .. 3 (per-channel ones through the largest weight scale)."""
    info = np.iinfo(act)
    rng = np.random.default_rng(zlib.crc32(repr((kind, stride, pc, with_bias, act)).encode()))
    C, H = 16, 9
    O, cg, group = (C, 1, C) if kind == "dw" else (8, C, 1)
    jobs = []
    for trial in range(3):
        xs, ws0 = float(F(10 ** rng.uniform(-5, -3))), float(F(10 ** rng.uniform(-3, -1)))
        ws = (F(ws0) * rng.uniform(0.3, 3.0, O)).astype(F) if pc else F(ws0)
        ys = float(F(xs * float(np.max(ws)) / 10 ** rng.uniform(-4, 0.5)))
        xz = int(rng.integers(int(info.min), int(info.max) + 1)) if act == "uint16" else 0
        yz = int(rng.integers(int(info.min), int(info.max) + 1))
        w = rng.integers(-127, 128, (O, cg, 3, 3)).astype(np.int8)
        bias = rng.integers(-2 ** 22, 2 ** 22, O).astype(np.int32) if with_bias else None
        m = _conv_model((1, C, H, H), w, ws, bias, xs, xz, ys, yz, act, group=group, pads=[1, 1, 1, 1],
                        strides=[stride, stride])
        q = rng.integers(int(info.min), int(info.max) + 1, (1, C, H, H))
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    assert _check_many(tmp_path, jobs, arch) > 3 * O * 16


@pytest.mark.parametrize("act,op,pc", [(act, op, pc) for act in ("uint16", "int16") for op in ("Gemm", "MatMul")
                                       for pc in (False, True)])
def test_a16_gemm_matmul(tmp_path, act, op, pc):
    job = _gemm_job(np.random.default_rng(zlib.crc32(repr((op, pc, act)).encode())), act, op, pc)
    _check_many(tmp_path, [job], "73")
    _check_many(tmp_path, [job], "68")


@pytest.mark.parametrize("arch", MAIN)
def test_a16_global_average_pool(tmp_path, arch):
    """GlobalAveragePool on uint16 takes the 8-bit window-average rule (htp_ops.average): windows of 4 to
    56 cells, 512 channels each, codes spread around a per-channel centre so the means cover the range."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16gap", arch)).encode()))
    jobs = []
    for hw in ((2, 2), (4, 5), (3, 8), (7, 7), (7, 8)):
        xs = float(F(10 ** rng.uniform(-4, -2)))
        ys = float(F(xs * 10 ** rng.uniform(-0.5, 0.5)))
        xz, yz = (int(rng.integers(0, 65536)) for _ in range(2))
        i1, n1 = _qdq_in("x", xs, xz, "uint16")
        n1.append(helper.make_node("GlobalAveragePool", ["x_d"], ["p"]))
        io, no = _qdq_out("p", "y", ys, yz, "uint16")
        shape = [1, 512, *hw]
        m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        q = np.clip(rng.integers(0, 65536, (1, 512, 1, 1)) + rng.integers(-3000, 3000, shape), 0, 65535)
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_a16_int16_global_average_pool_is_refused_as_the_qnn_ep_refuses_it(tmp_path):
    i1, n1 = _qdq_in("x", 0.001, 0, "int16")
    n1.append(helper.make_node("GlobalAveragePool", ["x_d"], ["p"]))
    io, no = _qdq_out("p", "y", 0.001, 0, "int16")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "int16 GlobalAveragePool" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 8, 4, 4), "not selected by that EP")


def test_a16_add_refusals(tmp_path):
    i1, n1 = _qdq_in("a", 0.001, 32768, "uint16")
    n1.append(helper.make_node("Add", ["a_d", "c"], ["s"]))
    i1 += [_init(np.float32(0.5), "c", np.float32)]
    io, no = _qdq_out("s", "y", 0.002, 32768, "uint16")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "not characterised" in _refused(tmp_path, m, "qnn-htp-v73")  # a float constant: no QDQ unit


@pytest.mark.parametrize("arch", MAIN)
def test_a16_depthwise_stride_2(tmp_path, arch):
    """uint16 3x3 depthwise Conv with stride 2: the 8-bit stride-2 depthwise kernel on 16-bit codes (gemm.py
    ``_dw_stride2_16``): pads 0 / 1 / 2, odd and even sizes, per-tensor and per-channel weights, with and
    without int32 biases, multipliers from 2^-16 to 0.45 and output zero points as far as the folded offset
    fits int32 -- the 16-bit convolution rule misses 2-29% of these codes."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16dw2", arch)).encode()))
    jobs = []
    for trial in range(12):
        C, H, pad = 16, 16 + trial % 2, [1, 0, 2][trial % 3]
        pc, with_bias = trial % 2 == 1, trial % 4 >= 2
        M = 10 ** rng.uniform(np.log10(2.0 ** -15) + 0.01, np.log10(0.45))  # per-channel ones down to M / 2
        xs, ws0 = float(F(10 ** rng.uniform(-5, -3))), float(F(10 ** rng.uniform(-3, -1)))
        ws = (F(ws0) * rng.uniform(0.5, 1.0, C)).astype(F) if pc else F(ws0)
        ys = float(F(xs * float(np.max(ws)) / M))
        bias = rng.integers(-2 ** 22, 2 ** 22, C).astype(np.int32) if with_bias else None
        yz = int(rng.integers(0, min(65536, int((2 ** 31 - 2 ** 23 - 9 * 127 * 65535) * M * 0.5))))
        xz = int(rng.integers(0, 65536))
        w = rng.integers(-127, 128, (C, 1, 3, 3)).astype(np.int8)
        m = _conv_model((1, C, H, H), w, ws, bias, xs, xz, ys, yz, "uint16", group=C, pads=[pad] * 4, strides=[2, 2])
        q = np.clip(int(rng.integers(0, 65536)) + rng.integers(-20000, 20001, (1, C, H, H)), 0, 65535)
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_a16_depthwise_stride_2_uint8_weights(tmp_path, arch):
    """The same kernel with one-scale uint8 weights (ONNX Runtime's get_qnn_qdq_config at uint16): w - z_w as it
    is, as at 8 bits, zero points 0 .. 255 (w - z_w over all of [-255, 255]), with and without int32 biases.
    Before, an ONNX model whose depthwise weights' shape shape inference had not given (opset-21 uint16 QDQ)
    ran the 16-bit convolution rule on it: 45% of a MobileNet block's codes off."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16dw2u8", arch)).encode()))
    jobs = []
    for trial, wz in enumerate((0, 255, 128, 7, 250, 90, 170, 128)):
        C, H, pad, with_bias = 16, 16 + trial % 2, [1, 0, 2][trial % 3], trial % 2 == 1
        M = 10 ** rng.uniform(np.log10(2.0 ** -15) + 0.01, np.log10(0.45))
        xs, ws = float(F(10 ** rng.uniform(-5, -3))), F(10 ** rng.uniform(-3, -1))
        ys = float(F(xs * float(ws) / M))
        bias = rng.integers(-2 ** 22, 2 ** 22, C).astype(np.int32) if with_bias else None
        yz = int(rng.integers(0, min(65536, int((2 ** 31 - 2 ** 23 - 9 * 255 * 65535) * M * 0.5))))
        xz = int(rng.integers(0, 65536))
        w = rng.integers(0, 256, (C, 1, 3, 3)).astype(np.uint8)
        m = _conv_model((1, C, H, H), w, ws, bias, xs, xz, ys, yz, "uint16", group=C, pads=[pad] * 4,
                        strides=[2, 2], wz=wz)
        q = np.clip(int(rng.integers(0, 65536)) + rng.integers(-20000, 20001, (1, C, H, H)), 0, 65535)
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_a16_depthwise_refusals(tmp_path):
    """int16 depthwise: the QNN EP leaves the node unassigned (measured, asserted below); a uint16 depthwise
    Conv with stride 3, a 5x5 one with stride 2, one with a multiplier of 1/2 or more or a folded offset beyond
    int32: refused."""
    w = np.ones((4, 1, 3, 3), np.int8)
    m = _conv_model((1, 4, 6, 6), w, F(0.01), None, 0.001, 0, 0.002, 0, "int16", group=4, pads=[1, 1, 1, 1])
    assert "int16 depthwise" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 4, 6, 6), "Unsupported nodes in QNN EP")
    for k, st in ((3, 3), (5, 2)):
        m = _conv_model((1, 4, 6, 6), np.ones((4, 1, k, k), np.int8), F(0.01), None, 0.001, 32768, 0.002, 32768,
                        "uint16", group=4, pads=[1, 1, 1, 1], strides=[st, st])
        assert "3x3, stride 2 and 8-bit" in _refused(tmp_path, m, "qnn-htp-v73")
    m = _conv_model((1, 4, 6, 6), w, F(0.01), None, 0.001, 32768, float(F(0.00001 / 3e-5)), 65000, "uint16", group=4,
                    pads=[1, 1, 1, 1], strides=[2, 2])  # M = 3e-5: z_y / M = 2.17e9
    assert "may pass int32" in _refused(tmp_path, m, "qnn-htp-v73")
    m = _conv_model((1, 4, 6, 6), w, F(0.01), None, 0.001, 32768, 0.00002, 32768, "uint16", group=4,
                    pads=[1, 1, 1, 1], strides=[2, 2])
    assert "to 1/2 only" in _refused(tmp_path, m, "qnn-htp-v73")


# -- Add: every pair of codes, four output scales per model --------------------------------------------

# Add parameter sets whose offset k / 256 falls exactly on n + 1/2 (htp_ops.add_params: ties go down), found by
# a search over random scales and zero points: (s_a, z_a, s_b, z_b, s_y, z_y) in the uint8 domain, k / 256 =
# 894.5, 7799.5, -2795.5, -4608.5 (both signs, both parities)
ADD_TIES = [(0.0792379081249237, 96, 0.03563236445188522, 31, 0.09214252978563309, 122),
            (0.04841228574514389, 69, 0.028480537235736847, 242, 0.07833443582057953, 252),
            (0.0270619485527277, 160, 0.048698119819164276, 192, 0.0875905305147171, 112),
            (0.08737530559301376, 184, 0.0604180283844471, 204, 0.2143506556749344, 60)]


@pytest.mark.parametrize("arch,act", ARCH_ACT)
def test_add_offset_ties(tmp_path, arch, act):
    """The Add offset's tie goes down (rounding it half up misses 556-1,660 of the 65,536 code pairs per set)."""
    sh = 128 if act == "int8" else 0
    info = np.iinfo(act)
    a, b = np.meshgrid(np.arange(int(info.min), int(info.max) + 1), np.arange(int(info.min), int(info.max) + 1),
                       indexing="ij")
    jobs = []
    for s1, z1, s2, z2, s3, z3 in ADD_TIES:
        z1, z2, z3 = z1 - sh, z2 - sh, z3 - sh
        k = htp_ops.add_params(float(F(F(s1) / F(s3))), float(F(F(s2) / F(s3))), z1 + sh, z2 + sh, z3 + sh)
        p, i1, i2 = k[:3]
        assert (z3 + sh) * 2 ** p + 2 ** (p - 1) - (z1 + sh) * i1 - (z2 + sh) * i2 - k[3] == 128  # a tie, taken down
        i1_, n1 = _qdq_in("a", s1, z1, act)
        i2_, n2 = _qdq_in("b", s2, z2, act)
        io, no = _qdq_out("s", "y", s3, z3, act)
        shape = [1, a.size]
        m = _model(n1 + n2 + [helper.make_node("Add", ["a_d", "b_d"], ["s"])] + no, i1_ + i2_ + io,
                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape),
                    helper.make_tensor_value_info("b", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        jobs.append((m, {"a": ((a.ravel() - z1) * F(s1)).astype(F)[None], "b": ((b.ravel() - z2) * F(s2)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch,act", ARCH_ACT)
def test_add_sub_mul_multiplier_ties_and_small_sums(tmp_path, arch, act):
    """Add / Sub multipliers on a rounding tie go to even (M_2 2^15 = 9830.5: half up misses 120-126 of 32,768
    random pairs on Sub), so does the two-tensor Mul's ps (M 2^16 = 19660.5: half up 139-693 off), and an Add whose
    M_1 + M_2 is below 1/4 keeps p = 15 (uncapped p = 16 .. 20 missed 33-178 codes in 32,768 on 7 of 8 sets):
    wrong answers before."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(zlib.crc32(repr(("addties", act)).encode()))

    def job(op, s1, s2, s3):
        z1, z2, z3 = (int(rng.integers(lo + 60, hi - 60)) for _ in range(3))
        i1_, n1 = _qdq_in("a", s1, z1, act)
        i2_, n2 = _qdq_in("b", s2, z2, act)
        io, no = _qdq_out("s", "y", s3, z3, act)
        m = _model(n1 + n2 + [helper.make_node(op, ["a_d", "b_d"], ["s"])] + no, i1_ + i2_ + io,
                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1 << 15]),
                    helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 1 << 15])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        qa, qb = rng.integers(lo, hi + 1, (2, 1, 1 << 15))
        return m, {"a": ((qa - z1) * F(s1)).astype(F), "b": ((qb - z2) * F(s2)).astype(F)}

    ys = 2.0 ** -6
    jobs = [job(op, float(F(ys * 0.0085)), 19661 * 2.0 ** -16 * ys, ys) for op in ("Add", "Sub")]  # 9830.5
    jobs.append(job("Mul", 2.0 ** -7, 39321 * 2.0 ** -17, 2.0 ** -7))  # Mul's ps = M 2^16 = 19660.5
    for ratio in (0.02, 0.08, 0.2):  # (s_1 + s_2) / s_y
        s1, s2 = (float(F(10 ** rng.uniform(-3, -1))) for _ in range(2))
        jobs.append(job("Add", s1, s2, float(F((s1 + s2) / ratio))))
    _check_many(tmp_path, jobs, arch)


def _sub_in_range(s1, s2, s3, z1, z2, z3, act) -> bool:
    """Sub's offset must fit 24 bits (quant/htp_ops.py sub_params: refused otherwise)."""
    sh = 128 if act == "int8" else 0
    try:
        htp_ops.sub_params(float(F(F(s1) / F(s3))), float(F(F(s2) / F(s3))), z1 + sh, z2 + sh, z3 + sh)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("arch,act", ARCH_ACT)
@pytest.mark.parametrize("op", ["Add", "Sub"])
def test_add_sub_every_pair(tmp_path, arch, act, op):
    info = np.iinfo(act)
    rng = np.random.default_rng(3 + (act == "int8") + 10 * (op == "Sub"))
    a, b = np.meshgrid(np.arange(int(info.min), int(info.max) + 1), np.arange(int(info.min), int(info.max) + 1),
                       indexing="ij")
    jobs = []
    for trial in range(3):
        s1, s2 = (float(F(10 ** rng.uniform(-3, -1))) for _ in range(2))
        z1, z2 = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
        i1, n1 = _qdq_in("a", s1, z1, act)
        i2, n2 = _qdq_in("b", s2, z2, act)
        nodes, inits = n1 + n2, i1 + i2
        for j in range(4):  # (M_1 + M_2) from about 1/4 to 8: Add's p = 14 - e from 15 down to 10 (below: the ties test)
            while True:
                s3 = float(F((s1 + s2) * 10 ** rng.uniform(-0.9, 0.6)))
                z3 = int(rng.integers(int(info.min), int(info.max) + 1))
                if op == "Add" or _sub_in_range(s1, s2, s3, z1, z2, z3, act):
                    break
            io, no = _qdq_out(f"s{j}", f"y{j}", s3, z3, act)
            nodes, inits = nodes + [helper.make_node(op, ["a_d", "b_d"], [f"s{j}"])] + no, inits + io
        shape = [1, a.size]
        m = _model(nodes, inits, [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape),
                                  helper.make_tensor_value_info("b", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y0_dq", TensorProto.FLOAT, None)])
        feeds = {"a": ((a.ravel() - z1) * F(s1)).astype(F)[None], "b": ((b.ravel() - z2) * F(s2)).astype(F)[None]}
        jobs.append((m, feeds))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_global_average_pool_and_maxpool(tmp_path, arch):
    rng = np.random.default_rng(11)
    jobs = []
    for act in ("uint8", "int8"):
        info = np.iinfo(act)
        for hw in (2, 3, 5, 7):
            xs = float(F(10 ** rng.uniform(-3, -1)))
            xz = int(rng.integers(int(info.min), int(info.max) + 1))
            i1, n1 = _qdq_in("x", xs, xz, act)
            n1.append(helper.make_node("MaxPool", ["x_d"], ["mp"], kernel_shape=[2, 2], strides=[1, 1]))
            im, nm = _qdq_out("mp", "m", xs, xz, act)  # MaxPool keeps its input's parameters
            nm.append(helper.make_node("GlobalAveragePool", ["m_dq"], ["g"]))
            ig, ng = _qdq_out("g", "y", float(F(xs * 10 ** rng.uniform(-0.5, 0.5))),
                              int(rng.integers(int(info.min), int(info.max) + 1)), act)
            m = _model(n1 + nm + ng, i1 + im + ig,
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512, hw + 1, hw + 1])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            q = rng.integers(int(info.min), int(info.max) + 1, (1, 512, hw + 1, hw + 1))
            jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_table_activations_every_code(tmp_path, arch):
    """Sigmoid / Tanh / HardSwish: every input code, random scales (ties are refused, tested below)."""
    rng = np.random.default_rng(21)
    jobs = []
    for act in ("uint8", "int8"):
        info = np.iinfo(act)
        q = np.arange(int(info.min), int(info.max) + 1)
        for op in ("Sigmoid", "Tanh", "HardSwish"):
            for trial in range(3):
                xs = float(F(10 ** rng.uniform(-2.5, -0.5)))
                xz = int(rng.integers(int(info.min), int(info.max) + 1))
                ys = {"Sigmoid": 1 / 256, "Tanh": 1 / 128}.get(op, float(F(xs * rng.uniform(0.5, 1.0))))
                yz = {"Sigmoid": int(info.min), "Tanh": (int(info.min) + int(info.max) + 1) // 2}.get(
                    op, int(info.min) + int(rng.integers(0, 60)))
                i1, n1 = _qdq_in("x", xs, xz, act)
                n1.append(helper.make_node(op, ["x_d"], ["f"]))
                io, no = _qdq_out("f", "y", ys, yz, act)
                m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, q.size])],
                           [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
                jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_requantizing_data_movement(tmp_path, arch):
    """Concat (inputs on other parameters than the output), Reshape, Transpose, MaxPool, DepthToSpace
    and edge / reflect Pad with other output parameters, fed by graph inputs: every code, random scale
    pairs where measured (MaxPool), the rest refused; a constant Pad pads with the zero
    point."""
    rng = np.random.default_rng(31)
    jobs = []
    for act in ("uint8", "int8"):
        info = np.iinfo(act)
        q = np.arange(int(info.min), int(info.max) + 1)
        codes = lambda: int(rng.integers(int(info.min), int(info.max) + 1))  # noqa: E731
        for op in ("Concat", "Reshape", "Transpose", "MaxPool"):
            s1, s2 = (float(F(10 ** rng.uniform(-2, -1))) for _ in range(2))
            z1, z2 = codes(), codes()
            ys = float(F(max(s1, s2) * 10 ** rng.uniform(-0.3, 0.3)))
            i1, n1 = _qdq_in("a", s1, z1, act)
            ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 1, 1, q.size])]
            feeds = {"a": ((q - z1) * F(s1)).astype(F).reshape(1, 1, 1, -1)}
            if op == "Concat":
                i2, n2 = _qdq_in("b", s2, z2, act)
                i1, n1 = i1 + i2, n1 + n2 + [helper.make_node("Concat", ["a_d", "b_d"], ["r"], axis=3)]
                ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 1, 1, q.size]))
                feeds["b"] = ((q - z2) * F(s2)).astype(F).reshape(1, 1, 1, -1)
            elif op == "Reshape":
                i1 = i1 + [_init(np.array([q.size, 1]), "shp", np.int64)]
                n1.append(helper.make_node("Reshape", ["a_d", "shp"], ["r"]))
            elif op == "Transpose":
                n1.append(helper.make_node("Transpose", ["a_d"], ["r"], perm=[0, 3, 2, 1]))
            else:
                n1.append(helper.make_node("MaxPool", ["a_d"], ["r"], kernel_shape=[1, 3]))  # padded: refused
            io, no = _qdq_out("r", "y", ys, codes(), act)
            m = _model(n1 + no, i1 + io, ins, [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, feeds))
        # DepthToSpace and edge / reflect Pad onto other parameters; a constant Pad (value 0) on equal ones
        for op, attrs, same in (("DepthToSpace", {"blocksize": 2, "mode": "DCR"}, False),
                                ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, False),
                                ("Pad", {"mode": "edge"}, False), ("Pad", {"mode": "reflect"}, False),
                                ("Pad", {"mode": "constant"}, True)):
            s1 = float(F(10 ** rng.uniform(-2, -1)))
            z1 = codes()
            ys, yz = (s1, z1) if same else (float(F(s1 * 10 ** rng.uniform(-0.3, 0.3))), codes())
            i1, n1 = _qdq_in("a", s1, z1, act)
            args = ["a_d"]
            if op == "Pad":
                i1.append(_init([0, 0, 1, 2, 0, 0, 2, 1], "pd", np.int64))
                args.append("pd")
            n1.append(helper.make_node(op, args, ["r"], **attrs))
            io, no = _qdq_out("r", "y", ys, yz, act)
            m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 8, 8])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, {"a": ((q - z1) * F(s1)).astype(F).reshape(1, 4, 8, 8)}))
    folds = set(INPUT_FOLDS)  # folded into the input's QuantizeLinear (passes/qdq_htp.py _input_folds)
    _check_measured_or_refused(tmp_path, jobs, arch, {"uint8": {"MaxPool"} | folds, "int8": {"MaxPool"} | folds})


def _check_measured_or_refused(tmp_path, jobs, arch: str, measured: dict) -> None:
    """Jobs whose requantizing op takes a graph input's codes: the HTP folds the requantization into the
    input's QuantizeLinear for most ops (tests/conformance/test_qnn_htp_requant_moves.py: the copy table
    holds only for inputs on the input's grid, as here); those not characterised are refused naming the
    node; the ``measured`` ones (the Reshape-likes folded into the QuantizeLinear among them) and the copies
    on equal parameters equal the emulator on every code."""
    run, refused, expected = [], set(), set()
    for m, feeds in jobs:
        act, op = _job_op(m)
        if _requantizes(m) and op not in measured.get(act, ()):
            expected.add((act, op))
        p = tmp_path / "probe.onnx"
        p.write_bytes(m.SerializeToString())
        try:
            refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}")
            run.append((m, feeds))
        except UnsupportedOpError as e:
            assert "requantiz" in str(e) and op not in measured.get(act, ()), str(e)
            refused.add((act, op))
    _check_many(tmp_path, run, arch)
    assert refused == expected, refused


def _job_op(m):
    op = next(n.op_type for n in m.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear"))
    z = next(i for i in m.graph.initializer if i.name == "a_z")
    return {TensorProto.UINT8: "uint8", TensorProto.INT8: "int8", TensorProto.UINT16: "uint16",
            TensorProto.INT16: "int16"}[z.data_type], op


def _requantizes(m) -> bool:
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    return not (np.array_equal(init["a_s"], init["y_s"]) and np.array_equal(init["a_z"], init["y_z"]))


@pytest.mark.parametrize("arch", MAIN)
def test_resize_nearest_upscale(tmp_path, arch):
    """Nearest Resize by 2 and 3 (half_pixel + round_prefer_floor, asymmetric + floor: the QNN EP refuses
    asymmetric + round_prefer_floor), on the input's parameters and requantized."""
    rng = np.random.default_rng(41)
    jobs = []
    for act in ("uint8", "int8"):
        info = np.iinfo(act)
        q = np.arange(int(info.min), int(info.max) + 1).reshape(1, 1, 16, 16)
        for factor, ctm, same in ((2, "half_pixel", True), (3, "asymmetric", False), (2, "half_pixel", False)):
            nm = "floor" if ctm == "asymmetric" else "round_prefer_floor"
            xs, xz = float(F(10 ** rng.uniform(-2, -1))), int(rng.integers(int(info.min), int(info.max) + 1))
            ys, yz = (xs, xz) if same else (float(F(xs * 10 ** rng.uniform(-0.3, 0.3))),
                                            int(rng.integers(int(info.min), int(info.max) + 1)))
            i1, n1 = _qdq_in("x", xs, xz, act)
            i1 = i1 + [_init(np.array([1, 1, factor, factor], np.float32), "sc", np.float32)]
            n1.append(helper.make_node("Resize", ["x_d", "", "sc"], ["r"], mode="nearest",
                                       coordinate_transformation_mode=ctm, nearest_mode=nm))
            io, no = _qdq_out("r", "y", ys, yz, act)
            m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_quantize_linear_from_float_v68(tmp_path, dtype):
    """QuantizeLinear of a graph input: htp.quantize_float on v68 as on v73 (float16 boundaries, ties)."""
    from tests.conformance.test_qnn_htp_numerics import _stress_values, quantize_model

    rng = np.random.default_rng({"uint8": 1, "int8": 2, "uint16": 3, "int16": 4}[dtype])
    info = np.iinfo(dtype)
    scale = float(F(10 ** rng.uniform(-4, -0.5)))
    zp = 0 if dtype == "int16" else int(rng.integers(int(info.min), int(info.max) + 1))
    x = _stress_values(rng, scale, info, zp, 3000)
    _check(tmp_path, quantize_model(scale, zp, dtype, x.size), {"x": x[None]}, "68")


# -- what the schemes refuse, at Session build, in one line naming the node ------------------------------

def _ep_refuses(tmp_path, m, shape, message: str) -> None:
    """The QNN EP itself does not take the model (htp_arch 73): the emulator subprocess fails with
    ``message`` on a zero input of ``shape``."""
    p, f = tmp_path / "ep.onnx", tmp_path / "ep.npz"
    p.write_bytes(m.SerializeToString())
    np.savez(f, x=np.zeros(shape, np.float32))
    r = subprocess.run([sys.executable, str(ORACLE), str(p), str(f), str(tmp_path / "ep_out.npz"), "73"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and message in r.stderr, r.stderr[-500:]


def _refused(tmp_path, m, scheme: str) -> str:
    p = tmp_path / "r.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(UnsupportedOpError) as e:
        refinterp.Session(refinterp.load(str(p)), scheme)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1 and "node '" in msg, msg
    return msg


def test_v73_refuses_a_per_channel_bias_on_another_scale(tmp_path):
    """The v73 rule reads the bias codes as accumulator units (bias scale s_x * s_w[c], as quantizers
    write it); a bias on another scale is not measured and refused, on v68 too."""
    m = _conv_model((1, 4, 5, 5), np.ones((8, 4, 1, 1), np.int8), np.linspace(0.01, 0.02, 8).astype(F),
                    np.arange(8, dtype=np.int32), 0.02, 128, 0.01, 128, "uint8")
    for init in m.graph.initializer:
        if init.name == "bs":
            init.CopyFrom(_init(np.full(8, 3e-4, F), "bs", np.float32))
    assert "bias whose scale is not s_x * s_w" in _refused(tmp_path, m, "qnn-htp-v73")
    # v68's bias fold is measured on s_x * s_w; the QNN EP converts a bias on another scale (its conv_op_builder),
    # not measured: refused too (a bias of zeros on any scale runs: test_qnn_htp_float_bias.py)
    assert "measured on that scale only" in _refused(tmp_path, m, "qnn-htp-v68")


@pytest.mark.parametrize("arch", ARCHS)
def test_uncharacterised_ops_are_refused(tmp_path, arch):
    # per-channel stride-2 depthwise with a bias and a tiny multiplier (quant/htp_ops.py)
    w = np.ones((4, 1, 3, 3), np.int8)
    m = _conv_model((1, 4, 6, 6), w, np.array([0.01, 0.01, 0.01, 1e-5], F), np.arange(4, dtype=np.int32), 0.02,
                    128, 0.01, 128, "uint8", group=4, pads=[1, 1, 1, 1], strides=[2, 2])
    assert "not characterised" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a HardSwish table entry on an exact tie (power-of-two scales): the HTP's tie rounding is unknown
    i1, n1 = _qdq_in("x", 0.125, 128, "uint8")
    n1.append(helper.make_node("HardSwish", ["x_d"], ["h"]))
    io, no = _qdq_out("h", "y", 0.0625, 5, "uint8")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "rounding tie" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # LeakyRelu 0.1 with s_x / s_y = 0.05 / 0.07: entries 1e-7 off a tie through f32(0.1), which the HTP rounds
    # as ties (5 of 256 codes one above the table before the wider guard)
    i1, n1 = _qdq_in("x", 0.05, 128, "uint8")
    n1.append(helper.make_node("LeakyRelu", ["x_d"], ["h"], alpha=0.1))
    io, no = _qdq_out("h", "y", 0.07, 100, "uint8")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "rounding tie" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a Sub whose offset does not fit 24 bits (measured: every output 0 there)
    i1, n1 = _qdq_in("a", 0.001, 0, "uint8")
    i2, n2 = _qdq_in("b", 0.001, 255, "uint8")  # p = 15: K = 255 * 2^15 + 2^14 + 255 * 3277 > 2^23
    io, no = _qdq_out("d", "y", 0.01, 255, "uint8")
    m = _model(n1 + n2 + [helper.make_node("Sub", ["a_d", "b_d"], ["d"])] + no, i1 + i2 + io,
               [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("a", "b")],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "does not fit 24 bits" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a linear Resize with align_corners coordinates: not characterised (half_pixel is: test_qnn_htp_resize.py)
    i1, n1 = _qdq_in("x", 0.02, 128, "uint8")
    i1 += [_init(np.array([1, 1, 2, 2], np.float32), "sc", np.float32)]
    n1.append(helper.make_node("Resize", ["x_d", "", "sc"], ["rs"], mode="linear",
                               coordinate_transformation_mode="align_corners"))
    io, no = _qdq_out("rs", "y", 0.02, 128, "uint8")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "half_pixel coordinates" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a Slice whose output is requantized: not measured
    i1, n1 = _qdq_in("x", 0.02, 128, "uint8")
    i1 += [_init(np.array([0]), "st", np.int64), _init(np.array([2]), "en", np.int64), _init(np.array([3]), "ax", np.int64)]
    n1.append(helper.make_node("Slice", ["x_d", "st", "en", "ax"], ["sl"]))
    io, no = _qdq_out("sl", "y", 0.03, 120, "uint8")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "requantizing Slice is not characterised" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a constant Pad onto other parameters (measured to differ from the copy rule), or with a value != 0
    for value, ys in ((None, 0.03), (0.5, 0.02)):
        i1, n1 = _qdq_in("x", 0.02, 128, "uint8")
        i1.append(_init(np.array([0, 0, 1, 1, 0, 0, 1, 1]), "pd", np.int64))
        args = ["x_d", "pd"]
        if value is not None:
            i1.append(_init(np.float32(value), "cv", np.float32))
            args.append("cv")
        n1.append(helper.make_node("Pad", args, ["pp"], mode="constant"))
        io, no = _qdq_out("pp", "y", ys, 128, "uint8")
        m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        assert ("requantizing Pad" if value is None else "constant 0") in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    i1, n1 = _qdq_in("x", 0.02, 128, "uint8")
    n1.append(helper.make_node("AveragePool", ["x_d"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    io, no = _qdq_out("p", "y", 0.02, 128, "uint8")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "AveragePool" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # 16-bit activations ("a16w8"): ops without a rule (Div of two tensors here) are refused, naming the node
    i1, n1 = _qdq_in("a", 0.001, 32768, "uint16")
    i2, n2 = _qdq_in("b", 0.002, 32768, "uint16")
    n1 += n2 + [helper.make_node("Div", ["a_d", "b_d"], ["s"])]
    io, no = _qdq_out("s", "y", 0.003, 32768, "uint16")
    m = _model(n1 + no, i1 + i2 + io, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in "ab"],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "uint16" in (msg := _refused(tmp_path, m, f"qnn-htp-v{arch}")) and "Div" in msg
