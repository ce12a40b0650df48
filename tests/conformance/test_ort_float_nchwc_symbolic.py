"""ONNX Runtime's NchwcTransformer on models with unknown (symbolic) dimensions, against onnxruntime 1.32.0
at ORT_ENABLE_ALL: whether an Add is fused into the NCHWc Conv before it (Conv/Sum fusion, which
changes the rounding) depends on whether ORT can show the Add's operands have equal shapes, which it
tracks through Convs and pools by where each dimension came from (passes/ort_nchwc.py).  Each case
checks the number of Sum-fused Convs against ORT's own optimized graph and the output bit for bit.

Found on a published OCR model (ddddocr's float CRNN: SiLU blocks with residual Adds on an input of
unknown width), whose output differed from ORT on 86% of the values while every residual Add was
left unfused; the first case is its block structure.  The last case: a Conv whose input has no
known shape (PP-OCRv4's recognizer, a Concat shape inference gives up on) is converted by ORT all the
same (98% of that model's output bits differed).  And paddle2onnx's Identity nodes, which ORT removes
before any fusion (PP-OCRv6's recognizers: 99% of the output bits differed)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.passes.ort_nchwc import MARK  # noqa: E402
from tests.conformance.test_ort_float_nchwc import _avx512f, _bits  # noqa: E402
from tests.onnx_models import ort_optimized, ort_output  # noqa: E402

pytestmark = pytest.mark.skipif(not _avx512f(), reason="the onnxruntime-cpu scheme models an AVX-512 CPU "
                                                       "(NCHWc block 16); this CPU has no AVX-512F")


def _conv(i, o, cin, cout, k, rng, inits, **attrs):
    inits += [numpy_helper.from_array(rng.normal(0, 0.3, (cout, cin, k, k)).astype(np.float32), o + "_w"),
              numpy_helper.from_array(rng.normal(0, 0.3, cout).astype(np.float32), o + "_b")]
    return helper.make_node("Conv", [i, o + "_w", o + "_b"], [o], **attrs)


def _silu(i, o):
    return [helper.make_node("Sigmoid", [i], [o + "_s"]), helper.make_node("Mul", [i, o + "_s"], [o])]


def _relu(i, o):
    return [helper.make_node("Relu", [i], [o])]


def _silu_residual(rng, inits):  # ddddocr's block: stem (1 channel, stride 2), SiLU, 3x3, SiLU, 1x1, + stem
    return [_conv("x", "a0", 1, 24, 3, rng, inits, pads=[1] * 4, strides=[2, 2]), *_silu("a0", "a"),
            _conv("a", "b0", 24, 24, 3, rng, inits, pads=[1] * 4), *_silu("b0", "b"),
            _conv("b", "c", 24, 24, 1, rng, inits), helper.make_node("Add", ["a", "c"], ["y"])]


def _stride2_shortcut(rng, inits):  # both branches halve the same symbolic H and W once
    return [_conv("x", "a0", 32, 32, 3, rng, inits, pads=[1] * 4), *_relu("a0", "a"),
            _conv("a", "b0", 32, 32, 3, rng, inits, pads=[1] * 4, strides=[2, 2]), *_relu("b0", "b1"),
            _conv("b1", "b", 32, 32, 1, rng, inits), _conv("a", "c", 32, 32, 1, rng, inits, strides=[2, 2]),
            helper.make_node("Add", ["b", "c"], ["y"])]


def _pool_branch_unprovable(rng, inits):  # a 2x2 pool (pads 0) loses the dimension: ORT adds in NCHWc, unfused
    return [_conv("x", "a0", 32, 32, 3, rng, inits, pads=[1] * 4), *_relu("a0", "a"),
            helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            _conv("a", "c", 32, 32, 1, rng, inits, strides=[2, 2]), helper.make_node("Add", ["p", "c"], ["s"]),
            helper.make_node("GlobalAveragePool", ["s"], ["y"])]  # NCHWc order only if the Add stays NCHWc


def _two_stems(rng, inits):  # two Convs reading the NCHW input: shapes equal only by shape inference
    return [_conv("x", "a", 3, 16, 3, rng, inits, pads=[1] * 4), _conv("x", "c", 3, 16, 1, rng, inits),
            helper.make_node("Add", ["a", "c"], ["s"]), helper.make_node("GlobalAveragePool", ["s"], ["y"])]


def _narrow_conv_reads_nchw(rng, inits):  # a plain Conv of 8 input channels reads NCHW: its dims are new
    return [_conv("x", "s0", 16, 16, 3, rng, inits, pads=[1] * 4), *_relu("s0", "s"),
            _conv("s", "a", 16, 8, 3, rng, inits, pads=[1] * 4), _conv("a", "b", 8, 16, 1, rng, inits),
            helper.make_node("Add", ["s", "b"], ["y"])]


def _shapeless_input(rng, inits):  # x declared without a shape: ORT still converts the Convs (PP-OCRv4 rec's
    # Concat of unknown rank feeding a Conv)
    return [_conv("x", "a0", 16, 32, 3, rng, inits, pads=[1] * 4), *_relu("a0", "a"),
            _conv("a", "c", 32, 32, 1, rng, inits), helper.make_node("Add", ["a", "c"], ["y"])]


def _paddle_identities(rng, inits):  # paddle2onnx's Identity after each op: ORT eliminates them first (level 1),
    # so the chain stays NCHWc and the residual Add fuses; the last Identity is the graph output
    return [_conv("x", "a0", 16, 32, 3, rng, inits, pads=[1] * 4), helper.make_node("Identity", ["a0"], ["a1"]),
            *_relu("a1", "a"), helper.make_node("Identity", ["a"], ["a2"]),
            _conv("a2", "c0", 32, 32, 1, rng, inits), helper.make_node("Identity", ["c0"], ["c"]),
            helper.make_node("Add", ["a2", "c"], ["s"]), helper.make_node("Identity", ["s"], ["y"])]


# name -> (builder, declared input dims (None: no shape), fed input shape, Sum fusions ORT makes)
CASES = {
    "silu-residual-symbolic-width": (_silu_residual, [1, 1, 64, "W"], (1, 1, 64, 160), 1),
    "stride2-shortcut-symbolic-hw": (_stride2_shortcut, [1, 32, "H", "W"], (1, 32, 21, 18), 1),
    "pool-branch-unprovable": (_pool_branch_unprovable, [1, 32, "H", "W"], (1, 32, 20, 18), 0),
    "two-stems-named-batch": (_two_stems, ["N", 3, 16, 16], (2, 3, 16, 16), 1),
    "two-stems-unnamed-batch": (_two_stems, [None, 3, 16, 16], (2, 3, 16, 16), 0),
    "narrow-conv-reads-nchw": (_narrow_conv_reads_nchw, [1, 16, "H", "W"], (1, 16, 12, 13), 0),
    "shapeless-input": (_shapeless_input, None, (1, 16, 11, 9), 0),
    "paddle-identities": (_paddle_identities, [1, 16, "H", "W"], (1, 16, 10, 12), 1),
}


def _ort_sum_fusions(model: bytes, tmp_path) -> int:
    _, g = ort_optimized(model, tmp_path / "ort_optimized.onnx")
    return sum(1 for n in g.node if n.op_type == "Conv" and n.domain == "com.microsoft.nchwc"
               and len(n.input) > 3 and n.input[3])


@pytest.mark.parametrize("case", sorted(CASES))
def test_sum_fusion_with_symbolic_dimensions(tmp_path, case):
    build, dims, shape, fusions = CASES[case]
    rng = np.random.default_rng(len(case))
    inits: list = []
    nodes = build(rng, inits)
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    g = helper.make_graph(nodes, "g", [x_info], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    assert _ort_sum_fusions(m.SerializeToString(), tmp_path) == fusions, "ONNX Runtime fuses differently now"
    sess = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    ours = sum(1 for n in sess.graph.nodes if n.op == "Conv" and n.attr(MARK) and len(n.inputs) > 3 and n.inputs[3])
    assert ours == fusions
    x = rng.normal(0, 1, shape).astype(np.float32)
    want = ort_output(m.SerializeToString(), {"x": x}, "ORT_ENABLE_ALL")
    got = sess.run({"x": x})["y"]
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.2%} of the values differ from ORT_ENABLE_ALL"
