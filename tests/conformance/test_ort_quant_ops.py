"""Single-op sweeps of quantized ONNX ops: refinterp ``onnxruntime-cpu`` vs onnxruntime (CPU EP) and
``onnx-reference`` vs onnx.reference.ReferenceEvaluator, 0 differing elements.

Every case is a one-node model (data inputs are graph inputs, weights / scales / zero points are
initializers) saved to tmp_path and loaded by refinterp's ONNX loader.  Scales and zero points are
swept (odd zero points, power-of-two scales that make exact .5 ties, random scales).
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import refinterp  # noqa: E402

_NP2ONNX = {np.dtype(bool): TensorProto.BOOL, np.dtype(np.uint8): TensorProto.UINT8,
            np.dtype(np.int8): TensorProto.INT8,
            np.dtype(np.int32): TensorProto.INT32, np.dtype(np.float32): TensorProto.FLOAT}


def _model(tmp_path, op, feeds: dict, inits: dict, outputs: list[tuple[str, int]], domain="", opset=21,
           **attrs):
    """One-node model: ``feeds`` become graph inputs, ``inits`` initializers, in the order given by
    ``order`` = list(feeds) + list(inits) unless attrs has ``_inputs``."""
    order = attrs.pop("_inputs", None) or (list(feeds) + list(inits))
    node = helper.make_node(op, order, [o for o, _ in outputs], domain=domain, **attrs)
    ins = [helper.make_tensor_value_info(k, _NP2ONNX[v.dtype], list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, t, None) for o, t in outputs]
    inits_p = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items() if k]
    g = helper.make_graph([node], "t", ins, outs, initializer=inits_p)
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    path = tmp_path / f"{op}.onnx"
    onnx.save(m, str(path))
    return m, str(path)


def _ort_run(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def _ours(path, feeds, scheme):
    return refinterp.Session(refinterp.load(path), scheme).run(feeds)


def _diff(a, b) -> int:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return int(np.sum(a.astype(np.float64) != b.astype(np.float64)))
    return int(np.sum(a.astype(np.int64) != b.astype(np.int64)))


def _check(m, path, feeds, scheme="onnxruntime-cpu", oracle="ort"):
    want = _ort_run(m, feeds) if oracle == "ort" else dict(
        zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))
    got = _ours(path, feeds, scheme)
    for k, v in want.items():
        assert _diff(v, got[k]) == 0, f"{k}: {_diff(v, got[k])} of {np.size(v)} differ"


def _codes(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(int(info.min), int(info.max) + 1, size=shape).astype(dtype)


# (x_scale, x_zp, y_scale, y_zp) sweeps: power-of-two scales give exact ties, odd zero points.
_SWEEP = [(0.5, 3, 1.0, 1), (0.25, 127, 0.5, 129), (0.0123, 100, 0.047, 77), (0.07, 0, 0.011, 255)]


# -- QLinearConv / QLinearMatMul / QGemm ------------------------------------------------------------

@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_qlinear_conv(tmp_path, case, scheme, oracle):
    rng = np.random.default_rng(case)
    group = 4 if case in (2, 5) else 1
    cin, cout = 4, (4 if group > 1 else 5)
    x = _codes(rng, np.uint8, (1, cin, 7, 6))
    w = _codes(rng, np.int8, (cout, cin // group, 3, 3))
    xs, zx, ys, zy = _SWEEP[case % 4]
    per_channel = case % 2 == 1
    ws = (np.float32(2.0) ** rng.integers(-3, 1, cout)).astype(np.float32) if per_channel else np.float32(1.0)
    if case >= 4:
        ws = (rng.random(cout) * 0.02 + 0.001).astype(np.float32)
    scale_acc = np.float32(xs) * np.asarray(ws, np.float32)
    bias = rng.integers(-3000, 3000, cout).astype(np.int32)
    if case == 3:
        bias = (bias + (1 << 25)).astype(np.int32)  # |acc| > 2^24: float32 conversion rounds
    ys_eff = np.float32(ys * 256.0 * float(np.max(scale_acc)))  # keep outputs mostly in range
    inits = {"xs": np.float32(xs), "xz": np.uint8(zx), "w": w, "ws": ws,
             "wz": np.zeros(cout, np.int8) if per_channel or case >= 4 else np.int8(0),
             "ys": ys_eff if case >= 2 else np.float32(ys), "yz": np.uint8(zy), "b": bias}
    m, path = _model(tmp_path, "QLinearConv", {"x": x}, inits, [("y", TensorProto.UINT8)], group=group,
                     pads=[1, 1, 1, 1], strides=[1, 2] if case == 4 else [1, 1],
                     _inputs=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"])
    _check(m, path, {"x": x}, scheme, oracle)


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_qlinear_matmul(tmp_path, case, scheme, oracle):
    rng = np.random.default_rng(10 + case)
    adt = np.uint8 if case != 2 else np.int8
    a = _codes(rng, adt, (2, 5, 16))
    b = _codes(rng, np.int8, (16, 6))
    xs, zx, ys, zy = _SWEEP[case]
    zx = zx if adt == np.uint8 else zx - 128
    bs = np.float32(0.5) if case < 2 else (rng.random(6) * 0.01 + 0.001).astype(np.float32)
    ys = np.float32(ys) if case < 2 else np.float32(ys * 40 * xs * 0.01)
    inits = {"as": np.float32(xs), "az": adt(zx), "b": b, "bs": bs,
             "bz": np.int8(0) if np.ndim(bs) == 0 else np.zeros(6, np.int8), "ys": ys,
             "yz": adt(zy if adt == np.uint8 else zy - 128)}
    m, path = _model(tmp_path, "QLinearMatMul", {"a": a}, inits, [("y", _NP2ONNX[np.dtype(adt)])],
                     _inputs=["a", "as", "az", "b", "bs", "bz", "ys", "yz"])
    _check(m, path, {"a": a}, scheme, oracle)


@pytest.mark.parametrize("case", range(4))
def test_qgemm(tmp_path, case):
    rng = np.random.default_rng(20 + case)
    a = _codes(rng, np.uint8, (4, 12))
    b = _codes(rng, np.int8, (7, 12))
    c = rng.integers(-5000, 5000, 7).astype(np.int32)
    xs, zx, ys, zy = _SWEEP[case]
    bs = np.float32(0.25) if case % 2 == 0 else (rng.random(7) * 0.01 + 0.001).astype(np.float32)
    inits = {"as": np.float32(xs), "az": np.uint8(zx), "b": b, "bs": bs,
             "bz": np.int8(0) if np.ndim(bs) == 0 else np.zeros(7, np.int8), "c": c}
    names = ["a", "as", "az", "b", "bs", "bz", "c"]
    out_t = TensorProto.FLOAT
    if case < 3:  # case 3: no y_scale -> float output f32(acc) * f32(alpha*as*bs)
        inits.update({"ys": np.float32(ys * (1 if case < 2 else 30 * xs * 0.01)), "yz": np.uint8(zy)})
        names += ["ys", "yz"]
        out_t = TensorProto.UINT8
    m, path = _model(tmp_path, "QGemm", {"a": a}, inits, [("y", out_t)], domain="com.microsoft", transB=1,
                     alpha=1.0 if case != 1 else 0.75, _inputs=names)
    _check(m, path, {"a": a})


# -- element-wise contrib ops -------------------------------------------------------------------------

def _all_pairs(dtype):
    info = np.iinfo(dtype)
    v = np.arange(int(info.min), int(info.max) + 1)
    a, b = np.meshgrid(v, v)
    return a.ravel().astype(dtype).reshape(256, 256), b.ravel().astype(dtype).reshape(256, 256)


_BIN_SWEEP = [(0.05, 3, 0.07, 200, 0.09, 17), (0.5, 1, 0.25, 3, 0.5, 5), (0.02, 128, 0.02, 128, 0.03, 127),
              (0.7, 9, 0.01, 250, 0.3, 101)]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_binary_exhaustive(tmp_path, op, case, dtype):
    """Every (a, b) pair of stored codes."""
    a, b = _all_pairs(dtype)
    sa, za, sb, zb, sc, zc = _BIN_SWEEP[case]
    if op == "QLinearMul":
        sc = sc * 20 * sa * sb / 0.0049
    off = 0 if dtype == np.uint8 else -128
    inits = {"sa": np.float32(sa), "za": dtype(za + off), "sb": np.float32(sb), "zb": dtype(zb + off),
             "sc": np.float32(sc), "zc": dtype(zc + off)}
    m, path = _model(tmp_path, op, {"a": a, "b": b}, inits, [("y", _NP2ONNX[np.dtype(dtype)])],
                     domain="com.microsoft", _inputs=["a", "sa", "za", "b", "sb", "zb", "sc", "zc"])
    _check(m, path, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_lut(tmp_path, op, case, dtype):
    """All 256 input codes."""
    x = np.arange(256).astype(np.int64)
    x = (x if dtype == np.uint8 else x - 128).astype(dtype).reshape(1, 4, 8, 8)
    xs, zx, ys, zy = [(0.05, 128, 1 / 256, 0), (0.5, 3, 0.25, 1), (0.031, 77, 0.0047, 13), (0.1, 200, 0.03, 101)][case]
    if op == "QLinearLeakyRelu":
        ys, zy = xs * 1.3, 150
    off = 0 if dtype == np.uint8 else -128
    inits = {"xs": np.float32(xs), "xz": dtype(zx + off), "ys": np.float32(ys), "yz": dtype(zy + off)}
    attrs = {"alpha": 0.1 + 0.05 * case} if op == "QLinearLeakyRelu" else {}
    m, path = _model(tmp_path, op, {"x": x}, inits, [("y", _NP2ONNX[np.dtype(dtype)])], domain="com.microsoft",
                     **attrs)
    _check(m, path, {"x": x})


@pytest.mark.parametrize("case", range(4))
def test_qlinear_average_pool(tmp_path, case):
    rng = np.random.default_rng(30 + case)
    x = _codes(rng, np.uint8, (1, 3, 7, 7))
    xs, zx, ys, zy = _SWEEP[case]
    attrs = [dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
             dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1, strides=[2, 2]),
             dict(kernel_shape=[2, 2], strides=[2, 2]),
             dict(kernel_shape=[7, 7])][case]  # whole extent: ORT's global-average path
    inits = {"xs": np.float32(xs), "xz": np.uint8(zx), "ys": np.float32(ys), "yz": np.uint8(zy)}
    m, path = _model(tmp_path, "QLinearAveragePool", {"x": x}, inits, [("y", TensorProto.UINT8)],
                     domain="com.microsoft", **attrs)
    _check(m, path, {"x": x})


@pytest.mark.parametrize("case", range(4))
def test_qlinear_global_average_pool(tmp_path, case):
    rng = np.random.default_rng(40 + case)
    x = _codes(rng, np.uint8, (2, 5, 6, 4 + case))
    xs, zx, ys, zy = _SWEEP[case]
    inits = {"xs": np.float32(xs), "xz": np.uint8(zx), "ys": np.float32(ys), "yz": np.uint8(zy)}
    m, path = _model(tmp_path, "QLinearGlobalAveragePool", {"x": x}, inits, [("y", TensorProto.UINT8)],
                     domain="com.microsoft", channels_last=0)
    _check(m, path, {"x": x})


@pytest.mark.parametrize("case", range(3))
def test_qlinear_concat(tmp_path, case):
    rng = np.random.default_rng(50 + case)
    a, b = _codes(rng, np.uint8, (1, 2, 16, 8)), _codes(rng, np.uint8, (1, 3, 16, 8))
    a[0, 0] = np.arange(128).reshape(16, 8)  # every code through the tables
    b[0, 0] = np.arange(128, 256).reshape(16, 8)
    ys, yz = [(0.05, 128), (0.5, 3), (0.02, 100)][case]
    sa, za = [(0.05, 128), (0.25, 1), (0.013, 7)][case]  # case 0: same params as the output (copy)
    inits = {"ys": np.float32(ys), "yz": np.uint8(yz), "sa": np.float32(sa), "za": np.uint8(za),
             "sb": np.float32(0.1), "zb": np.uint8(131)}
    m, path = _model(tmp_path, "QLinearConcat", {"a": a, "b": b}, inits, [("y", TensorProto.UINT8)],
                     domain="com.microsoft", axis=1, _inputs=["ys", "yz", "a", "sa", "za", "b", "sb", "zb"])
    _check(m, path, {"a": a, "b": b})


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_softmax(tmp_path, case, dtype):
    rng = np.random.default_rng(60 + case)
    x = _codes(rng, dtype, (3, 5, 10 + 7 * case))
    xs = [0.05, 0.2, 0.013, 0.1][case]
    ys, yz = [(1 / 256, 0), (1 / 256, 0), (1 / 200, 3), (0.003, 17)][case]
    off = 0 if dtype == np.uint8 else -128
    inits = {"xs": np.float32(xs), "xz": dtype(100 + off), "ys": np.float32(ys), "yz": dtype(yz + off)}
    m, path = _model(tmp_path, "QLinearSoftmax", {"x": x}, inits, [("y", _NP2ONNX[np.dtype(dtype)])],
                     domain="com.microsoft", axis=-1, opset=13)
    m.graph.node[0].attribute.append(helper.make_attribute("opset", 13))
    onnx.save(m, path)
    _check(m, path, {"x": x})


# -- integer ops and quantize -------------------------------------------------------------------------

@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_matmul_integer(tmp_path, case, scheme, oracle):
    rng = np.random.default_rng(70 + case)
    bdt = np.int8 if case != 1 else np.uint8
    a, b = _codes(rng, np.uint8, (3, 4, 20)), _codes(rng, bdt, (20, 6))
    inits = {"b": b, "az": np.uint8(rng.integers(0, 256)), "bz": bdt(0 if case == 0 else 5)}
    m, path = _model(tmp_path, "MatMulInteger", {"a": a}, inits, [("y", TensorProto.INT32)],
                     _inputs=["a", "b", "az", "bz"])
    _check(m, path, {"a": a}, scheme, oracle)


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_conv_integer(tmp_path, case, scheme, oracle):
    rng = np.random.default_rng(80 + case)
    x, w = _codes(rng, np.uint8, (1, 3, 8, 7)), _codes(rng, np.uint8, (4, 3, 3, 3))
    inits = {"w": w, "xz": np.uint8(rng.integers(0, 256)), "wz": np.uint8([0, 9, 128][case])}
    m, path = _model(tmp_path, "ConvInteger", {"x": x}, inits, [("y", TensorProto.INT32)],
                     pads=[1, 1, 1, 1] if case else [0, 0, 0, 0], strides=[2, 1] if case == 2 else [1, 1],
                     _inputs=["x", "w", "xz", "wz"])
    _check(m, path, {"x": x}, scheme, oracle)


@pytest.mark.parametrize("case", range(5))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_dynamic_quantize_linear(tmp_path, case, scheme, oracle):
    rng = np.random.default_rng(90 + case)
    x = (rng.standard_normal((4, 33)) * [1, 5, 0.01, 1, 1][case]).astype(np.float32)
    if case == 3:
        x = np.abs(x)  # min 0: zero point 0
    if case == 4:
        x = np.round(x * 4) / 4  # many exact ties
    m, path = _model(tmp_path, "DynamicQuantizeLinear", {"x": x}, {},
                     [("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8)])
    _check(m, path, {"x": x}, scheme, oracle)


@pytest.mark.parametrize("case", range(6))
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_quantize_linear(tmp_path, case, scheme, oracle):
    """float -> u8 / s8, exact ties ((k + 0.5) * scale with power-of-two scales), odd zero points,
    saturation, per-axis."""
    rng = np.random.default_rng(100 + case)
    dt = np.uint8 if case % 2 == 0 else np.int8
    scale = np.float32([0.5, 0.25, 0.0137, 2.0, 0.125, 0.031][case])
    zp = [3, -5, 128, 0, 255, 1][case]
    k = rng.integers(-300, 300, (2, 3, 40)).astype(np.float32)
    x = ((k + 0.5) * scale).astype(np.float32)
    if case == 2:
        x = (rng.standard_normal((2, 3, 40)) * 2).astype(np.float32)
    inits = {"s": scale, "z": dt(zp)}
    if case == 5:  # per-axis on axis 1
        inits = {"s": np.float32([0.5, 0.25, 0.031]), "z": np.array([1, -3, 0], np.int8)}
    m, path = _model(tmp_path, "QuantizeLinear", {"x": x}, inits, [("y", _NP2ONNX[np.dtype(dt)])],
                     _inputs=["x", "s", "z"], axis=1)
    _check(m, path, {"x": x}, scheme, oracle)


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul"])
@pytest.mark.parametrize("scheme,oracle", [("onnxruntime-cpu", "ort"), ("onnx-reference", "ref")])
def test_qlinear_exact_ties_and_large_acc(tmp_path, case, op, scheme, oracle):
    """Small accumulators times a power-of-two multiplier give exact .5 ties (ORT: RNE then + odd zp;
    onnx.reference: RNE of (v + zp)); Conv case 3: acc ~ 2^25 + 2^17 (a tie after x 2^-18), where
    f32(acc) rounds to a multiple of 4 (ORT) and the float64 product does not (reference)."""
    rng = np.random.default_rng(110 + case)
    zx, zy = [(128, 1), (100, 3), (7, 127), (128, 0 if op == "QLinearConv" else 5)][case]
    mult_exp = [-1, -1, -2, -18][case]
    if op == "QLinearConv":
        x = (zx + rng.integers(-3, 4, (1, 3, 6, 6))).astype(np.uint8)
        w = rng.integers(-2, 3, (4, 3, 3, 3)).astype(np.int8)
        bias = rng.integers(-8, 8, 4).astype(np.int32)
        names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
        extra = {"pads": [1, 1, 1, 1]}
    else:
        x = (zx + rng.integers(-3, 4, (4, 16))).astype(np.uint8)
        w = rng.integers(-2, 3, (16, 5)).astype(np.int8)
        bias = None
        names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
        extra = {}
    if case == 3 and op == "QLinearConv":
        # acc = T + small with T = 2^25 + 2^17: T * 2^-18 = 128.5 exactly; f32(acc) is a multiple of 4
        x = (zx + rng.integers(-1, 2, x.shape)).astype(np.uint8)
        w = rng.integers(-1, 2, w.shape).astype(np.int8)
        bias = np.full(4, (1 << 25) + (1 << 17), np.int32)
    elif case == 3:
        mult_exp = -3
    inits = {"xs": np.float32(1.0), "xz": np.uint8(zx), "w": w, "ws": np.float32(2.0 ** mult_exp),
             "wz": np.int8(0), "ys": np.float32(1.0), "yz": np.uint8(zy)}
    if op == "QLinearConv":
        inits["b"] = bias
    m, path = _model(tmp_path, op, {"x": x}, inits, [("y", TensorProto.UINT8)], _inputs=names, **extra)
    _check(m, path, {"x": x}, scheme, oracle)


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_where(tmp_path, case, dtype):
    rng = np.random.default_rng(120 + case)
    off = 0 if dtype == np.uint8 else -128
    x = (np.arange(256) + off).astype(dtype).reshape(16, 16)  # every code
    y = _codes(rng, dtype, (16, 16))
    cond = rng.random((16, 16)) < 0.5
    sx, zx, sy, zy, sz, zz = [(0.1, 128, 0.1, 128, 0.1, 128), (0.05, 3, 0.2, 250, 0.07, 101),
                              (0.5, 1, 0.25, 0, 0.75, 9)][case]
    inits = {"xs": np.float32(sx), "xz": dtype(zx + off), "ys": np.float32(sy), "yz": dtype(zy + off),
             "zs": np.float32(sz), "zz": dtype(zz + off)}
    m, path = _model(tmp_path, "QLinearWhere", {"c": cond, "x": x, "y": y}, inits,
                     [("z", _NP2ONNX[np.dtype(dtype)])], domain="com.microsoft",
                     _inputs=["c", "x", "xs", "xz", "y", "ys", "yz", "zs", "zz"])
    _check(m, path, {"c": cond, "x": x, "y": y})
