"""ONNX Runtime's MatmulBNFusion (passes/ort_matmul_bn.py) under ``onnxruntime-cpu`` against onnxruntime
1.32.0 at ORT_ENABLE_ALL: MatMul -> (Reshape / Transpose)* -> BatchNormalization becomes a Gemm with the
normalization folded into B and C.  Each case checks ORT's own Gemm count in its optimized graph, ours,
and every output bit; the fused cases also round otherwise at ORT_DISABLE_ALL (so the test can fail).
Found with ORT's published fusion test models (fuse-matmul-bn-*), 1 to 3 of 5 outputs differed."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.onnx_models import ort_optimized, ort_output  # noqa: E402

F = np.float32


def _case(name, rng):
    """(nodes, initializers, A shape, Gemms ORT makes, extra graph outputs)."""
    k, n = 40, 24
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (k, n)).astype(F), "b"),
             numpy_helper.from_array(rng.normal(1, 0.2, n).astype(F), "s"),
             numpy_helper.from_array(rng.normal(0, 0.5, n).astype(F), "bb"),
             numpy_helper.from_array(rng.normal(0, 0.5, n).astype(F), "m"),
             numpy_helper.from_array(rng.uniform(0.2, 2, n).astype(F), "v")]
    mm = helper.make_node("MatMul", ["a", "b"], ["p"])

    def bn(x):
        return helper.make_node("BatchNormalization", [x, "s", "bb", "m", "v"], ["y"], epsilon=1e-3)
    shape = [helper.make_tensor_value_info("shape", TensorProto.INT64, None)]
    if name == "direct":
        return [mm, bn("p")], inits, (7, k), 1, []
    if name == "reshape":  # [7, 24] -> [7, 24, 1] for BatchNormalization over axis 1
        inits.append(numpy_helper.from_array(np.array([7, n, 1], np.int64), "shape"))
        return [mm, helper.make_node("Reshape", ["p", "shape"], ["r"]), bn("r")], inits, (7, k), 1, []
    if name == "transpose-reshape":  # [7, 24] -> [24, 7] -> [1, 24, 7]
        inits.append(numpy_helper.from_array(np.array([1, n, 7], np.int64), "shape"))
        return [mm, helper.make_node("Transpose", ["p"], ["t"], perm=[1, 0]),
                helper.make_node("Reshape", ["t", "shape"], ["r"]), bn("r")], inits, (7, k), 1, []
    if name == "matmul-read-twice":  # not fused
        return [mm, bn("p"), helper.make_node("Relu", ["p"], ["z"])], inits, (7, k), 0, ["z"]
    if name == "a-rank-3":  # A must be 2-D
        return [mm, helper.make_node("Transpose", ["p"], ["t"], perm=[0, 2, 1]), bn("t")], inits, (2, 7, k), 0, []
    raise AssertionError(name)


CASES = ["direct", "reshape", "transpose-reshape", "matmul-read-twice", "a-rank-3"]


@pytest.mark.parametrize("name", CASES)
def test_matmul_bn_fusion(tmp_path, name):
    rng = np.random.default_rng(len(name))
    nodes, inits, a_shape, gemms, extra = _case(name, rng)
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ["y"] + extra]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a_shape))], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    sess, optimized = ort_optimized(m.SerializeToString(), tmp_path / "opt.onnx")
    assert [n.op_type for n in optimized.node].count("Gemm") == gemms
    ours = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    assert [n.op for n in ours.graph.nodes].count("Gemm") == gemms
    a = rng.normal(0, 1, a_shape).astype(F)
    want = sess.run(["y"], {"a": a})[0]
    got = ours.run({"a": a})["y"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
        f"{np.mean(got.view(np.uint32) != want.view(np.uint32)):.1%} of the values differ"
    if gemms:
        assert not np.array_equal(ort_output(m.SerializeToString(), {"a": a}, "ORT_DISABLE_ALL").view(np.uint32),
                                  want.view(np.uint32))
