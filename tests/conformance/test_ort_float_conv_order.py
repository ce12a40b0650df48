"""Float Conv summation order of the ``onnxruntime-cpu`` scheme (variant ``ort_float``) vs onnxruntime:
pointwise convs (GemmDirect) and, at the end, spatial ones (expand then GEMM).

With int8 activations ORT (x86, ORT_ENABLE_ALL) leaves some QDQ Conv units unfused:
DequantizeLinear -> float Conv -> QuantizeLinear.  MLAS runs such a pointwise Conv as one SGEMM
(MlasConvAlgorithmGemmDirect) whose float32 sum is an FMA chain per K block of 128 (or more, for
narrow N) -- a different order from NumPy/BLAS, so a result 1 ulp away flips QuantizeLinear's
rounding.  These tests compare float32 results bit for bit (the order is reproduced, not
approximated) and integer tensors with 0 tolerance.

* single float pointwise Conv models (weights a graph input, so ORT keeps a plain MLAS Conv instead
  of its constant-weight NCHWc rewrite), shapes that exercise K <= 128, K blocks of 128, widened K
  blocks for narrow N, and the thread split of N (two intra-op threads on two physical cores);
* an int8 QDQ model shaped like MobileNetV2's residual projections (the Conv's Q output feeds two
  DQs, so ORT keeps the Conv in float): every tensor of ORT's optimized graph (refinterp capture)
  vs refinterp.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.dumps.capture import capture  # noqa: E402
from refinterp.kernels.onnxruntime.float_sgemm import segments, stride_k  # noqa: E402

F = TensorProto.FLOAT


def _save(tmp_path, g, name):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return m, str(path)


def _float_conv_model(tmp_path, cin, cout, h, w, bias):
    ins = [helper.make_tensor_value_info("x", F, [1, cin, h, w]),
           helper.make_tensor_value_info("w", F, [cout, cin, 1, 1])]
    names = ["x", "w"]
    if bias:
        ins.append(helper.make_tensor_value_info("b", F, [cout]))
        names.append("b")
    g = helper.make_graph([helper.make_node("Conv", names, ["y"], kernel_shape=[1, 1])], "pw", ins,
                          [helper.make_tensor_value_info("y", F, None)])
    return _save(tmp_path, g, f"pw_{cin}_{cout}_{h}x{w}")


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


# (cin=K, cout=M, h, w): N = h*w
SHAPES = [
    (96, 24, 56, 56),    # K < 128, N > M: N split over threads, one K block
    (144, 32, 28, 28),   # K blocks 128 + 16
    (384, 96, 14, 14),   # K blocks of 128 (3 blocks)
    (576, 160, 7, 7),    # N = 49 < K: K block widened to 256 (M split); narrow: row-vectorised loop
    (160, 960, 7, 7),    # many rows, 49 columns: row-vectorised loop, K blocks 128 + 32
    (576, 32, 7, 7),     # N > M, N split into 32 + 17 columns: K block 512 per segment
    (960, 40, 5, 5),     # K block 512 + 448, N split 16 + 9
    (300, 7, 3, 11),     # odd sizes
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cin,cout,h,w", SHAPES)
def test_float_pointwise_conv_bit_exact(tmp_path, cin, cout, h, w, bias):
    m, path = _float_conv_model(tmp_path, cin, cout, h, w, bias)
    rng = np.random.default_rng(cin * 7 + cout)
    feeds = {"x": rng.uniform(-1, 1, (1, cin, h, w)).astype(np.float32),
             "w": rng.uniform(-1, 1, (cout, cin, 1, 1)).astype(np.float32)}
    if bias:
        feeds["b"] = rng.uniform(-1, 1, cout).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run(feeds)["y"]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(want)), f"{np.mean(_bits(got) != _bits(want)):.3%} differ"


def test_generic_float_order_differs_where_k_is_blocked(tmp_path):
    """The old (NumPy/BLAS) order is not MLAS's for K > 128: the case this variant exists for."""
    m, path = _float_conv_model(tmp_path, 384, 96, 14, 14, True)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.uniform(-1, 1, (1, 384, 14, 14)).astype(np.float32),
             "w": rng.uniform(-1, 1, (96, 384, 1, 1)).astype(np.float32),
             "b": rng.uniform(-1, 1, 96).astype(np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    generic = refinterp.Session(refinterp.load(path), "float32").run(feeds)["y"]
    assert not np.array_equal(_bits(generic), _bits(want))


def test_blocking_rules():
    assert stride_k(3136, 96) == 128 and stride_k(196, 384) == 128
    assert stride_k(49, 576) == 256 and stride_k(32, 576) == 512 and stride_k(17, 576) == 512
    assert stride_k(3136, 24) == 32
    assert segments(32, 49, 576, 2) == [(0, 32, 0, 32), (0, 32, 32, 17)]
    assert segments(160, 49, 576, 2) == [(0, 80, 0, 49), (80, 80, 0, 49)]
    assert segments(4, 4, 4, 2) == [(0, 4, 0, 4)]  # below the threading threshold


def _qdq_residual_model(tmp_path):
    """x -Q-DQ-> Conv(384->96, int8 per-channel weights, int32 bias) -> Q -> {DQ -> Conv -> Q,
    DQ -> Add(..., DQ(skip)) -> Q}: the first Conv's Q feeds two DQs, so ORT keeps it in float."""
    rng = np.random.default_rng(11)
    i8 = TensorProto.INT8
    cin, cmid = 384, 96
    w1 = rng.integers(-127, 128, (cmid, cin, 1, 1)).astype(np.int8)
    w2 = rng.integers(-127, 128, (cmid, cmid, 1, 1)).astype(np.int8)
    xs, ys = np.float32(0.0235), np.float32(0.0913)
    w1s = (rng.uniform(1, 4, cmid) * 1e-3).astype(np.float32)
    w2s = (rng.uniform(1, 4, cmid) * 1e-3).astype(np.float32)
    b1s, b2s = (xs * w1s).astype(np.float32), (ys * w2s).astype(np.float32)
    # int32 biases behind DequantizeLinear (quantize_static's form): a float bias initializer would be
    # rewritten by ORT's bias quantization, which is not what this test is about
    b1 = np.rint(rng.uniform(-0.5, 0.5, cmid) / b1s).astype(np.int32)
    b2 = np.rint(rng.uniform(-0.5, 0.5, cmid) / b2s).astype(np.int32)
    inits = [numpy_helper.from_array(v, k) for k, v in dict(
        xs=xs, xz=np.int8(-3), w1=w1, w1s=w1s, w1z=np.zeros(cmid, np.int8), b1=b1, b1s=b1s,
        ys=ys, yz=np.int8(2), w2=w2, w2s=w2s, w2z=np.zeros(cmid, np.int8), b2=b2, b2s=b2s,
        zs=np.float32(0.071), zz=np.int8(-1), os_=np.float32(0.12), oz=np.int8(0)).items()]
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), n("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        n("DequantizeLinear", ["w1", "w1s", "w1z"], ["w1d"], axis=0),
        n("DequantizeLinear", ["b1", "b1s"], ["b1d"], axis=0),
        n("Conv", ["xd", "w1d", "b1d"], ["y1"], kernel_shape=[1, 1], name="conv_a"),
        n("QuantizeLinear", ["y1", "ys", "yz"], ["y1q"]),
        n("DequantizeLinear", ["y1q", "ys", "yz"], ["y1d"]),
        n("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2d"], axis=0),
        n("DequantizeLinear", ["b2", "b2s"], ["b2d"], axis=0),
        n("Conv", ["y1d", "w2d", "b2d"], ["y2"], kernel_shape=[1, 1], name="conv_b"),
        n("QuantizeLinear", ["y2", "zs", "zz"], ["y2q"]), n("DequantizeLinear", ["y2q", "zs", "zz"], ["y2d"]),
        n("Add", ["y1d", "y2d"], ["s"], name="add"),
        n("QuantizeLinear", ["s", "os_", "oz"], ["sq"]),
    ]
    g = helper.make_graph(nodes, "qdq_res", [helper.make_tensor_value_info("x", F, [1, cin, 14, 14])],
                          [helper.make_tensor_value_info("sq", i8, None)], initializer=inits)
    return _save(tmp_path, g, "qdq_res")


def test_qdq_int8_unfused_conv_every_tensor(tmp_path):
    m, path = _qdq_residual_model(tmp_path)
    g = refinterp.load(path)
    sess = refinterp.Session(g, "onnxruntime-cpu")
    rng = np.random.default_rng(0)
    samples = [{"x": rng.uniform(-3, 3, (1, 384, 14, 14)).astype(np.float32)} for _ in range(4)]
    dumps = capture(g, "onnxruntime", samples)
    assert "y1" in dumps[0], "ORT fused the first Conv: the model no longer exercises a float Conv"
    compared = 0
    for feed, dump in zip(samples, dumps):
        got = sess.run(feed, capture="all")
        for name, want in dump.items():
            if name not in got:
                continue
            v = np.asarray(got[name])
            assert v.dtype == want.dtype and v.shape == want.shape, name
            if want.dtype.kind == "f":
                assert np.array_equal(_bits(v), _bits(want)), f"float tensor {name} differs"
            else:
                assert np.array_equal(v, want), f"integer tensor {name} differs"
            compared += 1
    assert compared >= 4 * 5


def test_steps_report_the_kernel_that_runs(tmp_path):
    """ort_float computes pointwise and spatial NCHW float convs (grouped and single-filter ones
    included) in MLAS's order and reports ``ort_float`` for them; other layouts go to the generic
    float kernel (Delegate) and are reported as ``float``."""
    _, pw = _float_conv_model(tmp_path, 8, 4, 5, 5, False)

    def conv(name, cout, group):
        g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], group=group)],
                              name, [helper.make_tensor_value_info("x", F, [1, 8, 5, 5]),
                                     helper.make_tensor_value_info("w", F, [cout, 8 // group, 3, 3])],
                              [helper.make_tensor_value_info("y", F, None)])
        return _save(tmp_path, g, name)[1]

    def variants(path):
        return [st.kernel.variant for st in refinterp.Session(refinterp.load(path), "onnxruntime-cpu").steps]

    assert variants(pw) == ["ort_float"]
    assert variants(conv("k3", 4, 1)) == ["ort_float"]
    assert variants(conv("dw", 8, 8)) == ["ort_float"]
    assert variants(conv("one", 1, 1)) == ["ort_float"]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1], group=2)], "gpw",
                          [helper.make_tensor_value_info("x", F, [1, 8, 5, 5]),
                           helper.make_tensor_value_info("w", F, [4, 4, 1, 1])],
                          [helper.make_tensor_value_info("y", F, None)])
    assert variants(_save(tmp_path, g, "gpw")[1]) == ["ort_float"]  # computed by the generic kernel at run time


# -- spatial convolutions: MLAS expand-then-GEMM (float_conv_expand.py) ---------------------------------

def _spatial_conv_model(tmp_path, cin, cout, shape, kernel, attrs, batch=1):
    sp = len(shape)
    ins = [helper.make_tensor_value_info("x", F, [batch, cin, *shape]),
           helper.make_tensor_value_info("w", F, [cout, cin // attrs.get("group", 1), *kernel]),
           helper.make_tensor_value_info("b", F, [cout])]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=list(kernel), **attrs)],
                          "sp", ins, [helper.make_tensor_value_info("y", F, None)])
    return _save(tmp_path, g, f"sp_{cin}_{cout}_{'x'.join(map(str, shape))}_{sp}")


# (cin, cout, spatial, kernel, attributes): K = cin * prod(kernel), N = prod(out)
SPATIAL = {
    "3x3-pad1-segmented": (32, 64, (28, 28), (3, 3), dict(pads=[1, 1, 1, 1])),     # N split over threads
    "3x3-stride2": (16, 32, (56, 56), (3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    "3x3-K-blocked": (64, 48, (14, 14), (3, 3), dict(pads=[1, 1, 1, 1])),         # K = 576 > N = 196
    "5x5-dilated": (8, 24, (20, 17), (5, 5), dict(dilations=[2, 2], pads=[4, 4, 4, 4])),
    "7x7-stem": (3, 16, (64, 64), (7, 7), dict(pads=[3, 3, 3, 3], strides=[2, 2])),
    "same-upper-odd": (5, 7, (9, 13), (3, 2), dict(auto_pad="SAME_UPPER")),
    "filters-exceed-positions": (40, 96, (4, 4), (3, 3), {}),                     # ExpandThenGemm: MlasGemm
    "1d": (12, 20, (50,), (5,), dict(pads=[2, 2])),
    "3d": (4, 8, (6, 7, 8), (3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
    "one-filter": (16, 1, (20, 20), (3, 3), dict(pads=[1, 1, 1, 1])),             # M1 kernel, K = 144
    "depthwise": (24, 24, (28, 28), (3, 3), dict(pads=[1, 1, 1, 1], group=24)),   # M1 per group, K = 9
    "depthwise-x2-stride2": (16, 32, (15, 15), (3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=16)),
    "grouped": (32, 48, (12, 12), (3, 3), dict(pads=[1, 1, 1, 1], group=4)),      # 12 filters per group
    "depthwise-5x5": (8, 8, (33, 9), (5, 5), dict(pads=[2, 2, 2, 2], group=8)),   # K = 25: 4-groups + 1
}


@pytest.mark.parametrize("case", sorted(SPATIAL))
def test_float_spatial_conv_bit_exact(tmp_path, case):
    cin, cout, shape, kernel, attrs = SPATIAL[case]
    m, path = _spatial_conv_model(tmp_path, cin, cout, shape, kernel, attrs)
    rng = np.random.default_rng(len(case) * 31 + cin)
    feeds = {"x": rng.uniform(-1, 1, (1, cin, *shape)).astype(np.float32),
             "w": rng.uniform(-1, 1, (cout, cin // attrs.get("group", 1), *kernel)).astype(np.float32),
             "b": rng.uniform(-1, 1, cout).astype(np.float32)}
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run(feeds)["y"]
        assert got.shape == want.shape
        assert np.array_equal(_bits(got), _bits(want)), f"{level}: {np.mean(_bits(got) != _bits(want)):.3%} differ"
    generic = refinterp.Session(refinterp.load(path), "float32").run(feeds)["y"]
    print(f"\n{case}: bit-exact; the generic float order differs on {np.mean(_bits(generic) != _bits(want)):.2%}")


# several images: MlasConv's batch-group work items, image by image (GemmDirect: one single-threaded
# GEMM per image); (batch, cin, cout, spatial, kernel, attributes)
BATCHED = {
    "pointwise-b3": (3, 16, 32, (20, 20), (1, 1), {}),
    "pointwise-K512-b2": (2, 512, 64, (14, 14), (1, 1), {}),
    "3x3-b3": (3, 8, 16, (15, 15), (3, 3), dict(pads=[1, 1, 1, 1])),
    "3x3-stride2-b2": (2, 32, 64, (30, 30), (3, 3), dict(strides=[2, 2])),
    "depthwise-b2": (2, 16, 16, (14, 14), (3, 3), dict(pads=[1, 1, 1, 1], group=16)),
    "grouped-b2": (2, 16, 32, (14, 14), (3, 3), dict(group=4)),
}


@pytest.mark.parametrize("case", sorted(BATCHED))
def test_float_conv_batch_bit_exact(tmp_path, case):
    batch, cin, cout, shape, kernel, attrs = BATCHED[case]
    m, path = _spatial_conv_model(tmp_path, cin, cout, shape, kernel, attrs, batch)
    rng = np.random.default_rng(len(case) * 17 + cin)
    feeds = {"x": rng.uniform(-1, 1, (batch, cin, *shape)).astype(np.float32),
             "w": rng.uniform(-1, 1, (cout, cin // attrs.get("group", 1), *kernel)).astype(np.float32),
             "b": rng.uniform(-1, 1, cout).astype(np.float32)}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run(feeds)["y"]
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.3%} differ"
