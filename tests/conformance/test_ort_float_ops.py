"""Float Resize (bilinear, also after ORT_ENABLE_ALL's NCHWc rewrite), BatchNormalization, MatMul with a
run-time or a constant B and Gemm with a constant B under ``onnxruntime-cpu`` (variant ``ort_float``:
kernels/onnxruntime/float_resize.py, float_norm.py, float_matmul.py, float_gemm.py) against
onnxruntime at ORT_DISABLE_ALL and ORT_ENABLE_ALL, bit for bit: these run in float between
DequantizeLinear and QuantizeLinear in 16-bit QDQ models, where one float32 ulp flips a code.  Each
case also shows that the generic float kernel's order differs."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.onnx_models import ort_at_levels  # noqa: E402

F = TensorProto.FLOAT


def _run(tmp_path, nodes, inputs, inits, feeds, opset=19):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = list(ort_at_levels(m, feeds).values())
    assert np.array_equal(want[0], want[1])
    g = refinterp.load(str(path))
    ours = refinterp.Session(g, "onnxruntime-cpu").run(feeds)["y"]
    return want[0], ours, refinterp.Session(g, "float32").run(feeds)["y"]


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


RESIZE = {  # (input shape, scales or None, sizes or None, coordinate_transformation_mode)
    "x2-half-pixel": ((1, 3, 7, 9), [1, 1, 2, 2], None, "half_pixel"),
    "x1.7-half-pixel": ((2, 2, 10, 6), [1, 1, 1.7, 1.3], None, "half_pixel"),
    "sizes-asymmetric": ((1, 4, 5, 8), None, [1, 4, 13, 21], "asymmetric"),
    "sizes-align-corners": ((1, 2, 6, 6), None, [1, 2, 17, 11], "align_corners"),
    "pytorch-half-pixel-down": ((1, 3, 16, 12), [1, 1, 0.5, 0.75], None, "pytorch_half_pixel"),
    "pytorch-one-row": ((1, 1, 4, 6), None, [1, 1, 1, 9], "pytorch_half_pixel"),
    "tf-half-pixel-for-nn": ((1, 2, 5, 5), [1, 1, 3, 2.5], None, "tf_half_pixel_for_nn"),
    "2d": ((9, 7), [1.5, 2.25], None, "half_pixel"),
}


@pytest.mark.parametrize("case", sorted(RESIZE))
def test_float_bilinear_resize_bit_exact(tmp_path, case):
    shape, scales, sizes, ctm = RESIZE[case]
    inits = [numpy_helper.from_array(np.array(scales if scales else [], np.float32), "scales")]
    ins = ["x", "", "scales"]
    if sizes:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        ins = ["x", "", "", "sizes"]
    node = helper.make_node("Resize", ins, ["y"], mode="linear", coordinate_transformation_mode=ctm)
    x = np.random.default_rng(len(case)).normal(0, 3, shape).astype(np.float32)
    want, got, generic = _run(tmp_path, [node], [("x", list(shape))], inits, {"x": x})
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.2%} differ"
    print(f"\n{case}: bit-exact; ONNX's formula differs on {np.mean(_bits(generic) != _bits(want)):.1%}")


@pytest.mark.parametrize("layout", ["4d", "2d", "5d"])
def test_float_batch_normalization_bit_exact(tmp_path, layout):
    shape = {"4d": (2, 16, 9, 11), "2d": (5, 16), "5d": (1, 16, 3, 4, 5)}[layout]
    rng = np.random.default_rng(len(layout))
    C = 16
    inits = [numpy_helper.from_array(v, n) for n, v in (
        ("s", rng.normal(1, 0.5, C).astype(np.float32)), ("b", rng.normal(0, 1, C).astype(np.float32)),
        ("m", rng.normal(0, 1, C).astype(np.float32)), ("v", rng.uniform(0.1, 3, C).astype(np.float32)))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    x = rng.normal(0, 3, shape).astype(np.float32)
    want, got, generic = _run(tmp_path, [node], [("x", list(shape))], inits, {"x": x}, opset=15)
    assert np.array_equal(_bits(got), _bits(want)), f"{np.mean(_bits(got) != _bits(want)):.2%} differ"
    assert not np.array_equal(_bits(generic), _bits(want))


MATMUL = {  # A shape, B shape (B a graph input: ORT does not prepack it)
    "2d-threaded": ((96, 200), (200, 160)),
    "3d-a-2d-b": ((2, 40, 130), (130, 70)),       # leading rows merged into one GEMM
    "batched": ((3, 33, 64), (3, 64, 48)),
    "broadcast-batched": ((2, 1, 20, 300), (1, 4, 300, 24)),
    "narrow": ((64, 576), (576, 20)),
}


@pytest.mark.parametrize("case", sorted(MATMUL))
def test_float_matmul_runtime_b_bit_exact(tmp_path, case):
    sa, sb = MATMUL[case]
    rng = np.random.default_rng(len(case))
    feeds = {"a": rng.uniform(-1, 1, sa).astype(np.float32), "b": rng.uniform(-1, 1, sb).astype(np.float32)}
    want, got, generic = _run(tmp_path, [helper.make_node("MatMul", ["a", "b"], ["y"])],
                              [("a", list(sa)), ("b", list(sb))], [], feeds)
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.2%} differ"
    print(f"\n{case}: bit-exact; the generic float order differs on {np.mean(_bits(generic) != _bits(want)):.1%}")


def _avx512f() -> bool:
    try:
        return " avx512f" in open("/proc/cpuinfo").read()
    except OSError:
        return False


NCHWC = {  # (input shape, pools before the Resize, scales or sizes, coordinate_transformation_mode)
    "maxpool-x2-half-pixel": ((1, 16, 10, 12), "max", [1, 1, 2, 2], "half_pixel"),
    "maxpool-x3x2-align-corners": ((1, 32, 8, 6), "max", [1, 1, 3, 2], "align_corners"),
    "avgpool-relu-x4x1-asymmetric": ((1, 16, 12, 10), "avg-relu", [1, 1, 4, 1], "asymmetric"),
    "concat-sizes-half-pixel": ((1, 16, 6, 8), "concat", [1, 32, 18, 8], "half_pixel"),
    "maxpool-x2-opset13-default-ctm": ((2, 16, 6, 6), "max", [1, 1, 2, 2], None),
    "not-converted-12-channels": ((1, 12, 8, 8), "max", [1, 1, 2, 2], "half_pixel"),
}


@pytest.mark.parametrize("case", sorted(NCHWC))
def test_float_resize_after_nchwc_pools_bit_exact(tmp_path, case):
    """At ORT_ENABLE_ALL the NchwcTransformer moves pools with a channel count divisible by MLAS's
    NCHWc block (16 floats with AVX-512F) to NCHWc and the bilinear Resize after them becomes
    com.microsoft.nchwc.Upsample, which rounds differently from the ordinary kernel: under
    ``onnxruntime-cpu`` (pass ort_nchwc16) every output equals ORT_ENABLE_ALL bit for bit."""
    if not _avx512f():
        pytest.skip("the onnxruntime-cpu scheme models an AVX-512 CPU (NCHWc block 16); this CPU has no AVX-512F")
    shape, pools, resize, ctm = NCHWC[case]
    mp = helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    nodes = [mp]
    src = "p"
    if pools == "avg-relu":
        nodes = [helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["a"], ["p"])]
    elif pools == "concat":
        nodes += [helper.make_node("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Concat", ["p", "a"], ["c"], axis=1)]
        src = "c"
    sizes = pools == "concat"
    inits = [numpy_helper.from_array(np.array([] if sizes else resize, np.float32), "scales")]
    ins = [src, "", "scales"]
    if sizes:
        inits.append(numpy_helper.from_array(np.array(resize, np.int64), "sizes"))
        ins = [src, "", "", "sizes"]
    attrs = {"mode": "linear", **({"coordinate_transformation_mode": ctm} if ctm else {})}
    nodes.append(helper.make_node("Resize", ins, ["y"], **attrs))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(shape))],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13 if ctm is None else 21)])
    m.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = np.random.default_rng(len(case)).normal(0, 3, shape).astype(np.float32)
    want = ort_at_levels(m, {"x": x})
    got = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu").run({"x": x})["y"]
    want_all = want["ORT_ENABLE_ALL"]
    assert got.shape == want_all.shape and np.array_equal(_bits(got), _bits(want_all)), \
        f"{np.mean(_bits(got) != _bits(want_all)):.2%} differ"
    moved = np.mean(_bits(want["ORT_DISABLE_ALL"]) != _bits(want_all))
    if case.startswith("not-converted"):
        assert moved == 0  # 12 channels: no NCHWc, the ordinary kernel at both levels
    else:
        assert moved > 0, "the NCHWc kernel was expected to round some outputs differently"
    print(f"\n{case}: bit-exact; ORT_DISABLE_ALL differs on {moved:.1%}")


CONST_B = {  # (A shape, B shape, Gemm attributes or None for MatMul, C shape)
    "matmul-row": ([1, 64], (64, 32), None, None),
    "matmul-2-k-blocks": ([5, 300], (300, 7), None, None),
    "matmul-3d-a": ([3, 8, 600], (600, 100), None, None),
    "matmul-vector-a": ([600], (600, 40), None, None),
    "matmul-n1": ([2, 257], (257, 1), None, None),
    "gemm-transB-bias": ([5, 300], (7, 300), {"transB": 1}, (7,)),
    "gemm-3-k-blocks": ([2, 513], (1000, 513), {"transB": 1}, (1000,)),
    "gemm-transA-scalar-c": ([100, 6], (100, 9), {"transA": 1}, (1,)),
    "gemm-alpha-beta": ([3, 257], (257, 40), {"alpha": 2.0, "beta": 0.5}, (40,)),
    "gemm-mn-c": ([130, 70], (70, 20), {}, (130, 20)),
    "gemm-beta0": ([8, 64], (64, 16), {"beta": 0.0}, (16,)),
}


@pytest.mark.parametrize("case", sorted(CONST_B))
def test_float_matmul_gemm_constant_b_bit_exact(tmp_path, case):
    """ORT prepacks a constant B (MlasGemmPackB): MLAS's packed-B order, K blocks of 256, C through
    the kernel (float_sgemm.mlas_sgemm_packed, float_gemm.py)."""
    ashape, bshape, gemm_attrs, cshape = CONST_B[case]
    rng = np.random.default_rng(len(case))
    inits = [numpy_helper.from_array(rng.normal(0, 1, bshape).astype(np.float32), "B")]
    ins = ["x", "B"]
    if cshape is not None:
        inits.append(numpy_helper.from_array(rng.normal(0, 1, cshape).astype(np.float32), "C"))
        ins.append("C")
    node = (helper.make_node("MatMul", ins, ["y"]) if gemm_attrs is None
            else helper.make_node("Gemm", ins, ["y"], **gemm_attrs))
    x = rng.normal(0, 1, ashape).astype(np.float32)
    want, got, generic = _run(tmp_path, [node], [("x", list(ashape))], inits, {"x": x})
    assert got.shape == want.shape and np.array_equal(_bits(got), _bits(want)), \
        f"{np.mean(_bits(got) != _bits(want)):.2%} differ"
    print(f"\n{case}: bit-exact; the generic kernel differs on {np.mean(_bits(generic) != _bits(want)):.1%}")


MATMUL_ADD = {  # (A shape, bias shape, bias as the Add's first input)
    "2d-bias-n": ((8, 300), (64,), False),
    "3d-reshaped-bias-first": ((2, 8, 300), (64,), True),
    "row-bias-1n": ((1, 600), (1, 64), False),
    "column-bias-m1": ((5, 300), (5, 1), False),
    "full-bias-mn": ((5, 70), (5, 64), False),
    "4d-reshaped": ((3, 4, 5, 600), (64,), False),
    "1d-a": ((700,), (64,), False),
    "run-time-b-2d": ((200, 700), (64,), False, True),
    "run-time-b-3d-reshaped": ((2, 8, 300), (64,), True, True),
    "run-time-b-m1-row-bias": ((1, 600), (1, 64), False, True),
    "run-time-b-column-bias": ((5, 300), (5, 1), False, True),
}


@pytest.mark.parametrize("case", sorted(MATMUL_ADD))
def test_matmul_add_fused_into_gemm_bit_exact(tmp_path, case):
    """ORT's MatMulAddFusion turns MatMul (2-D B) + Add into a Gemm with the bias as C (A of another
    rank reshaped around it): pass ort_matmul_add, then the packed-B Gemm order for a constant B, MLAS's
    unpacked SGEMM with C (beta 1) for a run-time one."""
    ashape, cshape, first, *run_time = MATMUL_ADD[case]
    rng = np.random.default_rng(len(case))
    w = rng.normal(0, 1, (ashape[-1], 64)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.normal(0, 1, cshape).astype(np.float32), "C")]
    inputs = [helper.make_tensor_value_info("x", F, list(ashape))]
    x = rng.normal(0, 1, ashape).astype(np.float32)
    feeds = {"x": x}
    if run_time:
        inputs.append(helper.make_tensor_value_info("B", F, list(w.shape)))
        feeds["B"] = w
    else:
        inits.append(numpy_helper.from_array(w, "B"))
    nodes = [helper.make_node("MatMul", ["x", "B"], ["m"]), helper.make_node("Add", ["C", "m"] if first else ["m", "C"], ["y"])]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 9
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = ort_at_levels(m, feeds)
    s = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    assert "Gemm" in [st.node.op for st in s.steps]
    got = s.run(feeds)["y"]
    assert got.shape == want["ORT_ENABLE_ALL"].shape and np.array_equal(_bits(got), _bits(want["ORT_ENABLE_ALL"]))
    print(f"\n{case}: bit-exact; ORT_DISABLE_ALL differs on "
          f"{np.mean(_bits(want['ORT_DISABLE_ALL']) != _bits(want['ORT_ENABLE_ALL'])):.1%}")


GEMM_RUN_TIME_B = [  # (M, K, N, transA, transB, alpha, beta, C shape or None)
    (8, 300, 64, 0, 1, 1.0, 1.0, (64,)), (6, 300, 40, 1, 0, 0.5, 1.0, (6, 40)), (1, 500, 33, 0, 1, 1.0, 1.0, (1, 33)),
    (1, 500, 33, 0, 0, 2.0, 0.0, (33,)), (7, 200, 1, 0, 0, 1.0, 1.0, (1,)), (9, 260, 70, 1, 1, 1.0, 1.0, None),
]


@pytest.mark.parametrize("m_,k_,n_,ta,tb,alpha,beta,cshape", GEMM_RUN_TIME_B)
def test_gemm_with_a_run_time_b_bit_exact(tmp_path, m_, k_, n_, ta, tb, alpha, beta, cshape):
    """ORT's Gemm with a run-time B (kernels/onnxruntime/float_gemm.py OrtSgemmGemmPlan): C broadcast into
    Y, then MLAS's unpacked SGEMM with beta 1 -- transposes, alpha, beta 0, the one-row and one-column
    kernels, two K blocks -- bit for bit."""
    rng = np.random.default_rng(m_ + k_ + n_)
    a = rng.normal(0, 1, (k_, m_) if ta else (m_, k_)).astype(np.float32)
    b = rng.normal(0, 1, (n_, k_) if tb else (k_, n_)).astype(np.float32)
    inits = [] if cshape is None else [numpy_helper.from_array(rng.normal(0, 1, cshape).astype(np.float32), "C")]
    g = helper.make_graph([helper.make_node("Gemm", ["A", "B"] + (["C"] if cshape else []), ["y"], transA=ta, transB=tb,
                                            alpha=alpha, beta=beta)], "g",
                          [helper.make_tensor_value_info("A", F, list(a.shape)), helper.make_tensor_value_info("B", F, list(b.shape))],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 9
    onnx.save(m, str(tmp_path / "m.onnx"))
    feeds = {"A": a, "B": b}
    want = ort_at_levels(m, feeds)["ORT_ENABLE_ALL"]
    s = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), "onnxruntime-cpu")
    assert type(s.steps[0].plan).__name__ == "OrtSgemmGemmPlan"
    assert np.array_equal(_bits(s.run(feeds)["y"]), _bits(want))


LSTM_CASES = {  # name -> (T, B, I, H, direction, bias, peepholes, initial state, sequence_lens, W behind a
    # Transpose[, other attributes])
    "forward": (5, 2, 8, 16, "forward", True, False, False, None, False),
    "reverse": (5, 2, 8, 16, "reverse", True, False, False, None, False),
    "bidirectional": (4, 3, 8, 16, "bidirectional", True, False, False, None, False),
    "peepholes-initial-state": (5, 2, 8, 16, "forward", True, True, True, None, False),
    "no-bias": (5, 2, 8, 16, "forward", False, False, False, None, False),
    "two-k-blocks-batch1": (3, 1, 300, 64, "forward", True, False, False, None, False),
    "batch5-h128": (3, 5, 40, 128, "forward", True, False, True, None, False),
    "sequence-lens-bidirectional": (6, 3, 8, 16, "bidirectional", True, False, False, [6, 2, 4], False),
    "weights-through-transpose": (5, 2, 8, 16, "forward", True, False, False, None, True),
    "input-forget": (5, 2, 8, 16, "forward", True, False, False, None, False, {"input_forget": 1}),
    "clip": (5, 2, 8, 16, "forward", True, True, False, None, False, {"clip": 0.8}),
    "clip-no-bias": (5, 2, 8, 16, "reverse", False, False, False, None, False, {"clip": 0.5}),
}


@pytest.mark.parametrize("case", sorted(LSTM_CASES))
def test_lstm_bit_exact(tmp_path, case):
    """ORT's DeepCPU LSTM (kernels/onnxruntime/float_lstm.py: prepacked MLAS GEMMs, the recurrent sum
    added onto X W^T per K block, MLAS sigmoid / tanh, C = fl(c f) + fl(i g)) -- Y, Y_h and Y_c bit for
    bit at ORT_ENABLE_ALL; a W the exporter transposed is a constant once ORT folds it (ort_const_fold).
    The generic kernel (NumPy matmuls and transcendentals) differs."""
    t, b, i, h, direction, bias, peep, state, lens, transposed, *extra = LSTM_CASES[case]
    rng = np.random.default_rng(len(case))
    nd = 2 if direction == "bidirectional" else 1
    w = (rng.standard_normal((nd, 4 * h, i)) * 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(np.ascontiguousarray(np.swapaxes(w, 1, 2)) if transposed else w, "W0"),
             numpy_helper.from_array((rng.standard_normal((nd, 4 * h, h)) * 0.5).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((nd, 8 * h)) * 0.3).astype(np.float32), "B"),
             numpy_helper.from_array((rng.standard_normal((nd, 3 * h)) * 0.3).astype(np.float32), "P")]
    nodes = [helper.make_node("Transpose" if transposed else "Identity", ["W0"], ["W"],
                              **({"perm": [0, 2, 1]} if transposed else {}))]
    feeds = {"x": rng.standard_normal((t, b, i)).astype(np.float32)}
    inputs = [("x", [t, b, i])]
    ins = ["x", "W", "R", "B" if bias else "", "", "", "", "P" if peep else ""]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        ins[4] = "L"
    if state:
        feeds.update(h0=rng.standard_normal((nd, b, h)).astype(np.float32), c0=rng.standard_normal((nd, b, h)).astype(np.float32))
        inputs += [("h0", [nd, b, h]), ("c0", [nd, b, h])]
        ins[5:7] = ["h0", "c0"]
    while ins[-1] == "":
        ins.pop()
    nodes.append(helper.make_node("LSTM", ins, ["y", "yh", "yc"], hidden_size=h, direction=direction,
                                  **(extra[0] if extra else {})))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, None) for n in ("y", "yh", "yc")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    s = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), "onnxruntime-cpu")
    assert [st.kernel.variant for st in s.steps if st.node.op == "LSTM"] == ["ort_float"]
    got = s.run(feeds)
    for name, w_ in zip(("y", "yh", "yc"), want):
        assert np.array_equal(_bits(got[name]), _bits(w_)), name
    generic = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), "float32").run(feeds)
    assert not np.array_equal(_bits(generic["y"]), _bits(want[0]))


@pytest.mark.parametrize("shape", [(2, 8, 9, 11), (1, 3, 32, 32), (2, 4, 7), (1, 16, 5, 5), (3, 5, 1, 33)])
def test_instance_normalization_bit_exact(tmp_path, shape):
    """ORT's InstanceNormalization (kernels/onnxruntime/float_instance_norm.py): Eigen's aligned SSE
    sum for the mean, an unaligned one for the squared deviations, then inv / scale / shift in float32
    -- bit for bit for rows of every 16-byte head length; the generic kernel differs."""
    rng = np.random.default_rng(sum(shape))
    c = shape[1]
    inits = [numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")]
    feeds = {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}
    want, ours, generic = _run(tmp_path, [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"],
                                                           epsilon=1e-5)], [("x", list(shape))], inits, feeds)
    assert np.array_equal(_bits(ours), _bits(want))
    assert not np.array_equal(_bits(generic), _bits(want))
