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


def run_htp_batch(tmp_path: Path, manifest: list) -> None:
    """Run [model, feeds, out, arch, names] jobs in one emulator subprocess; an abort is a finding."""
    import json
    (tmp_path / "jobs.json").write_text(json.dumps(manifest))
    r = subprocess.run([sys.executable, str(ORACLE), "--batch", str(tmp_path / "jobs.json")],
                       capture_output=True, text=True, timeout=600)
    if r.returncode < 0:
        pytest.fail(f"finding: the HTP emulator aborted (signal {-r.returncode})")
    assert r.returncode == 0, r.stderr[-2000:]


def htp_batch_outputs(tmp_path: Path, jobs: list, arch: str) -> list[dict[str, np.ndarray]]:
    """The named outputs of each (model, feeds, names) job from the emulator, every model in one subprocess
    (``run_htp_batch``); the models are written to tmp_path as m<i>.onnx, as given."""
    manifest = []
    for i, (m, feeds, names) in enumerate(jobs):
        mp, fp, op = tmp_path / f"m{i}.onnx", tmp_path / f"f{i}.npz", tmp_path / f"o{i}.npz"
        mp.write_bytes(m.SerializeToString())
        np.savez(fp, **feeds)
        manifest.append([str(mp), str(fp), str(op), arch, list(names)])
    run_htp_batch(tmp_path, manifest)
    outs = []
    for _, _, op, _, names in manifest:
        with np.load(op, allow_pickle=False) as f:
            outs.append({k: f[k] for k in names})
    return outs


def check_manifest(manifest: list) -> int:
    """refinterp's Session (scheme qnn-htp-v<arch>) on every job of a ``run_htp_batch`` manifest: each named
    output equals the emulator's, code for code; returns the number of codes compared."""
    import refinterp

    checked = 0
    for mp, fp, op, arch, names in manifest:
        with np.load(op, allow_pickle=False) as f, np.load(fp, allow_pickle=False) as fd:
            ours = refinterp.Session(refinterp.load(mp), f"qnn-htp-v{arch}").run({k: fd[k] for k in fd.files},
                                                                                 capture=names)
            for n in names:
                bad = int(np.count_nonzero(np.asarray(ours[n]) != f[n]))
                assert bad == 0, f"{mp} {n}: {bad} of {f[n].size} codes differ"
                checked += f[n].size
    return checked


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
# a bias: test_per_channel_bias below.
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


def _bias_layers() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(bias codes, weight scales, weight codes of a 1 x ci 1x1 convolution) per model.  With every input
    code at 255 (uint8, zero point 128) a channel's accumulator is 127 * sum(w): the weights cancel most
    of a large bias so that the output shows the bias the HTP added to the last unit."""
    F = np.float32
    w0, layers = 0.0031, []

    def plain(bias, ws):
        return np.asarray(bias, np.int32), np.asarray(ws, F), np.zeros((len(bias), 1, 1, 1), np.int8)

    probe = np.arange(-120, 121)
    for top in (121, 126, 127, 128, 200, 1000, 4096):  # one weight scale; the largest bias decides
        layers.append(plain(np.append(probe, top), np.full(probe.size + 1, w0)))
    half = np.arange(-60, 61)
    for t in (1.25, 1.5, 1.75):  # two weight scales: the codes move alike in both groups
        for top in (128, 1000):
            layers.append(plain(np.concatenate([half, half, [top]]),
                                np.concatenate([np.full(121, w0), np.full(122, w0 * t)])))
    for top in (2 ** 20, 10 ** 6):  # biases up to 2^20, read through accumulator offsets
        big = np.append(np.round(np.linspace(0.01, 1.0, 400) * top).astype(np.int64), top)
        cancel = -np.round(big / 127).astype(np.int64)
        cancel[-1] = 0
        w = np.zeros((big.size, 80), np.int64)
        for c, v in enumerate(cancel):
            full, rem = divmod(abs(int(v)), 127)
            w[c, :full], w[c, full:full + 1] = 127 * np.sign(v), rem * np.sign(v)
        layers.append((big.astype(np.int32), np.full(big.size, w0, F), w.astype(np.int8)[:, :, None, None]))
    rng = np.random.default_rng(11)
    for _ in range(8):  # random per-channel scales, one large bias among small ones
        ws = (F(10 ** rng.uniform(-3, -1)) * rng.uniform(1.0, 3.0, 64)).astype(F)  # multipliers 1 .. 3
        bias = rng.integers(-40, 41, 64)
        bias[rng.integers(64)] = int(rng.choice([-1, 1]) * rng.integers(31, 5000))
        layers.append(plain(bias, ws))
    return layers


def test_per_channel_bias(tmp_path):
    """v73, per-channel weights with a bias (htp.conv_bias_per_channel): the outputs of 1x1 layers whose
    multipliers are at least 1 (every bias step shows) equal the rule on 4,445 channels: one weight
    scale with largest biases 121 .. 4096 (the known band of codes moved toward zero at 128; nothing
    moves at 127), two weight scales, biases up to 2^20, random per-channel scales.  The per-tensor rule
    applied per channel is wrong on 1,021 of them."""
    F = np.float32
    xs, jobs, expected, naive_wrong, total = 0.02, [], [], 0, 0
    for i, (bias, ws, w) in enumerate(_bias_layers()):
        ci = w.shape[1]
        if not w.any():
            w = np.ones((bias.size, 1, 1, 1), np.int8)
            xcode = 128  # every accumulator 0
        else:
            xcode = 255
        ys = float(F(F(xs) * ws.min()))
        model = _conv1x1(w, xs, ws, ys, 128, 1, bias)
        mp, fp, op = tmp_path / f"m{i}.onnx", tmp_path / f"f{i}.npz", tmp_path / f"o{i}.npz"
        mp.write_bytes(model.SerializeToString())
        np.savez(fp, x=np.full((1, ci, 1, 1), (xcode - 128) * F(xs), F))
        jobs.append([str(mp), str(fp), str(op), "73", ["yq"]])
        acc = w[:, :, 0, 0].astype(np.int64).sum(1) * (xcode - 128)
        rule = htp.conv_bias_per_channel(bias, xs, ws)
        naive = np.array([htp.conv_bias(np.array([b]), float(F(F(xs) * s)), xs, float(s))[0] for b, s in zip(bias, ws)])
        Ms = [float(F(F(F(xs) * s) / F(ys))) for s in ws]
        want = np.array([htp.conv_requant(np.array([a + r]), M, 128, 0, 255)[0] for a, r, M in zip(acc, rule, Ms)])
        alt = np.array([htp.conv_requant(np.array([a + r]), M, 128, 0, 255)[0] for a, r, M in zip(acc, naive, Ms)])
        expected.append((want, alt))
    run_htp_batch(tmp_path, jobs)
    for (mp, _, op, _, _), (want, alt) in zip(jobs, expected):
        with np.load(op, allow_pickle=False) as f:
            got = f["yq"].ravel().astype(np.int64)
        inside = (want > 0) & (want < 255)  # the largest-bias channel may saturate: not a readout
        assert inside.sum() >= got.size - 1, mp
        bad = np.flatnonzero(inside & (got != want))
        assert bad.size == 0, f"{mp}: {bad.size} channels differ, e.g. {got[bad[:4]]} vs {want[bad[:4]]}"
        naive_wrong += int((inside & (got != alt)).sum())
        total += int(inside.sum())
    assert total > 4400 and naive_wrong > 1000, (total, naive_wrong)


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


def _a16_conv(w, xs, ws, ys, n):
    """1 x ci x 1 x n uint16 -> Conv(int8 w) -> uint16, zero points 32768, no bias."""
    inits = [_init(xs, "xs", np.float32), _init(32768, "xz", np.uint16), _init(w, "w", np.int8),
             _init(ws, "ws", np.float32), _init(0, "wz", np.int8), _init(ys, "ys", np.float32),
             _init(32768, "yz", np.uint16)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    return _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, w.shape[1], 1, n])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                   helper.make_tensor_value_info("yq", TP["uint16"], None),
                   helper.make_tensor_value_info("xq", TP["uint16"], None)])


@pytest.mark.parametrize("M", [0.0020106, 0.0072999, 0.026772, 0.122888, 0.545601, 1.37])
def test_a16_requant_every_input_code(tmp_path, M):
    """16-bit requantization (htp.conv16_requant): every uint16 input code through four channels whose
    accumulators reach +-127 * 32768 (weights sized to keep the output in range), so g = A >> 8 covers
    its whole range; the earlier two-rounding form misses codes at these multipliers."""
    xs, ws = 1e-4, 0.01
    ys = float(np.float32(np.float32(xs) * np.float32(ws) / M))
    top = int(np.clip(30000 / (M * 256 * 128), 1, 127))
    w = np.array([top, -top, max(1, top // 2), max(1, top // 3)], np.int8).reshape(4, 1, 1, 1)
    q = np.arange(65536)
    x = ((q - 32768) * np.float32(xs)).astype(np.float32).reshape(1, 1, 1, -1)
    yq, xq = run_htp(tmp_path, _a16_conv(w, xs, np.float32(ws), ys, q.size), {"x": x}, ["yq", "xq"])
    assert np.array_equal(xq.ravel().astype(np.int64), q)
    g = (w[:, 0, 0, 0].astype(np.int64)[:, None] * (q - 32768)[None, :]) >> 8
    Mf = float(np.float32(np.float32(np.float32(xs) * np.float32(ws)) / np.float32(ys)))
    got = yq[0, :, 0, :].astype(np.int64)
    ours = htp.conv16_requant(g, Mf, 32768, 0, 65535)
    assert np.array_equal(ours, got), int((ours != got).sum())
    old = np.clip(np.floor(np.floor(g * Mf * 2.0 ** 16 + 0.5) / 256 + 0.5) + 32768, 0, 65535)
    assert np.any(old != got) or M > 0.5  # at the largest multipliers |g| is small: both forms agree


def test_conv_multiplier_must_be_positive_and_finite():
    for bad in (0.0, -0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive finite"):
            htp.conv_requant_params(bad)
