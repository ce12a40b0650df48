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
           expose_y=None, n=N, m=M):
    rng = np.random.default_rng(seed)
    wdt = _NP[wtype]
    ii = np.iinfo(wdt)
    inits = [numpy_helper.from_array(rng.integers(ii.min, int(ii.max) + 1, (k, n)).astype(wdt), "w"),
             numpy_helper.from_array((rng.random(n if per_channel else ()) * 0.01 + 0.001).astype(np.float32), "ws")]
    dq_in = ["w", "ws"]
    if zp:
        z = rng.integers(-8, 8, n if per_channel else ()) + (128 if wdt == np.uint8 else 0)
        inits.append(numpy_helper.from_array(np.asarray(z).astype(wdt), "wz"))
        dq_in.append("wz")
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("DequantizeLinear", dq_in, ["wd"], **kw), helper.make_node("MatMul", ["x", "wd"], ["y"])]
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
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])], outs, inits)
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
}


@pytest.mark.parametrize("case", list(DECISIONS))
def test_rewrite_decision_matches_ort(case, tmp_path):
    m = _model(**DECISIONS[case])
    ort_rewrites = "MatMulNBits" in _ort_ops(m)
    step = next(s for s in _ours(m, tmp_path).steps if s.node.op == "MatMul")
    ours = step.node.source_op == "QDQ:MatMulNBits"
    assert ours == ort_rewrites, f"{case}: onnxruntime {'rewrites' if ort_rewrites else 'keeps'} the MatMul"


# (k, n, m): K with and without a multiple of 4 blocks (the 16-lane groups) and of 32 (padding), N with
# a remainder mod 4 (the one-column kernels), odd M (the one-row kernels), ORT's thread tiles (M > 128,
# N split into 16-aligned ranges)
SHAPES = [(16, 24, 6), (32, 26, 5), (64, 7, 1), (100, 24, 6), (128, 64, 6), (160, 26, 5), (256, 24, 6),
          (300, 7, 1), (768, 1030, 131)]


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
