"""QLinearConv / QLinearMatMul with scales and zero points fed as graph inputs (not initializers),
under onnxruntime-cpu against ONNX Runtime and under onnx-reference against onnx.reference: every
output code equal.  Per-tensor and per-channel weights, int8 and uint8, non-zero zero points.
(ONNX Runtime's float32 product and onnx.reference's float64 one differ by at most ~1e-5 of an
output step for 8-bit outputs, so they agree on these cases; each scheme still follows its own.)"""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import refinterp  # noqa: E402

T = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.float32: TensorProto.FLOAT,
     np.int32: TensorProto.INT32}


def _vi(name, arr):
    return helper.make_tensor_value_info(name, T[arr.dtype.type], arr.shape)


def _model(kind: str, dt, per_channel: bool, seed: int):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    if kind == "conv":
        x = rng.integers(info.min, info.max + 1, (1, 3, 6, 6)).astype(dt)
        w = rng.integers(info.min, info.max + 1, (4, 3, 3, 3)).astype(dt)
        n_out = 4
    else:
        x = rng.integers(info.min, info.max + 1, (2, 5, 16)).astype(dt)
        w = rng.integers(info.min, info.max + 1, (16, 6)).astype(dt)
        n_out = 6
    mid = (info.min + info.max) // 2
    feeds = {"x": x, "x_scale": np.array(rng.uniform(0.01, 0.05), np.float32),
             "x_zp": np.array(mid + 3, dt), "y_scale": np.array(rng.uniform(2.0, 6.0), np.float32),
             "y_zp": np.array(mid - 5, dt)}
    w_scale = rng.uniform(0.005, 0.02, n_out if per_channel else ()).astype(np.float32)
    w_zp = np.zeros(n_out, dt) + (0 if dt == np.int8 else 128) if per_channel else np.array(mid, dt)
    inits = [helper.make_tensor("w", T[dt], w.shape, w.ravel().tolist()),
             helper.make_tensor("w_scale", TensorProto.FLOAT, w_scale.shape, w_scale.ravel().tolist()),
             helper.make_tensor("w_zp", T[dt], w_zp.shape, w_zp.ravel().tolist())]
    op = "QLinearConv" if kind == "conv" else "QLinearMatMul"
    ins = ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"]
    attrs = {"pads": [1, 1, 1, 1]} if kind == "conv" else {}
    if kind == "conv":
        b = rng.integers(-2000, 2000, n_out).astype(np.int32)
        inits.append(helper.make_tensor("b", TensorProto.INT32, b.shape, b.tolist()))
        ins.append("b")
    node = helper.make_node(op, ins, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [_vi(k, v) for k, v in feeds.items()],
                              [helper.make_tensor_value_info("y", T[dt], None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model, feeds


CASES = [(k, dt, pc) for k in ("conv", "matmul") for dt in (np.int8, np.uint8) for pc in (False, True)
         if not (k == "matmul" and pc and dt == np.uint8)]


@pytest.mark.parametrize("kind,dt,per_channel", CASES,
                         ids=[f"{k}-{np.dtype(d).name}-{'pc' if p else 'pt'}" for k, d, p in CASES])
@pytest.mark.parametrize("scheme", ["onnxruntime-cpu", "onnx-reference"])
def test_runtime_params_match(tmp_path, kind, dt, per_channel, scheme):
    model, feeds = _model(kind, dt, per_channel, seed=len(kind) + int(per_channel))
    if scheme == "onnxruntime-cpu":
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
            None, feeds)[0]
    else:
        want = ReferenceEvaluator(model).run(None, feeds)[0]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), scheme).run(feeds)["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = int(np.count_nonzero(got != want))
    assert diff == 0, f"{diff} of {want.size} codes differ (max {np.abs(got.astype(int) - want).max()})"
