"""torch quantized conv2d / linear (engines fbgemm, qnnpack, x86, onednn) vs the matching refinterp
schemes at 0 differing elements: per-tensor and per-channel weights, float bias (= the int32 model
bias dequantized), fused ReLU, exact ties (power-of-two scales), odd zero points, saturation."""
from __future__ import annotations

import numpy as np
import pytest

from _torch_quant import F32, SCHEME, one_node, qp, qtensor, qweight, run, tie_scales, tinfo

torch = pytest.importorskip("torch")
qF = pytest.importorskip("torch.ao.nn.quantized.functional")
ENGINES = [e for e in ("fbgemm", "qnnpack", "x86", "onednn") if e in torch.backends.quantized.supported_engines]


def _case(rng, i, per_channel):
    cin, cout = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    xs, ys = tie_scales(rng, pow2=i % 2 == 0)
    ys = F32(ys * (0.05 if i % 5 == 4 else 1.0))  # saturation
    zx = int(rng.integers(0, 128)) * 2 + 1 if i % 3 == 0 else int(rng.integers(0, 256))  # odd zps
    zy = int(rng.integers(0, 128)) * 2 + 1 if i % 3 != 2 else int(rng.integers(0, 256))
    if i % 2 == 0:
        ws = F32(2.0) ** -rng.integers(3, 7, cout if per_channel else 1).astype(F32)
    else:
        ws = rng.uniform(0.005, 0.05, cout if per_channel else 1).astype(F32)
    bq = rng.integers(-3000, 3000, cout).astype(np.int32)
    return cin, cout, xs, zx, ws, zy, ys, bq


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_conv2d(engine, per_channel, relu):
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(10 + per_channel + 2 * relu)
    diff = total = 0
    for i in range(12):
        cin, cout, xs, zx, ws, zy, ys, bq = _case(rng, i, per_channel)
        if relu:
            zy = 0  # a fused ReLU output: the qdq pass folds Relu when zp == qmin
        x = rng.integers(0, 256, (1, cin, 7, 7)).astype(np.uint8)
        w = rng.integers(-128, 128, (cout, cin, 3, 3)).astype(np.int8)
        aw = (xs * ws).astype(F32) * np.ones(cout, F32)
        bias_f = (bq.astype(F32) * aw).astype(F32)
        X, W = qtensor(torch, x, xs, zx), qweight(torch, w, ws)
        if relu:
            packed = torch.ops.quantized.conv2d_prepack(W, torch.from_numpy(bias_f), [1, 1], [1, 1], [1, 1], 1)
            ref = torch.ops.quantized.conv2d_relu(X, packed, float(ys), zy)
        else:
            ref = qF.conv2d(X, W, torch.from_numpy(bias_f), padding=1, scale=float(ys), zero_point=zy)
        ref = ref.int_repr().numpy()
        g = one_node("Conv", [tinfo("x", x.shape, "uint8", qp(xs, zx)),
                              tinfo("w", None, "int8", qp(ws, np.zeros(ws.size), 0 if per_channel else None), w),
                              tinfo("b", None, "int32", None, bq)],
                     tinfo("y", ref.shape, "uint8", qp(ys, zy)),
                     kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], group=1, layout="NCHW",
                     weight_layout="OIHW")
        got = run(g, SCHEME[engine], {"x": x})
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_linear(engine, per_channel, relu):
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(20 + per_channel + 2 * relu)
    diff = total = 0
    for i in range(12):
        cin, cout, xs, zx, ws, zy, ys, bq = _case(rng, i, per_channel)
        cin *= 5
        if relu:
            zy = 0
        x = rng.integers(0, 256, (6, cin)).astype(np.uint8)
        w = rng.integers(-128, 128, (cout, cin)).astype(np.int8)
        aw = (xs * ws).astype(F32) * np.ones(cout, F32)
        bias_f = (bq.astype(F32) * aw).astype(F32)
        X, W = qtensor(torch, x, xs, zx), qweight(torch, w, ws)
        if relu:
            packed = torch.ops.quantized.linear_prepack(W, torch.from_numpy(bias_f))
            ref = torch.ops.quantized.linear_relu(X, packed, float(ys), zy).int_repr().numpy()
        else:
            ref = qF.linear(X, W, torch.from_numpy(bias_f), scale=float(ys), zero_point=zy).int_repr().numpy()
        g = one_node("Gemm", [tinfo("x", x.shape, "uint8", qp(xs, zx)),
                              tinfo("w", None, "int8", qp(ws, np.zeros(ws.size), 0 if per_channel else None), w),
                              tinfo("b", None, "int32", None, bq)],
                     tinfo("y", ref.shape, "uint8", qp(ys, zy)), transB=1)
        got = run(g, SCHEME[engine], {"x": x})
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"


@pytest.mark.parametrize("engine", ENGINES)
def test_conv1x1_near_tie_sweep(engine):
    """Every input code through 256 output channels with random scales and float biases: about
    1M requantizations, enough to hit outputs within one float32 ulp of a .5 tie, where the
    engines' float orders (product vs separate scales, zero point before / after rounding) differ."""
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(30)
    diff = total = 0
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)
    for i in range(16):
        c = 256
        xs, zx = F32(rng.uniform(0.01, 0.05)), int(rng.integers(0, 256))
        ys, zy = F32(rng.uniform(0.01, 0.2)), int(rng.integers(0, 256))
        ws = (rng.uniform(0.002, 0.05, c) if i % 2 else np.full(1, rng.uniform(0.002, 0.05))).astype(F32)
        bq = rng.integers(-5000, 5000, c).astype(np.int32)
        w = rng.integers(-128, 128, (c, 1, 1, 1)).astype(np.int8)
        bias_f = (bq.astype(F32) * (xs * ws).astype(F32)).astype(F32)
        ref = qF.conv2d(qtensor(torch, x, xs, zx), qweight(torch, w, ws), torch.from_numpy(bias_f),
                        scale=float(ys), zero_point=zy).int_repr().numpy()
        g = one_node("Conv", [tinfo("x", x.shape, "uint8", qp(xs, zx)),
                              tinfo("w", None, "int8", qp(ws, np.zeros(ws.size), 0 if ws.size > 1 else None), w),
                              tinfo("b", None, "int32", None, bq)],
                     tinfo("y", ref.shape, "uint8", qp(ys, zy)),
                     kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1], group=1, layout="NCHW",
                     weight_layout="OIHW")
        got = run(g, SCHEME[engine], {"x": x})
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"
