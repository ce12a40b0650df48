"""Float CNNs under ``onnxruntime-cpu`` against onnxruntime 1.32.0 at its default ORT_ENABLE_ALL, bit for
bit: the level-1 Conv folds (BatchNormalization / Mul / Add into the Conv, passes/ort_fold.py), the
NchwcTransformer's NCHWc Convs with their Sum and BatchNormalization rewrites (passes/ort_nchwc.py,
kernels/onnxruntime/float_conv_nchwc.py), the NCHWc and plain GlobalAveragePool orders
(float_pool.py) and the transposed-B M1 SGEMM kernel of N == 1 products (float_sgemm.py).  Each
single-layer case also shows that ORT_DISABLE_ALL rounds differently (so the test can fail), and a
published float CNN (PaddleOCR's text-direction classifier, MobileNetV3 with SE blocks) is compared
whole."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.onnx_models import ort_output  # noqa: E402

F = TensorProto.FLOAT
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "onnx_published"


def _avx512f() -> bool:
    try:
        return " avx512f" in open("/proc/cpuinfo").read()
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _avx512f(), reason="the onnxruntime-cpu scheme models an AVX-512 CPU "
                                                       "(NCHWc block 16); this CPU has no AVX-512F")


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _compare(tmp_path, nodes, inits, inputs: dict, opset=13) -> float:
    """Bits of refinterp vs ORT_ENABLE_ALL must be equal; returns the share ORT_DISABLE_ALL differs on."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, F, list(v.shape)) for k, v in inputs.items()],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = ort_output(m.SerializeToString(), inputs, "ORT_ENABLE_ALL")
    got = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu").run(inputs)["y"]
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.2%} of the values differ from ORT_ENABLE_ALL"
    return float(np.mean(_bits(ort_output(m.SerializeToString(), inputs, "ORT_DISABLE_ALL")) != _bits(want)))


def _conv(i, w, b, o, **attrs):
    return helper.make_node("Conv", [i, w] + ([b] if b else []), [o], **attrs)


def _bn(i, o, p):
    return helper.make_node("BatchNormalization", [i, p + "s", p + "b", p + "m", p + "v"], [o], epsilon=1e-3)


class _Inits:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, name, *shape):
        return numpy_helper.from_array(self.rng.normal(0, 1, shape).astype(np.float32), name)

    def bn(self, p, c):
        return [self(p + "s", c), self(p + "b", c), self(p + "m", c),
                numpy_helper.from_array(self.rng.uniform(0.1, 2, c).astype(np.float32), p + "v")]


# (x shape, w shape, attributes, bias): each of MlasNchwcConv's algorithms and their edges
LAYERS = {
    "nchw-input-3ch-stride2": ((1, 3, 17, 19), (16, 3, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2]), True),
    "nchwc-3x3": ((1, 32, 9, 11), (32, 32, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    "nchwc-24ch-padded-block-uneven-pads": ((1, 24, 9, 11), (20, 24, 3, 3), dict(pads=[1, 0, 2, 1]), True),
    "nchwc-dilated": ((1, 32, 12, 12), (16, 32, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), True),
    "nchwc-grouped": ((1, 64, 8, 8), (64, 32, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), True),
    "pointwise-2-batches": ((1, 160, 7, 6), (32, 160, 1, 1), {}, True),
    "pointwise-300ch-no-bias": ((1, 300, 5, 5), (48, 300, 1, 1), {}, False),
    "depthwise-3x3": ((1, 32, 10, 10), (32, 1, 3, 3), dict(group=32, pads=[1, 1, 1, 1]), True),
    "depthwise-5x5-stride2": ((1, 32, 11, 10), (32, 1, 5, 5), dict(group=32, pads=[2, 2, 2, 2], strides=[2, 2]), True),
    "nchw-input-batch2": ((2, 8, 9, 9), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), True),
}


@pytest.mark.parametrize("case", sorted(LAYERS))
def test_nchwc_conv_layer_bit_exact(tmp_path, case):
    xs, ws, attrs, bias = LAYERS[case]
    init = _Inits(len(case))
    inits = [init("w", *ws)] + ([init("b", ws[0])] if bias else [])
    x = init.rng.normal(0, 1, xs).astype(np.float32)
    moved = _compare(tmp_path, [_conv("x", "w", "b" if bias else None, "y", **attrs)], inits, {"x": x})
    assert moved > 0, "ORT_DISABLE_ALL was expected to round some outputs differently"


GRAPHS = {  # name -> (builder(init) -> (nodes, inits), x shape, opset)
    "residual-conv-plus-conv-relu": (lambda i: (
        [_conv("x", "w1", "b1", "a", pads=[1, 1, 1, 1]), _conv("x", "w2", "b2", "c"),
         helper.make_node("Add", ["c", "a"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        [i("w1", 32, 32, 3, 3), i("b1", 32), i("w2", 32, 32, 1, 1), i("b2", 32)]), (1, 32, 9, 9), 13),
    "resnet-block-bn-identity-opset22": (lambda i: (
        [_conv("x", "w1", "b1", "a", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"]),
         _conv("r", "w2", "b2", "c", pads=[1, 1, 1, 1]), _bn("c", "d", "n"), helper.make_node("Add", ["d", "x"], ["s"]),
         helper.make_node("Relu", ["s"], ["y"])],
        [i("w1", 32, 32, 3, 3), i("b1", 32), i("w2", 32, 32, 3, 3), i("b2", 32)] + i.bn("n", 32)), (1, 32, 8, 8), 22),
    "stem-depthwise-pool-pointwise-gap-batch2": (lambda i: (
        [_conv("x", "w1", "b1", "a", pads=[1, 1, 1, 1], strides=[2, 2]), helper.make_node("Relu", ["a"], ["r"]),
         _conv("r", "w2", None, "c", pads=[1, 1, 1, 1], group=16),
         helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), _conv("p", "w3", "b3", "q"),
         helper.make_node("GlobalAveragePool", ["q"], ["y"])],
        [i("w1", 16, 3, 3, 3), i("b1", 16), i("w2", 16, 1, 3, 3), i("w3", 48, 16, 1, 1), i("b3", 48)]), (2, 3, 32, 32), 13),
    "conv-nobias-bn-relu": (lambda i: (
        [_conv("x", "w", None, "c", pads=[1, 1, 1, 1]), _bn("c", "r", "n"), helper.make_node("Relu", ["r"], ["y"])],
        [i("w", 32, 16, 3, 3)] + i.bn("n", 32)), (1, 16, 9, 9), 13),
    "conv-mul-add-folded": (lambda i: (
        [_conv("x", "w", "b", "c"), helper.make_node("Mul", ["c", "m"], ["d"]), helper.make_node("Add", ["d", "a"], ["y"])],
        [i("w", 32, 16, 1, 1), i("b", 32), i("m", 32, 1, 1), i("a", 1, 32, 1, 1)]), (1, 16, 9, 9), 13),
    "dense-concat-bn-as-depthwise": (lambda i: (
        [_conv("x", "w", "b", "c", pads=[1, 1, 1, 1]), helper.make_node("Concat", ["x", "c"], ["k"], axis=1),
         _bn("k", "r", "n"), helper.make_node("Relu", ["r"], ["q"]), _conv("q", "w2", "b2", "y")],
        [i("w", 16, 16, 3, 3), i("b", 16)] + i.bn("n", 32) + [i("w2", 16, 32, 1, 1), i("b2", 16)]), (1, 16, 9, 9), 13),
    "bn-conv-takes-the-sum": (lambda i: (
        [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[1, 1]), _bn("p", "q", "n"), _conv("p", "w", "b", "c"),
         helper.make_node("Add", ["q", "c"], ["y"])],
        i.bn("n", 32) + [i("w", 32, 32, 1, 1), i("b", 32)]), (1, 32, 6, 6), 13),
    "conv-hardswish-fused-then-nchwc-gap-opset14": (lambda i: (  # ORT fuses the HardSwish into the Conv, the
        # GlobalAveragePool then reads NCHWc (MLAS's NCHWc order; found on RapidOCR's orientation classifier)
        [_conv("x", "w", "b", "c", pads=[1, 1, 1, 1]), helper.make_node("HardSwish", ["c"], ["h"]),
         helper.make_node("GlobalAveragePool", ["h"], ["y"])],
        [i("w", 32, 16, 3, 3), i("b", 32)]), (1, 16, 15, 13), 14),
    "se-block-gap-8ch-plain-and-n1-convs": (lambda i: (
        [_conv("x", "w", "b", "c", pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["g"]), _conv("g", "w1", "b1", "h"), helper.make_node("Relu", ["h"], ["h2"]),
         _conv("h2", "w2", "b2", "k"), helper.make_node("HardSigmoid", ["k"], ["hs"], alpha=0.2, beta=0.5),
         helper.make_node("Mul", ["r", "hs"], ["y"])],
        [i("w", 22, 8, 3, 3), i("b", 22), i("w1", 90, 22, 1, 1), i("b1", 90), i("w2", 22, 90, 1, 1), i("b2", 22)]),
        (2, 8, 13, 11), 13),
}


@pytest.mark.parametrize("case", sorted(GRAPHS))
def test_nchwc_graph_rewrites_bit_exact(tmp_path, case):
    build, xs, opset = GRAPHS[case]
    init = _Inits(len(case))
    nodes, inits = build(init)
    _compare(tmp_path, nodes, inits, {"x": init.rng.normal(0, 1, xs).astype(np.float32)}, opset)


def test_matmul_column_vector_takes_the_transposed_b_m1_kernel(tmp_path):
    rng = np.random.default_rng(3)
    feeds = {"a": rng.normal(0, 1, (37, 301)).astype(np.float32), "b": rng.normal(0, 1, (301, 1)).astype(np.float32)}
    moved = _compare(tmp_path, [helper.make_node("MatMul", ["a", "b"], ["y"])], [], feeds)
    assert moved == 0  # no graph rewrite: the kernel order is the same at both levels
    generic = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), "float32").run(feeds)["y"]
    want = ort_output((tmp_path / "m.onnx").read_bytes(), feeds, "ORT_ENABLE_ALL")
    assert not np.array_equal(_bits(generic), _bits(want)), "the generic order was expected to differ"


def test_published_mobilenetv3_classifier_at_default_optimisation():
    """PaddleOCR's text-direction classifier (MobileNetV3-small with SE blocks, opset 11, 53 Convs, 35
    BatchNormalizations folded, 48 NCHWc Convs, HardSigmoid / hard-swish, Gemm, Softmax) at ORT's
    default ORT_ENABLE_ALL: the softmax output equals ONNX Runtime's bit for bit (at ORT_DISABLE_ALL
    ONNX Runtime itself gives other bits)."""
    path = CORPUS / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 48, 192)).astype(np.float32)
    want = ort_output(path.read_bytes(), {"x": x}, "ORT_ENABLE_ALL")
    got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run({"x": x})
    y = got["save_infer_model/scale_0.tmp_1"]
    assert np.array_equal(_bits(y), _bits(want)), np.abs(y - want).max()
    assert not np.array_equal(_bits(ort_output(path.read_bytes(), {"x": x}, "ORT_DISABLE_ALL")), _bits(want))


def test_float_mobilenet_v2_224_at_default_optimisation(tmp_path):
    """The float MobileNetV2-224 of the benchmarks (tools/make_bench_models.py --model mnv2_224_f32:
    BatchNormalization folded, ReLU6 as Clip, residual Adds, GlobalAveragePool, Gemm): ORT fuses the
    Clips into its NCHWc Convs (ConvActivationFusion) and the residual Adds into the projection
    Convs; the logits equal ORT_ENABLE_ALL bit for bit, where ORT_DISABLE_ALL gives other bits."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "tools/make_bench_models.py"), "--model", "mnv2_224_f32",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "mobilenet_v2_224_f32.onnx"
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    want = ort_output(path.read_bytes(), {"input": x}, "ORT_ENABLE_ALL")
    got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run({"input": x})["logits"]
    assert np.array_equal(_bits(got), _bits(want)), np.abs(got - want).max()
    assert not np.array_equal(_bits(ort_output(path.read_bytes(), {"input": x}, "ORT_DISABLE_ALL")), _bits(want))
