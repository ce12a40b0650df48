"""refinterp/quant/htp.py against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0, QNN 2.51 host build of
libQnnHtp.so), every code compared exactly.  The emulator runs in a subprocess (_qnn_oracle.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from refinterp.quant import htp

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

ORACLE = Path(__file__).with_name("_qnn_oracle.py")
TP = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "uint16": TensorProto.UINT16,
      "int16": TensorProto.INT16}


def run_htp(tmp_path: Path, model, feeds: dict[str, np.ndarray], outputs: list[str], arch: str = "73"):
    mp, fp, op = tmp_path / "m.onnx", tmp_path / "feeds.npz", tmp_path / "out.npz"
    mp.write_bytes(model.SerializeToString())
    np.savez(fp, **feeds)
    r = subprocess.run([sys.executable, str(ORACLE), str(mp), str(fp), str(op), arch, *outputs],
                       capture_output=True, text=True, timeout=300)
    if r.returncode < 0:
        pytest.fail(f"finding: the HTP emulator aborted (signal {-r.returncode}) on this model")
    assert r.returncode == 0, r.stderr[-2000:]
    with np.load(op, allow_pickle=False) as f:
        return [f[n] for n in outputs]


def _model(nodes, inits, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def _init(value, name, dtype):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


# -- QuantizeLinear of a float input ---------------------------------------------------------------

def _stress_values(rng, scale: float, info, zp: int, n: int) -> np.ndarray:
    """Values whose x * (1/s) sits at a float16 rounding boundary (and one float32 ulp either side),
    at integer + 1/2 ties, uniform over the range, and the extremes."""
    v = rng.uniform(1, 120, n)
    ulp = 2.0 ** (np.floor(np.log2(v)) - 10)
    mid = (np.floor(v / ulp) + 0.5) * ulp * rng.choice([-1, 1], n)
    ties = (rng.integers(int(info.min), int(info.max) + 1, n) - zp + 0.5)
    uni = rng.uniform(float(info.min) - zp - 3, float(info.max) - zp + 3, n)
    x = (np.concatenate([mid, ties, uni]) * scale).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf)),
                        np.array([np.inf, -np.inf, np.nan, 3e38, -3e38, 0.0, -0.0], np.float32)])
    return x.astype(np.float32)


def quantize_model(scale: float, zp: int, dtype: str, n: int):
    """x (float, [1, n]) -> QuantizeLinear (output ``q``) -> DequantizeLinear (``y``)."""
    return _model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                   helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                  [_init(scale, "s", np.float32), _init(zp, "z", dtype)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("q", TP[dtype], None)])


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_quantize_linear_from_float(tmp_path, dtype):
    rng = np.random.default_rng({"uint8": 1, "int8": 2, "uint16": 3, "int16": 4}[dtype])
    info = np.iinfo(dtype)
    for trial in range(4):
        scale = float(np.float32(10 ** rng.uniform(-4, -0.5)))
        zp = 0 if dtype == "int16" else int(rng.integers(int(info.min), int(info.max) + 1))
        x = _stress_values(rng, scale, info, zp, 3000)
        (q,) = run_htp(tmp_path, quantize_model(scale, zp, dtype, x.size), {"x": x[None]}, ["q"])
        ours = htp.quantize_float(x, scale, zp, int(info.min), int(info.max))
        bad = np.flatnonzero(ours != q[0].astype(np.int64))
        assert bad.size == 0, (f"{dtype} scale {scale} zp {zp}: {bad.size} of {x.size} differ, e.g. x={x[bad[:3]]} "
                               f"htp={q[0][bad[:3]]} ours={ours[bad[:3]]}")


# -- Conv requantization, 8-bit ---------------------------------------------------------------------

def _conv1x1(w, xs, ws, ys, yz, n, bias=None, act="uint8"):
    xz = 128 if act == "uint8" else 0
    inits = [_init(xs, "xs", np.float32), _init(xz, "xz", act), _init(w, "w", np.int8),
             _init(ws, "ws", np.float32), _init(np.zeros(np.size(ws), np.int8) if np.size(ws) > 1 else 0, "wz", np.int8),
             _init(ys, "ys", np.float32), _init(yz, "yz", act)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0)]
    ins = ["xd", "wd"]
    if bias is not None:
        bs = (np.float32(xs) * np.asarray(ws, np.float32)).astype(np.float32)
        inits += [_init(bias, "b", np.int32), _init(bs, "bs", np.float32),
                  _init(np.zeros(np.size(bs), np.int32) if np.size(bs) > 1 else 0, "bz", np.int32)]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0))
        ins.append("bd")
    nodes += [helper.make_node("Conv", ins, ["c"]),
              helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    co, ci = w.shape[:2]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, ci, 1, n])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("yq", TP[act], None), helper.make_tensor_value_info("xq", TP[act], None)])


# (input channels, int32 bias, activation type, per-channel weight scales).  Per-channel weights with
# a bias are not here: the HTP re-derives a per-channel bias with an off-by-one toward zero on some
# channels (quant/htp.py, "not characterised").
CONV_CASES = [(2, False, "uint8", True), (16, True, "uint8", False), (64, False, "uint8", True),
              (256, True, "uint8", False), (8, True, "int8", False), (32, False, "int8", True)]


@pytest.mark.parametrize("ci,with_bias,act,per_channel", CONV_CASES, ids=lambda v: str(v))
def test_conv_requant(tmp_path, ci, with_bias, act, per_channel):
    rng = np.random.default_rng(ci * 7 + with_bias)
    info = np.iinfo(act)
    co, n = 4, 2048
    for trial in range(3):
        xs, ws0 = (float(np.float32(10 ** rng.uniform(-3, -1))) for _ in range(2))
        spread = rng.uniform(0.5, 2.0, co) if per_channel else np.ones(co)
        ws = (np.float32(ws0) * spread).astype(np.float32)
        ws = ws if per_channel else np.float32(ws0)
        M_target = 10 ** rng.uniform(-5, np.log10(4.0))  # k from 13 down to -6
        ys = float(np.float32(xs * float(np.max(ws)) / M_target))
        yz = int(rng.integers(int(info.min), int(info.max) + 1))
        w = rng.integers(-127, 128, (co, ci, 1, 1)).astype(np.int8)
        bias = rng.integers(-30000, 30000, co).astype(np.int32) if with_bias else None
        q = rng.integers(int(info.min), int(info.max) + 1, (ci, n))
        xz = 128 if act == "uint8" else 0
        x = ((q - xz) * np.float32(xs)).astype(np.float32)[None, :, None, :]
        yq, xq = run_htp(tmp_path, _conv1x1(w, xs, ws, ys, yz, n, bias, act), {"x": x}, ["yq", "xq"])
        xi = xq[0, :, 0, :].astype(np.int64) - xz
        assert np.array_equal(xi, q - xz)  # inputs are exact codes: the sweep tests the conv alone
        acc = w[:, :, 0, 0].astype(np.int64) @ xi
        if bias is not None:  # per-tensor weights (CONV_CASES): the bias tensor's scale is s_x * s_w
            bs = float(np.float32(np.float32(xs) * np.float32(ws)))
            acc = acc + htp.conv_bias(bias, bs, xs, float(ws))[:, None]
        for c in range(co):
            wc = ws[c] if per_channel else ws
            M = float(np.float32(np.float32(np.float32(xs) * wc) / np.float32(ys)))
            ours = htp.conv_requant(acc[c], M, yz, int(info.min), int(info.max))
            got = yq[0, c, 0].astype(np.int64)
            assert np.array_equal(ours, got), (f"channel {c} M {M:.4g}: {int((ours != got).sum())} of {n} differ")


@pytest.mark.parametrize("M", [0.0625, 0.07, 0.1, 0.125, 0.13, 0.2, 0.25, 0.3, 0.45, 0.5, 0.9, 1.0, 1.3, 2.5])
def test_conv_requant_every_accumulator_value(tmp_path, M):
    """acc = 3a + b over every pair of uint8 codes: each accumulator value in [-512, 508], every level
    boundary of the output, for multipliers on both sides of 1/8 and powers of two."""
    xs, ws = 0.02, 0.01
    ys = float(np.float32(xs * ws / M))
    qa, qb = np.repeat(np.arange(256), 256), np.tile(np.arange(256), 256)
    x = ((np.stack([qa, qb]) - 128) * np.float32(xs)).astype(np.float32)[None, :, None, :]
    w = np.array([[[[3]], [[1]]]], np.int8)
    (yq,) = run_htp(tmp_path, _conv1x1(w, xs, np.float32(ws), ys, 128, qa.size), {"x": x}, ["yq"])
    acc = 3 * (qa - 128) + (qb - 128)
    Mf = float(np.float32(np.float32(np.float32(xs) * np.float32(ws)) / np.float32(ys)))
    ours = htp.conv_requant(acc, Mf, 128, 0, 255)
    assert np.array_equal(ours, yq[0, 0, 0].astype(np.int64)), int((ours != yq[0, 0, 0]).sum())


def test_conv_multiplier_must_be_positive_and_finite():
    for bad in (0.0, -0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive finite"):
            htp.conv_requant_params(bad)
