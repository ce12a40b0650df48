"""uint8 weights with a zero point (older ONNX Runtime quantizers' default, ``QuantType.QUInt8``) on
Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0) against the ``qnn-htp-v68`` / ``qnn-htp-v73`` schemes:
the HTP re-quantizes every output channel whose zero-point-subtracted codes leave int8 to symmetric
int8 with a 12-bit scale factor (refinterp/quant/htp_weights.py), except in its stride-2 depthwise
kernel, which takes the codes as they are.  Every QuantizeLinear output is compared code for code."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import MAIN, _check_many, _ep_refuses, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _conv_model(x_shape, w, ws, wz, bias, xs, xz, ys, yz, wtype=np.uint8, act="uint8", **attrs):
    """x -> Q/DQ (``act``) -> Conv(DQ(w with zero point wz), DQ(bias)) -> Q -> DQ."""
    inits, nodes = _qdq_in("x", xs, xz, act)
    inits += [_init(w, "w", wtype), _init(ws, "ws", np.float32), _init(wz, "wz", wtype)]
    nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0))
    ins = ["x_d", "wd"]
    if bias is not None:
        bs = (F(xs) * np.asarray(ws, F)).astype(F)
        inits += [_init(bias, "b", np.int32), _init(bs, "bs", np.float32),
                  _init(np.zeros(np.size(bs), np.int32) if np.size(bs) > 1 else 0, "bz", np.int32)]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0))
        ins.append("bd")
    nodes.append(helper.make_node("Conv", ins, ["c"], **attrs))
    i2, n2 = _qdq_out("c", "y", ys, yz, act)
    return _model(nodes + n2, inits + i2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])


@pytest.mark.parametrize("arch", MAIN)
def test_every_accumulator_of_two_inputs(tmp_path, arch):
    """1x1 convolutions over every pair of input codes: each output channel has two weights whose
    zero-point-subtracted codes (d1, d2) leave int8 on the positive side (zero point 0) or the
    negative side (zero point 255), so the HTP's scale factor rh, the re-quantized weights and the
    folded output zero point are pinned over 65,536 accumulators per channel."""
    a, b = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    q = np.stack([a.ravel(), b.ravel()])
    pairs = [(128, 0), (128, 100), (130, 120), (145, 100), (155, 3), (200, 100), (235, 17), (255, 1), (255, 100),
             (100, 50)]  # the last fits int8: used as it is
    jobs = []
    rng = np.random.default_rng(11)
    for zw in (0, 255):
        w = np.array([(p if zw == 0 else (zw - p[0], zw - p[1])) for p in pairs], np.uint8).reshape(-1, 2, 1, 1)
        for yz in (3, int(rng.integers(100, 250))):
            xs, ws, xz = 0.01, 0.004, int(rng.integers(0, 256))
            ys = float(F(xs * ws * 255))  # M = 1 / 255: one weight of 255 spans the output's 8 bits
            m = _conv_model((1, 2, 1, q.shape[1]), w, ws, zw, None, xs, xz, ys, yz)
            jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)[None, :, None, :]}))
    assert _check_many(tmp_path, jobs, arch) == 4 * (2 + len(pairs)) * 65536  # the quantized input and y


KINDS = ["conv3x3", "conv1x1_128", "dw_s1", "dw_s2"]


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("kind", KINDS)
def test_layers(tmp_path, arch, kind):
    """Random layers: weight zero points 0 .. 255 over random uint8 weights (most channels leave int8),
    int32 biases up to +-30,000 on half of them, multipliers 3e-4 .. 3 (stride-2 depthwise: below 1/2,
    its kernel's measured range)."""
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    jobs = []
    for trial in range(6):
        C, H = (128, 7) if kind == "conv1x1_128" else (16, 11)
        kk = 1 if kind == "conv1x1_128" else 3
        O, cg, group = (C, 1, C) if kind.startswith("dw") else (8, C, 1)
        stride = 2 if kind == "dw_s2" else 1
        xs, ws = (float(F(10 ** rng.uniform(-3, -1))) for _ in range(2))
        M = 10 ** rng.uniform(-3.5, np.log10(0.45) if kind == "dw_s2" else np.log10(3.0))
        ys = float(F(xs * ws / M))
        xz, yz, wz = (int(rng.integers(0, 256)) for _ in range(3))
        w = rng.integers(0, 256, (O, cg, kk, kk)).astype(np.uint8)
        bias = rng.integers(-30000, 30000, O).astype(np.int32) if trial % 2 else None
        m = _conv_model((1, C, H, H), w, ws, wz, bias, xs, xz, ys, yz, group=group, pads=[kk // 2] * 4,
                        strides=[stride, stride])
        q = rng.integers(0, 256, (1, C, H, H))
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("kind", ["conv3x3", "conv1x1_128", "dw_s1"])
def test_layers_16bit_activations(tmp_path, arch, kind):
    """uint16 activations with uint8 weights (``get_qnn_qdq_config(activation_type=QUInt16)``'s default
    weights): the same re-quantization to symmetric int8, then the arch's 16-bit convolution rule with
    the per-channel multipliers f32(M rh) (v68: the bias folded as b / rh)."""
    act = "uint16"
    rng = np.random.default_rng(zlib.crc32((act + kind).encode()))
    info = np.iinfo(act)
    jobs = []
    for trial in range(6):
        C, H = (128, 7) if kind == "conv1x1_128" else (16, 11)
        kk = 1 if kind == "conv1x1_128" else 3
        O, cg, group = (C, 1, C) if kind.startswith("dw") else (8, C, 1)
        xs, ws = (float(F(10 ** rng.uniform(-5, -3))) for _ in range(2))
        M = 10 ** rng.uniform(-3.5, np.log10(3.0))
        ys = float(F(xs * ws / M))
        xz, yz = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
        wz = int(rng.integers(0, 256))
        w = rng.integers(0, 256, (O, cg, kk, kk)).astype(np.uint8)
        bias = rng.integers(-2 ** 22, 2 ** 22, O).astype(np.int32) if trial % 2 else None
        m = _conv_model((1, C, H, H), w, ws, wz, bias, xs, xz, ys, yz, act=act, group=group, pads=[kk // 2] * 4)
        q = rng.integers(int(info.min), int(info.max) + 1, (1, C, H, H))
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_int16_activations_with_uint8_weights_are_refused_as_the_qnn_ep_refuses_them(tmp_path):
    m = _conv_model((1, 4, 5, 5), np.full((8, 4, 1, 1), 200, np.uint8), 0.004, 100, None, 1e-4, 0, 1e-3, 0,
                    act="int16")
    assert "int16 activations with uint8 weights" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 4, 5, 5), "Unsupported nodes in QNN EP")


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("op,act", [(op, act) for op in ("Gemm", "MatMul") for act in ("uint8", "uint16")])
def test_gemm_matmul(tmp_path, arch, op, act):
    """uint8 B with a zero point: the same per-output-column re-quantization (Gemm with a bias); uint16
    activations: then the 16-bit rule."""
    rng = np.random.default_rng(zlib.crc32(op.encode()) + 5 + (act == "uint16"))
    B, K, N = 64, 96, 24
    top = np.iinfo(act).max
    jobs = []
    for trial in range(4):
        xs, ws = (float(F(10 ** rng.uniform(-3, -1))) for _ in range(2))
        ys = float(F(xs * ws * 40 * 128 / 10 ** rng.uniform(-1, 1) / (256 if act == "uint16" else 1)))
        xz, yz = (int(rng.integers(0, top + 1)) for _ in range(2))
        wz = int(rng.integers(0, 256))
        inits, nodes = _qdq_in("x", xs, xz, act)
        if op == "Gemm":
            w = rng.integers(0, 256, (N, K)).astype(np.uint8)
            bias = rng.integers(-30000, 30000, N).astype(np.int32)
            inits += [_init(w, "w", np.uint8), _init(ws, "ws", np.float32), _init(wz, "wz", np.uint8),
                      _init(bias, "b", np.int32), _init(F(F(xs) * F(ws)), "bs", np.float32), _init(0, "bz", np.int32)]
            nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                      helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"]),
                      helper.make_node("Gemm", ["x_d", "wd", "bd"], ["c"], transB=1)]
        else:
            w = rng.integers(0, 256, (K, N)).astype(np.uint8)
            inits += [_init(w, "w", np.uint8), _init(ws, "ws", np.float32), _init(wz, "wz", np.uint8)]
            nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                      helper.make_node("MatMul", ["x_d", "wd"], ["c"])]
        i2, n2 = _qdq_out("c", "y", ys, yz, act)
        m = _model(nodes + n2, inits + i2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, K])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        q = rng.integers(0, top + 1, (B, K))
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_weights_with_a_zero_point_not_measured_are_refused(tmp_path, arch):
    scheme = f"qnn-htp-v{arch}"
    w = np.full((8, 4, 1, 1), 200, np.uint8)
    # int8 weights with a zero point
    m = _conv_model((1, 4, 5, 5), w.astype(np.int8) // 2, 0.01, 3, None, 0.02, 128, 0.01, 128, wtype=np.int8)
    assert "int8 weights with a zero point" in _refused(tmp_path, m, scheme)
    # uint8 weights with per-channel scales and zero points (the QNN EP leaves the node unassigned: measured)
    m = _conv_model((1, 4, 5, 5), w, np.linspace(0.01, 0.02, 8).astype(F), np.arange(8, dtype=np.uint8), None,
                    0.02, 128, 0.01, 128)
    assert "does not take them onto the HTP" in _refused(tmp_path, m, scheme)
