"""onnxruntime 1.32's DQ -> MatMulNBits rewrite (pass ``dq_matmul_nbits``) and its 8-bit CompInt8
arithmetic (kernels/onnxruntime/float_matmul.py, nbits_compint8.py) vs onnxruntime.

* Which MatMuls ORT rewrites is checked exactly against ORT's optimized graph for every case the pass
  decides on (8-bit Q after it, 16-bit Q after it, per-tensor / per-column, with and without zero
  point, int8 / uint8, explicit axes, a shared weight).
* The arithmetic (A's int8 block quantization, the integer partials, MLAS's AVX-512 VNNI lane order,
  the zero-point block-sum SGEMM) is compared bit for bit with ORT's float32 outputs over shapes that
  take every kernel variant (kernels/onnxruntime/nbits_compint8.py).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402

K, N, M = 64, 24, 6
_NP = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8, TensorProto.INT16: np.int16}


def _model(qtype=None, wtype=TensorProto.INT8, per_channel=True, zp=True, axis=None, shared=False, k=K, seed=0,
           expose_y=None, n=N, m=M, gemm=None):
    """DQ(w) -> MatMul, or with ``gemm`` (Gemm attributes plus ``bias``: None, "1d", "2d" or
    "input") DQ(w) -> Gemm."""
    rng = np.random.default_rng(seed)
    wdt = _NP[wtype]
    ii = np.iinfo(wdt)
    gemm = None if gemm is None else dict(gemm)
    bias = gemm.pop("bias", None) if gemm is not None else None
    trans_b = bool(gemm and gemm.get("transB"))
    if trans_b:
        axis = 0
    inits = [numpy_helper.from_array(rng.integers(ii.min, int(ii.max) + 1, (n, k) if trans_b else (k, n)).astype(wdt),
                                     "w"),
             numpy_helper.from_array((rng.random(n if per_channel else ()) * 0.01 + 0.001).astype(np.float32), "ws")]
    dq_in = ["w", "ws"]
    if zp:
        z = rng.integers(-8, 8, n if per_channel else ()) + (128 if wdt == np.uint8 else 0)
        inits.append(numpy_helper.from_array(np.asarray(z).astype(wdt), "wz"))
        dq_in.append("wz")
    kw = {} if axis is None else {"axis": axis}
    gin = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    if gemm is None:
        op = helper.make_node("MatMul", ["x", "wd"], ["y"])
    else:
        ins = ["x", "wd"]
        if bias in ("1d", "2d"):
            inits.append(numpy_helper.from_array(rng.normal(0, 1, (n,) if bias == "1d" else (m, n)).astype(np.float32), "c"))
            ins.append("c")
        elif bias == "input":
            gin.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [n]))
            ins.append("c")
        op = helper.make_node("Gemm", ins, ["y"], **gemm)
    nodes = [helper.make_node("DequantizeLinear", dq_in, ["wd"], **kw), op]
    expose_y = qtype is None if expose_y is None else expose_y
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)] if expose_y else []
    if qtype is not None:
        inits += [numpy_helper.from_array(np.array(0.05, np.float32), "ys"),
                  numpy_helper.from_array(np.array(0, _NP[qtype]), "yz")]
        nodes.append(helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]))
        outs.append(helper.make_tensor_value_info("yq", qtype, None))
    if shared:
        nodes.append(helper.make_node("DequantizeLinear", dq_in, ["wd2"], **kw))
        outs.append(helper.make_tensor_value_info("wd2", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", gin, outs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def _ort_ops(m) -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.optimized_model_filepath = str(Path(d) / "opt.onnx")
        ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return [n.op_type for n in onnx.load(str(Path(d) / "opt.onnx")).graph.node]


def _ours(m, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")


DECISIONS = {
    "float-out": {}, "q-int8-after": dict(qtype=TensorProto.INT8), "q-uint8-after": dict(qtype=TensorProto.UINT8),
    "q-int16-after": dict(qtype=TensorProto.INT16),
    "q-int16-after-y-output": dict(qtype=TensorProto.INT16, expose_y=True),
    "q-int8-after-y-output": dict(qtype=TensorProto.INT8, expose_y=True), "per-tensor": dict(per_channel=False), "no-zero-point": dict(zp=False),
    "uint8-weight": dict(wtype=TensorProto.UINT8), "axis-1": dict(axis=1), "axis-minus-1": dict(axis=-1),
    "weight-shared": dict(shared=True),
    # Gemm: rewritten without transposes, with alpha 1 and a 1-D C (beta 1) or no C (any beta)
    "gemm": dict(gemm={}), "gemm-bias": dict(gemm={"bias": "1d"}), "gemm-bias-input": dict(gemm={"bias": "input"}),
    "gemm-no-c-beta": dict(gemm={"beta": 0.5}), "gemm-2d-c": dict(gemm={"bias": "2d"}),
    "gemm-beta": dict(gemm={"bias": "1d", "beta": 0.5}), "gemm-alpha": dict(gemm={"alpha": 2.0}),
    "gemm-transB": dict(gemm={"transB": 1, "bias": "1d"}),
}


@pytest.mark.parametrize("case", list(DECISIONS))
def test_rewrite_decision_matches_ort(case, tmp_path):
    m = _model(**DECISIONS[case])
    ort_rewrites = "MatMulNBits" in _ort_ops(m)
    step = next(s for s in _ours(m, tmp_path).steps if s.node.op in ("MatMul", "Gemm"))
    ours = step.node.source_op == "QDQ:MatMulNBits"
    assert ours == ort_rewrites, f"{case}: onnxruntime {'rewrites' if ort_rewrites else 'keeps'} the MatMul"


# (k, n, m): K with and without a multiple of 4 blocks (the 16-lane groups) and of 32 (padding), N with
# a remainder mod 4 (the one-column kernels), odd M (the one-row kernels), ORT's thread tiles (M > 128,
# N split into 16-aligned ranges)
SHAPES = [(16, 24, 6), (32, 26, 5), (64, 7, 1), (100, 24, 6), (128, 64, 6), (160, 26, 5), (256, 24, 6),
          (300, 7, 1), (768, 1030, 131)]


@pytest.mark.parametrize("case", ["gemm", "gemm-bias", "gemm-bias-input", "gemm-no-c-beta"])
def test_gemm_rewrite_bit_exact(case, tmp_path):
    """A rewritten Gemm is MatMulNBits with C as its bias, added after the lanes are folded."""
    mdl = _model(k=100, n=26, m=5, seed=3, **DECISIONS[case])
    assert "MatMulNBits" in _ort_ops(mdl)
    rng = np.random.default_rng(4)
    feeds = {"x": (rng.standard_normal((5, 100)) * 3).astype(np.float32)}
    if case == "gemm-bias-input":
        feeds["c"] = rng.normal(0, 1, 26).astype(np.float32)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(mdl.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = _ours(mdl, tmp_path).run(feeds)["y"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("k,n,m", SHAPES)
def test_compint8_bit_exact(k, n, m, tmp_path):
    mdl = _model(k=k, seed=k + n, n=n, m=m)
    assert "MatMulNBits" in _ort_ops(mdl)
    x = (np.random.default_rng(k + m).standard_normal((m, k)) * 3).astype(np.float32)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(mdl.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = _ours(mdl, tmp_path).run({"x": x})["y"]
    bad = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
    assert got.shape == want.shape and bad == 0, f"{bad} of {want.size} outputs differ from ORT"
    ulp = np.spacing(np.max(np.abs(want), axis=1, keepdims=True))
    # a plain float MatMul (ORT before 1.32) differs by many ulps: the CompInt8 arithmetic is what matters
    w = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), "float32").run({"x": x})["y"]
    assert float(np.max(np.abs(w.astype(np.float64) - want) / ulp)) > 32
