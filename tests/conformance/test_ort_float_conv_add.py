"""ORT's ConvAddActivationFusion for Convs its NCHWc rewrite leaves alone (passes/ort_conv_add.py), under
``onnxruntime-cpu`` against onnxruntime 1.32.0 at ORT_ENABLE_ALL: a FusedConv accumulates the products onto
the Add's other operand (MLAS's Beta 1) and adds the bias after.  Run-time weights (given as inputs, or
initializers listed as graph inputs) with 1x1 (GemmDirect), 3x3 (expand then GEMM) and depthwise kernels;
each case checks ORT's count of Sum-fused FusedConvs and every output bit.  Found with ORT's published
conv_add* fusion models (1-2 of 8 values differed)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.passes.ort_nchwc import MARK  # noqa: E402
from tests.conformance.test_ort_float_nchwc import _avx512f, _bits  # noqa: E402
from tests.onnx_models import ort_optimized  # noqa: E402

pytestmark = pytest.mark.skipif(not _avx512f(), reason="the onnxruntime-cpu scheme models an AVX-512 CPU "
                                                       "(NCHWc block 16); this CPU has no AVX-512F")

F = np.float32
# name -> (weight shape, conv attributes, bias, activation after the Add, weights as initializers listed as inputs)
CASES = {
    "3x3-runtime-weights-relu": ((16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu", False),
    "1x1-runtime-weights": ((24, 16, 1, 1), {}, True, None, False),
    "depthwise-runtime-weights": ((16, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=16), True, None, False),
    "resnet-block-initializers-as-inputs": ((16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), True, "Relu", True),
    "no-bias-not-fused": ((16, 16, 3, 3), dict(pads=[1, 1, 1, 1]), False, None, False),
}


def _model(case):
    ws, attrs, bias, act, as_inits = CASES[case]
    rng = np.random.default_rng(len(case))
    x_shape, y_shape = (1, 16, 10, 9), (1, ws[0], 10, 9)
    tensors = {"w": rng.normal(0, 0.3, ws).astype(F), "b": rng.normal(0, 0.3, ws[0]).astype(F)}
    names = ["w"] + (["b"] if bias else [])
    nodes = [helper.make_node("Conv", ["x"] + names, ["c"], **attrs), helper.make_node("Add", ["c", "z"], ["s"])]
    nodes.append(helper.make_node(act, ["s"], ["y"]) if act else helper.make_node("Identity", ["s"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape)),
              helper.make_tensor_value_info("z", TensorProto.FLOAT, list(y_shape))]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(tensors[n].shape)) for n in names]
    inits = [numpy_helper.from_array(tensors[n], n) for n in names] if as_inits else []
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    feeds = {"x": rng.normal(0, 1, x_shape).astype(F), "z": rng.normal(0, 1, y_shape).astype(F)}
    if not as_inits:
        feeds.update({n: tensors[n] for n in names})
    return m, feeds


@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_add_fusion_outside_nchwc(tmp_path, case):
    m, feeds = _model(case)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    sess, optimized = ort_optimized(m.SerializeToString(), tmp_path / "opt.onnx")
    fused = sum(1 for n in optimized.node if n.op_type == "FusedConv" and len(n.input) > 3 and n.input[3])
    ours = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    assert sum(1 for n in ours.graph.nodes if n.op in ("Conv", "DepthwiseConv") and not n.attr(MARK)
               and len(n.inputs) > 3 and n.inputs[3]) == fused == (1 if CASES[case][2] else 0)
    want = sess.run(["y"], feeds)[0]
    got = ours.run(feeds)["y"]
    assert np.array_equal(_bits(got), _bits(want)), f"{np.mean(_bits(got) != _bits(want)):.1%} of the values differ"
