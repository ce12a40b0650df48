"""Float Conv under ``onnx-reference`` (kernels/float/conv_onnx_order.py) against onnx's
ReferenceEvaluator in the same process, bit for bit: the same im2col columns and the same NumPy
matmul at the same BLAS thread count (OpenBLAS's SGEMM kernel depends on it).  The generic float
kernel differs on most values of every case (printed); SqueezeNet's light model passes through
onnx's BackendTest only with this order (test_onnx_real_models.py)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import refinterp  # noqa: E402

CASES = {  # x shape, w shape, attributes
    "3x3-pad": ((1, 3, 20, 20), (8, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    "grouped-strided-asymmetric-pads": ((2, 8, 11, 9), (16, 4, 3, 3), dict(group=2, strides=[2, 1], pads=[1, 0, 1, 2])),
    "depthwise-dilated": ((1, 6, 15, 15), (6, 1, 5, 5), dict(group=6, dilations=[2, 2], pads=[4, 4, 4, 4])),
    "1d-strided": ((3, 5, 17), (7, 5, 4), dict(strides=[3])),
    "3d": ((1, 2, 5, 6, 7), (4, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
    "same-upper": ((1, 16, 14, 14), (32, 16, 3, 3), dict(auto_pad="SAME_UPPER")),
    "same-lower-strided": ((1, 16, 14, 14), (32, 16, 3, 3), dict(auto_pad="SAME_LOWER", strides=[2, 2])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_float_conv_equals_reference_evaluator(tmp_path, case):
    xs, ws, attrs = CASES[case]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                           for n, s in (("x", xs), ("w", ws), ("b", [ws[0]]))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    rng = np.random.default_rng(len(case))
    feeds = {"x": rng.normal(0, 1, xs).astype(np.float32), "w": rng.normal(0, 1, ws).astype(np.float32),
             "b": rng.normal(0, 1, ws[0]).astype(np.float32)}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    graph = refinterp.load(str(path))
    got = refinterp.Session(graph, "onnx-reference").run(feeds)["y"]
    generic = refinterp.Session(graph, "float32").run(feeds)["y"]
    assert got.dtype == want.dtype and np.array_equal(got, want), f"{int(np.sum(got != want))} of {want.size} differ"
    print(f"\n{case}: bit-exact; the generic order differs on {np.mean(generic != want):.0%}")
