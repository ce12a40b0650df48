"""Conv / ConvTranspose / Gemm biases that are not a QDQ unit's int32 DequantizeLinear (passes/ort_weight_bias.py), against Qualcomm's HTP
emulation (onnxruntime-qnn 2.7.0): a float bias (ONNX Runtime quantizes it to int32 before the QNN EP sees the graph,
rounding half to even), a bias read through Identity, a bias of zeros on another layer's scale (an exporter sharing
equal constants), and a uint16 bias of zeros (get_qnn_qdq_config's form of a shared bias), which stays refused.
Found on torchvision's SqueezeNet 1.1 quantized by quantize_static: 36 of its 50 Conv layers were refused."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import refinterp
from refinterp.errors import UnsupportedOpError
from tests.conformance.test_ort_weight_bias import _case
from tests.conformance.test_qnn_htp_ops import _check_many, _conv_model

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _with_bias(m, bias_nodes: list, bias_inits: list, name: str):
    """``m`` (a _conv_model with an int32 bias) with the Conv's bias replaced by ``name``."""
    nodes = [n for n in m.graph.node if not (n.op_type == "DequantizeLinear" and n.input[0] == "b")]
    for n in nodes:
        if n.op_type == "Conv":
            n.input[2] = name
    inits = [i for i in m.graph.initializer if i.name not in ("b", "bs", "bz")] + bias_inits
    del m.graph.node[:]
    m.graph.node.extend(bias_nodes + nodes)
    del m.graph.initializer[:]
    m.graph.initializer.extend(inits)
    return m


def _layer(rng, pc: bool):
    C, O, H = 8, 16, 6
    xs = float(F(10 ** rng.uniform(-2.5, -1.5)))
    ws0 = F(10 ** rng.uniform(-2.5, -1.5))
    ws = (ws0 * rng.uniform(0.5, 2, O)).astype(F) if pc else ws0
    ys = float(F(xs * float(np.max(ws)) * 10 ** rng.uniform(0.5, 1.5)))
    w = rng.integers(-127, 128, (O, C, 3, 3)).astype(np.int8)
    codes = rng.integers(-5000, 5000, O).astype(np.int32)
    q = rng.integers(0, 256, (1, C, H, H))
    return (C, O, H, xs, ws, ys, w, codes), {"x": ((q - 128) * F(xs)).astype(F)}


@pytest.mark.parametrize("arch", ["68", "73"])
def test_float_bias(tmp_path, arch):
    """Float biases off the accumulator grid by 0.25 .. 0.5 steps (half-way ones included), per-tensor and
    per-channel weights, directly and through Identity: every code equal."""
    rng = np.random.default_rng(3)
    jobs, ties = [], 0
    for trial in range(8):
        (C, O, H, xs, ws, ys, w, codes), feeds = _layer(rng, pc=trial % 2 == 0)
        m = _conv_model((1, C, H, H), w, ws, codes, xs, 128, ys, 128, "uint8", pads=[1, 1, 1, 1])
        acc = (F(xs) * np.asarray(ws, F)).astype(F)
        real = ((codes + rng.choice([0.5, -0.5, 0.25, 0.4999, 0.5001], O)) * acc).astype(F)
        quotient = (real / acc).astype(F).astype(np.float64)
        ties += int(np.sum((quotient % 1 == 0.5) & (np.rint(quotient) % 2 == 0)))  # half to even is not half up
        through = trial % 4 < 2
        nodes = [helper.make_node("Identity", ["bf"], ["bi"])] if through else []
        jobs.append((_with_bias(m, nodes, [numpy_helper.from_array(real, "bf")], "bi" if through else "bf"), feeds))
    assert ties >= 4  # the rounding can be told from half up here
    assert _check_many(tmp_path, jobs, arch) == len(jobs) * (8 + 16) * 36


@pytest.mark.parametrize("arch", ["68", "73"])
def test_float_bias_convtranspose_gemm(tmp_path, arch):
    """ORT's transformer quantizes a ConvTranspose's and a Gemm's float bias too (test_ort_weight_bias.py's layers,
    uint8 and int8, per-tensor and per-channel Gemm weights): every code equal."""
    jobs = [_case(kind, seed)[:2] for kind in ("conv_transpose", "gemm", "gemm_transb") for seed in range(3)]
    assert _check_many(tmp_path, jobs, arch) > 0


@pytest.mark.parametrize("arch", ["68", "73"])
def test_zero_bias_on_another_scale_and_uint16_zero_bias(tmp_path, arch):
    """int32 zeros on a foreign scale through Identity run as no bias (exact); uint16 zeros stay refused (the HTP
    computes such a Conv otherwise, measured on a16 SqueezeNet layers), and a nonzero int32 bias on a foreign scale is
    refused where the HTP adds the codes as they are (v68)."""
    rng = np.random.default_rng(5)
    (C, O, H, xs, ws, ys, w, codes), feeds = _layer(rng, pc=True)
    m = _conv_model((1, C, H, H), w, ws, codes, xs, 128, ys, 128, "uint8", pads=[1, 1, 1, 1])

    def dq_bias(values, dtype, scale):
        inits = [numpy_helper.from_array(np.asarray(values, dtype), "b0"), numpy_helper.from_array(F(scale), "b0s"),
                 numpy_helper.from_array(np.zeros((), dtype), "b0z")]
        nodes = [helper.make_node("DequantizeLinear", ["b0", "b0s", "b0z"], ["b0d"]),
                 helper.make_node("Identity", ["b0d"], ["bi"])]
        return nodes, inits

    zero = _with_bias(m, *dq_bias(np.zeros(O), np.int32, 3e-7), "bi")
    assert _check_many(tmp_path, [(zero, feeds)], arch) == (8 + 16) * 36
    for kind, refused in (("uint16 zeros", True), ("int32 codes", arch == "68")):
        (C, O, H, xs, ws, ys, w, codes), feeds = _layer(rng, pc=False)
        m = _conv_model((1, C, H, H), w, ws, codes, xs, 128, ys, 128, "uint8", pads=[1, 1, 1, 1])
        values, dtype = (np.zeros(O), np.uint16) if kind == "uint16 zeros" else (codes, np.int32)
        m = _with_bias(m, *dq_bias(values, dtype, 3e-7), "bi")
        p = tmp_path / "probe.onnx"
        p.write_bytes(m.SerializeToString())
        if refused:
            with pytest.raises(UnsupportedOpError):
                refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}")
        else:  # v73 re-derives the bias from its own scale (htp.conv_bias)
            assert _check_many(tmp_path, [(m, feeds)], arch) == (8 + 16) * 36
