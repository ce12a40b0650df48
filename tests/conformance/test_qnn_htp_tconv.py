"""QDQ ConvTranspose and dilated Conv under ``qnn-htp-v68`` / ``qnn-htp-v73`` against Qualcomm's HTP
emulation: the exact accumulator of the transposed convolution (kernels/onnxruntime/gemm.py ``tconv_acc``)
through the arch's convolution requantization and bias rule, as for Conv (kernels/qnn_htp/gemm.py); dilated
convolutions at stride 1 (and depthwise ones at stride 2) on the same rules, dilated strided ones refused."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.test_qnn_htp_ops import ARCH_ACT, MAIN, _check_many, _conv_model, _ep_refuses, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _tconv_model(x_shape, w, ws, bias, xs, xz, ys, yz, act, **attrs):
    """x -> Q/DQ -> ConvTranspose(DQ(w), DQ(bias)) -> Q -> DQ; weights (C, M, kh, kw), per output channel
    (axis 1) when ``ws`` is an array."""
    return _conv_model(x_shape, w, ws, bias, xs, xz, ys, yz, act, op="ConvTranspose", w_axis=1, **attrs)


# (kernel, stride, pads or auto_pad, output_padding, dilation)
GEOMETRIES = [(2, 2, 0, 0, 1), (3, 2, 1, 1, 1), (4, 2, 1, 0, 1), (3, 1, 1, 0, 1), (1, 1, 0, 0, 1), (5, 3, 2, 2, 1),
              (3, 2, "SAME_UPPER", 0, 1), (4, 3, "SAME_LOWER", 0, 1)]


def _jobs(act: str, seed: int, sixteen: bool = False):
    """Every geometry, per-tensor and per-channel weights, with and without a bias, multipliers over the
    requantization shifts (M from 3e-4 to 3)."""
    info = np.iinfo(act)
    rng = np.random.default_rng(seed)
    C, M, H = 5, 6, 10
    jobs = []
    for j, (k, s, p, op, d) in enumerate(GEOMETRIES):
        for pc in (False, True):
            w = rng.integers(-127, 128, (C, M, k, k)).astype(np.int8)
            xs = float(rng.choice([0.02, 0.0031, 0.11]))
            Ms = np.exp(rng.uniform(np.log(3e-4), np.log(3.0), M if pc else 1))
            ys = float(rng.uniform(0.01, 0.2))
            ws = (Ms * ys / xs).astype(F) if pc else F(Ms[0] * ys / xs)
            bias = None if j % 3 == 2 else rng.integers(-3000 * 2 ** (8 * sixteen), 3000 * 2 ** (8 * sixteen), M).astype(np.int32)
            xz, yz = (int(v) for v in rng.integers(int(info.min), int(info.max) + 1, 2))
            xq = rng.integers(int(info.min), int(info.max) + 1, (1, C, H, H))
            x = ((xq - xz) * F(xs)).astype(F)
            attrs = dict(kernel_shape=[k, k], strides=[s, s], dilations=[d, d])
            attrs.update(auto_pad=p) if isinstance(p, str) else attrs.update(pads=[p] * 4)
            if op:
                attrs["output_padding"] = [op, op]
            jobs.append((_tconv_model((1, C, H, H), w, ws, bias, xs, xz, ys, yz, act, **attrs), {"x": x}))
    return jobs


@pytest.mark.parametrize("arch,act", ARCH_ACT)
def test_conv_transpose(tmp_path, arch, act):
    assert _check_many(tmp_path, _jobs(act, 11 + (act == "int8")), arch) > 25000


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint16", "int16")])
def test_conv_transpose_16bit(tmp_path, arch, act):
    """16-bit activations: the zero-point term Z of each output's phase (gemm.py ``_tconv_phase_z``)."""
    assert _check_many(tmp_path, _jobs(act, 21 + (act == "int16"), sixteen=True), arch) > 25000


def test_refusals(tmp_path):
    """A dilated ConvTranspose (the QNN EP leaves it unassigned, asserted) and two groups (not measured)
    are refused naming the node."""
    w = np.ones((4, 2, 3, 3), np.int8)
    m = _tconv_model((1, 4, 5, 5), w, F(0.01), None, 0.02, 128, 0.05, 128, "uint8", strides=[2, 2],
                     dilations=[2, 2])
    assert "dilated ConvTranspose" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 4, 5, 5), "Unsupported nodes in QNN EP")
    m = _tconv_model((1, 4, 5, 5), w, F(0.01), None, 0.02, 128, 0.05, 128, "uint8", strides=[2, 2], group=2)
    assert "group 2" in _refused(tmp_path, m, "qnn-htp-v68")


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8")])
def test_conv_transpose_every_accumulator(tmp_path, arch, act):
    """A 1x1 ConvTranspose whose output channel c sees acc = a + 127 * b for every pair of input codes, at
    its own multiplier (per-channel weights, k from -5 to 8), with a bias per channel."""
    info = np.iinfo(act)
    xz = 128 if act == "uint8" else 0
    a, b = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    q = np.stack([a.ravel(), b.ravel()]) + int(info.min)
    Ms = np.array([3.5, 1.3, 0.71, 0.2, 0.093, 0.031, 0.0087, 0.0023, 0.00061, 0.00031])
    xs, ys = 0.01, 0.004
    w = np.tile(np.array([1, 127], np.int8).reshape(2, 1, 1, 1), (1, Ms.size, 1, 1))
    bias = np.random.default_rng(5).integers(-20000, 20000, Ms.size).astype(np.int32)
    x = ((q - xz) * F(xs)).astype(F)[None, :, None, :]
    m = _tconv_model((1, 2, 1, q.shape[1]), w, (Ms * ys / xs).astype(F), bias, xs, xz, ys, int(info.min) + 9, act)
    assert _check_many(tmp_path, [(m, {"x": x})], arch) == 65536 * (Ms.size + 2)  # and the input codes


# (dilations, strides, channels, group, kernel)
DILATED = [((2, 2), (1, 1), 4, 1, 3), ((3, 3), (1, 1), 4, 1, 3), ((2, 1), (1, 1), 4, 1, 3), ((2, 2), (1, 1), 4, 1, 2),
           ((2, 2), (1, 1), 8, 8, 3), ((2, 2), (2, 2), 8, 8, 3)]


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8")])
def test_dilated_conv(tmp_path, arch, act):
    """Dilated Conv at stride 1 and dilated depthwise Conv at strides 1 and 2, with biases, at scales whose
    products fall on rounding ties (0.02, 0.01, 0.05): the convolution rules."""
    info = np.iinfo(act)
    rng = np.random.default_rng(31 + (act == "int8"))
    jobs = []
    for dil, st, C, G, k in DILATED:
        M = C if G > 1 else 4
        w = rng.integers(-127, 128, (M, C // G, k, k)).astype(np.int8)
        xz, yz = (int(v) for v in rng.integers(int(info.min), int(info.max), 2))
        xq = rng.integers(int(info.min), int(info.max) + 1, (1, C, 24, 24))
        m = _conv_model((1, C, 24, 24), w, F(0.01), rng.integers(-1000, 1000, M).astype(np.int32), 0.02, xz, 0.05, yz,
                        act, kernel_shape=[k, k], dilations=list(dil), strides=list(st), pads=[2] * 4, group=G)
        jobs.append((m, {"x": ((xq - xz) * F(0.02)).astype(F)}))
    assert _check_many(tmp_path, jobs, arch) > 20000


def test_dilated_strided_conv_is_refused(tmp_path):
    """Dilation 2 with strides (2, 2) or (2, 1): another kernel on the HTP (kernels/qnn_htp/MEASURED.md: the
    convolution rule missed 35-92 codes in 4,096), refused naming the node."""
    w = np.ones((4, 3, 3, 3), np.int8)
    for st in ([2, 2], [2, 1]):
        m = _conv_model((1, 3, 16, 16), w, F(0.01), None, 0.02, 128, 0.05, 128, "uint8", kernel_shape=[3, 3],
                        dilations=[2, 2], strides=st, pads=[2] * 4)
        for arch in MAIN:
            assert "dilated Conv with strides" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
