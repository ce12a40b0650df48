"""Float Softmax and LogSoftmax of the ``onnxruntime-cpu`` scheme (variant ``ort_float``) vs onnxruntime, bit for bit.

ORT's CPU Softmax runs MLAS's exp polynomial and 16-lane sums (kernels/onnxruntime/float_softmax.py); NumPy's
exp and sum differ by an ulp often enough to flip a 16-bit QuantizeLinear after a QDQ Softmax.
Sweeps: row lengths below, at and around the 16 / 48 lane blocks, every axis, large spreads (the
clamp at -88.38 and subnormal exponentials), constant rows, and a whole-model Session run.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.kernels.onnxruntime.float_softmax import mlas_softmax  # noqa: E402


def _model(shape, axis, op="Softmax"):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=axis)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def _ort(m, x):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


CASES = [((4, d), -1, 3.0) for d in (1, 2, 7, 8, 15, 16, 17, 31, 47, 48, 49, 64, 95, 96, 97, 100, 1000)] + [
    ((2, 5, 17), 1, 4.0), ((2, 3, 64), 0, 4.0), ((3, 4, 5), -2, 2.0),
    ((2, 40), -1, 60.0),    # spreads past the -88.38 clamp: exponentials underflow to subnormals / 0
    ((3, 33), -1, 1e-3),    # nearly constant rows
]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape,axis,spread", CASES, ids=[f"{s}-ax{a}-x{sp:g}" for s, a, sp in CASES])
def test_mlas_softmax_bit_exact(shape, axis, spread, op):
    """Softmax, and LogSoftmax: (x - max) - logf(the same lane sum of the exponentials)."""
    rng = np.random.default_rng(sum(shape) + axis)
    x = (rng.standard_normal(shape) * spread).astype(np.float32)
    want = _ort(_model(shape, axis, op), x)
    got = mlas_softmax(x, axis % len(shape), op == "LogSoftmax")
    assert got.dtype == np.float32
    bad = int(np.sum(want.view(np.int32) != got.view(np.int32)))
    assert bad == 0, f"{bad}/{want.size} float32 results differ from onnxruntime"


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_session_uses_mlas_softmax_and_numpy_differs(tmp_path, op):
    """Through a Session under onnxruntime-cpu: bit-exact; the generic float kernel is not (this is
    what the variant exists for)."""
    shape = (64, 37)
    path = tmp_path / "softmax.onnx"
    onnx.save(_model(shape, -1, op), str(path))
    x = (np.random.default_rng(5).standard_normal(shape) * 3).astype(np.float32)
    want = _ort(_model(shape, -1, op), x)
    ours = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu").run({"x": x})["y"]
    assert np.array_equal(want.view(np.int32), ours.view(np.int32))
    generic = refinterp.Session(refinterp.load(str(path)), "float32").run({"x": x})["y"]
    assert not np.array_equal(want.view(np.int32), generic.view(np.int32)), \
        "the generic float softmax matched MLAS bit for bit: this test no longer shows the difference"
