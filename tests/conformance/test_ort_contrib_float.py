"""com.microsoft contrib ops (what ORT's transformer optimizer, quantizer and exporters emit)
against ONNX Runtime's CPU kernels: the float ones within 1e-5 relative, DynamicQuantizeMatMul bit
for bit."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402

RNG = np.random.default_rng(0)


def _f(*shape):
    return RNG.normal(0, 1, shape).astype(np.float32)


CASES = {
    "FusedMatMul": ({"A": _f(2, 3, 5, 4), "B": _f(2, 3, 6, 4)}, {"alpha": 0.5, "transB": 1}, 1),
    "FusedMatMul-transA": ({"A": _f(4, 5), "B": _f(4, 3)}, {"transA": 1}, 1),
    "Gelu": ({"X": _f(3, 17)}, {}, 1),
    "BiasGelu": ({"A": _f(2, 5, 8), "B": _f(8)}, {}, 1),
    "FastGelu": ({"X": _f(2, 5, 8), "bias": _f(8)}, {}, 1),
    "QuickGelu": ({"X": _f(3, 9)}, {"alpha": 1.5}, 1),
    "SkipLayerNormalization": ({"input": _f(2, 4, 16), "skip": _f(2, 4, 16), "gamma": _f(16), "beta": _f(16),
                                "bias": _f(16)}, {"epsilon": 1e-5}, 4),
    "SkipSimplifiedLayerNormalization": ({"input": _f(2, 4, 16), "skip": _f(2, 4, 16), "gamma": _f(16)},
                                         {"epsilon": 1e-6}, 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_contrib_op_matches_onnxruntime(tmp_path, case):
    feeds, attrs, n_out = CASES[case]
    op = case.split("-")[0]
    outs = [f"y{i}" for i in range(n_out)]
    if op == "SkipSimplifiedLayerNormalization":
        outs = ["y0", "", "y2", "y3"]
    node = helper.make_node(op, list(feeds), outs, domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)
    for name, w in zip([o for o in outs if o], want):
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=f"{case} {name}")


@pytest.mark.parametrize("per_column,signed", [(False, True), (True, True), (True, False)])
def test_dynamic_quantize_matmul_matches_onnxruntime(tmp_path, per_column, signed):
    rng = np.random.default_rng(int(per_column) + 2 * int(signed))
    a = rng.normal(0, 2, (3, 5, 16)).astype(np.float32)
    dt, tp = (np.int8, TensorProto.INT8) if signed else (np.uint8, TensorProto.UINT8)
    info = np.iinfo(dt)
    b = rng.integers(info.min, info.max + 1, (16, 6)).astype(dt)
    bs = rng.uniform(0.005, 0.02, 6 if per_column else ()).astype(np.float32)
    bz = (np.zeros(6 if per_column else (), dt) if signed else rng.integers(100, 150, 6 if per_column else ()).astype(dt))
    bias = rng.normal(0, 1, 6).astype(np.float32)
    inits = [helper.make_tensor("B", tp, b.shape, b.ravel().tolist()),
             helper.make_tensor("bs", TensorProto.FLOAT, bs.shape, np.atleast_1d(bs).tolist()),
             helper.make_tensor("bz", tp, bz.shape, np.atleast_1d(bz).tolist()),
             helper.make_tensor("bias", TensorProto.FLOAT, bias.shape, bias.tolist())]
    node = helper.make_node("DynamicQuantizeMatMul", ["A", "B", "bs", "bz", "bias"], ["Y"], domain="com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, a.shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), "float32").run({"A": a})["Y"]
    # the integer product is exact and the float epilogue is ORT's: bit for bit
    np.testing.assert_array_equal(got, want)
