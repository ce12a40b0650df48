"""Float Sigmoid / Tanh of the ``onnxruntime-cpu`` scheme (variant ``ort_float``) vs onnxruntime, bit for bit.

MLAS evaluates both with FMA3 rational approximations (kernels/onnxruntime/float_activation.py); NumPy's
transcendentals differ in ~60% of float32 results, enough to flip a 16-bit QuantizeLinear after a
QDQ activation.  Inputs: the clamp regions (|x| beyond 9 / 18), tiny values, signed zeros, and a
dense sweep of normal values.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.kernels.onnxruntime.float_activation import mlas_sigmoid, mlas_tanh  # noqa: E402


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(8)
    special = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 8.999, 9.0, 9.5, -9.5, 17.99, 18.0, 25.0, -25.0, 1e30,
                        -1e30], np.float32)
    return np.concatenate([special, (rng.standard_normal(50000) * 6).astype(np.float32),
                           np.linspace(-20, 20, 20001, dtype=np.float32)])


def _model(op: str, n: int):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("op,fn", [("Tanh", mlas_tanh), ("Sigmoid", mlas_sigmoid)])
def test_mlas_activation_bit_exact(op, fn, tmp_path):
    x = _inputs()
    m = _model(op, x.size)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.array_equal(fn(x).view(np.int32), want.view(np.int32))
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"x": x})["y"]
    assert np.array_equal(ours.view(np.int32), want.view(np.int32))
    generic = refinterp.Session(refinterp.load(str(p)), "float32").run({"x": x})["y"]
    assert not np.array_equal(generic.view(np.int32), want.view(np.int32))  # why the variant exists
