"""`refinterp capture --runtime onnxruntime` of *float* models at ORT's default level (all): the dump
holds what ORT's optimized graph computes -- one tensor per node ORT runs, named back to the model
(Conv folds, FusedConv, NCHWc Convs with their Sum / activation fusions, BatchNormalization as a
depthwise Conv, NCHWc pools), its NCHWc-blocked tensors read through ORT's own ReorderOutput -- and
every captured tensor equals refinterp's ``onnxruntime-cpu`` bit for bit (that scheme is verified
against ORT_ENABLE_ALL in test_ort_float_nchwc.py).  Exposing every tensor of the *original* model
instead would stop ORT's fusions (the capture would then not be the deployed arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.dumps.capture import capture  # noqa: E402
from tests.conformance.test_ort_float_nchwc import CORPUS, GRAPHS, F, _bits, _Inits, pytestmark  # noqa: E402,F401

# per graph of test_ort_float_nchwc.GRAPHS: the model tensors ORT's optimized graph computes (one per
# node it runs), read from the fusions it makes; "x" is the input
DEPLOYED = {
    "residual-conv-plus-conv-relu": {"x", "a", "y"},  # conv c takes the Add (Sum fusion), then the Relu
    "resnet-block-bn-identity-opset22": {"x", "r", "d", "s", "y"},  # BN folded into conv 2; the Add
    # (its other input, x, is not NCHWc) and the last Relu run as they are
    "stem-depthwise-pool-pointwise-gap-batch2": {"x", "r", "c", "p", "q", "y"},
    "conv-nobias-bn-relu": {"x", "y"},  # BN folded, Relu fused
    "conv-mul-add-folded": {"x", "y"},
    "dense-concat-bn-as-depthwise": {"x", "c", "k", "r", "q", "y"},  # Concat of a non-NCHWc input: the
    # Concat, BN and Relu stay plain nodes
    "bn-conv-takes-the-sum": {"x", "p", "c", "y"},  # the BN, as an NCHWc depthwise conv, takes the Add
    "se-block-gap-8ch-plain-and-n1-convs": {"x", "r", "g", "h2", "hs", "y"},
    "conv-hardswish-fused-then-nchwc-gap-opset14": {"x", "h", "y"},  # HardSwish fused into the conv
}


def _check(path, feeds, deployed=None) -> int:
    g = refinterp.load(str(path))
    dump = capture(g, "onnxruntime", [feeds])[0]
    ours = refinterp.Session(g, "onnxruntime-cpu").run(feeds, capture="all")
    for name, want in dump.items():
        got = np.asarray(ours[name])
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
        assert np.array_equal(_bits(got), _bits(want)), f"{name}: {np.mean(_bits(got) != _bits(want)):.2%} differ"
    if deployed is not None:
        assert set(dump) == deployed
    return len(dump)


@pytest.mark.parametrize("case", sorted(GRAPHS))
def test_float_graph_capture_is_the_optimized_graph(tmp_path, case):
    build, xs, opset = GRAPHS[case]
    init = _Inits(len(case))
    nodes, inits = build(init)
    x = init.rng.normal(0, 1, xs).astype(np.float32)
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(xs))],
                                            [helper.make_tensor_value_info("y", F, None)], inits),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    onnx.save(m, str(tmp_path / "m.onnx"))
    _check(tmp_path / "m.onnx", {"x": x}, DEPLOYED[case])


def test_published_classifier_capture_every_deployed_tensor():
    """PaddleOCR's MobileNetV3 classifier: 48 NCHWc Convs (Sum, HardSigmoid and BN folds), SE blocks
    on plain 1x1 Convs, Gemm, Softmax; each tensor ORT computes is captured and bit-exact."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    n = _check(CORPUS / "ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": x})
    assert n >= 60, n


def test_exported_transformer_block_capture():
    """PyTorch's dynamo export of a transformer block (tests/fixtures/onnx): ORT's Gemms (MatMul + Add,
    reshaped), FusedMatMul (the two scale Muls folded into alpha, the key Transpose merged by ORT's
    transpose optimizer into a new (0, 2, 3, 1) Transpose -- a data transpose, not a layout change),
    SkipLayerNormalization and the tanh GELU's own nodes: every tensor ORT computes that stands for a
    model tensor is captured, and each is bit-exact under onnxruntime-cpu."""
    path = CORPUS.parents[1] / "fixtures" / "onnx" / "transformer_block_float32.onnx"
    x = np.random.default_rng(3).uniform(-1, 1, (2, 10, 64)).astype(np.float32)
    deployed = {"x", "linear", "split_split_0", "split_split_1", "split_split_2", "view", "view_1", "view_2",
                "view_3", "transpose", "transpose_2", "transpose_3", "val_46", "val_52", "val_53",
                "scaled_dot_product_attention", "linear_1", "layer_norm", "linear_2", "val_66", "val_68", "val_69",
                "val_71", "val_72", "val_74", "val_76", "gelu", "linear_3", "y"}
    assert _check(path, {"x": x}, deployed) == 29
