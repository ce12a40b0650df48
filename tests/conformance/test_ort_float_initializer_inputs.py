"""Initializers a model also lists as graph inputs (older exporters: PyTorch's keep_initializers_as_inputs,
many model-zoo files), under ``onnxruntime-cpu`` against onnxruntime 1.32.0 at ORT_ENABLE_ALL, bit for
bit.  From IR version 4 on ORT treats them as overridable, hence not constant: no Conv folding, no
NCHWc, no prepacked MatMul weights (passes/ort_overridable.py); IR 3 models keep them constant.
Found with ORT's published negative-fuse-conv-add-no-bias model (81% of its output bits differed)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.conformance.test_ort_float_nchwc import _avx512f, _bits  # noqa: E402
from tests.onnx_models import ort_output  # noqa: E402

pytestmark = pytest.mark.skipif(not _avx512f(), reason="the onnxruntime-cpu scheme models an AVX-512 CPU "
                                                       "(NCHWc block 16); this CPU has no AVX-512F")


def _model(ir_version: int, as_inputs: bool):
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (32, 16, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.3, 32).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.3, (32, 32, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.normal(0, 0.3, (32 * 6 * 6, 10)).astype(np.float32), "fc")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Conv", ["r", "w2"], ["c"]),
             helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Flatten", ["s"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 12])]
    if as_inputs:
        inputs += [helper.make_tensor_value_info(i.name, TensorProto.FLOAT, list(i.dims)) for i in inits]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8 if ir_version == 3 else 13)])
    m.ir_version = ir_version
    return m


@pytest.mark.parametrize("ir_version,as_inputs", [(8, True), (4, True), (8, False), (3, True)])
def test_initializers_as_graph_inputs(tmp_path, ir_version, as_inputs):
    m = _model(ir_version, as_inputs)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = np.random.default_rng(1).normal(0, 1, (1, 16, 12, 12)).astype(np.float32)
    want = ort_output(m.SerializeToString(), {"x": x}, "ORT_ENABLE_ALL")
    got = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu").run({"x": x})["y"]
    assert np.array_equal(_bits(got), _bits(want)), f"{np.mean(_bits(got) != _bits(want)):.0%} of the values differ"
    # ORT's run-time-weight path rounds otherwise than its constant one (so the test tells them apart);
    # an IR 3 model computes as the constant form
    const = ort_output(_model(8, False).SerializeToString(), {"x": x}, "ORT_ENABLE_ALL")
    assert np.array_equal(_bits(const), _bits(want)) == (not (ir_version >= 4 and as_inputs))
