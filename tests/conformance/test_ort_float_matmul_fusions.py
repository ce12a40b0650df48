"""com.microsoft.FusedMatMul and the fusions that make it, under ``onnxruntime-cpu`` against onnxruntime
1.32.0, every float32 bit: the kernel (alpha applied per K block in MLAS's SGEMM order, transA /
transB, constant prepacked B, the M1 kernels of unit-alpha vector products;
kernels/onnxruntime/float_fused_matmul.py, float_sgemm.py) and ORT's MatmulTransposeFusion /
MatMulScaleFusion of exporters' Transpose -> MatMul -> Div / Mul graphs at ORT_ENABLE_ALL
(passes/ort_matmul.py).  The generic float kernel, or ORT_DISABLE_ALL, gives other bits, so the
comparisons can fail."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.conformance.test_ort_float_layernorm import _equal, _ort  # noqa: E402
from tests.conformance.test_ort_float_layernorm import _model as _ln_model  # noqa: E402

F = np.float32
mk = helper.make_node
MS = "com.microsoft"


def _model(nodes, inputs: dict, outputs, inits=(), opset=17):
    return _ln_model(nodes, inputs, outputs, inits, opset, ms=True)


def _ours(tmp_path, m, feeds, scheme="onnxruntime-cpu"):
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    s = refinterp.Session(refinterp.load(str(p)), scheme)
    out = s.run(feeds)
    return [np.asarray(out[o.name]) for o in m.graph.output], s


# -- the kernel --------------------------------------------------------------------------------------------

KERNEL_SHAPES = [(10, 32, 10), (1, 40, 7), (7, 300, 1), (64, 200, 9), (33, 130, 70), (1, 5, 1), (200, 600, 300)]


def test_fused_matmul_kernel_sweep(tmp_path):
    """7 shapes (M = 1 and N = 1 vector products, K blocks of 128 / 256, a threaded 200x600x300) x
    transA / transB x alpha (1/sqrt 32, 1, 1/8) x run-time or constant B, 2-D and batched: every case
    bit-exact; the generic kernel (alpha times the finished product) differs on most."""
    rng = np.random.default_rng(0)
    cases = differ = 0
    for (m_, k, n), ta, tb, alpha, lead, const in itertools.product(
            KERNEL_SHAPES, (0, 1), (0, 1), (0.17677669, 1.0, 0.125), ((), (2, 3)), (False, True)):
        if const and lead and (m_, ta, alpha) != (33, 1, 0.125):
            continue  # constant B is 2-D; a batched A with it once per shape is enough
        a = rng.standard_normal(lead + ((k, m_) if ta else (m_, k))).astype(F)
        b = rng.standard_normal((() if const else lead) + ((n, k) if tb else (k, n))).astype(F)
        node = mk("FusedMatMul", ["a", "b"], ["y"], domain=MS, transA=ta, transB=tb, alpha=alpha)
        feeds = {"a": a} if const else {"a": a, "b": b}
        m = _model([node], feeds, ["y"], [numpy_helper.from_array(b, "b")] if const else [])
        want = _ort(m, feeds, "ORT_DISABLE_ALL")
        got, s = _ours(tmp_path, m, feeds)
        assert [st.kernel.variant for st in s.steps] == ["ort_float"]
        assert _equal(got, want), ((m_, k, n), ta, tb, alpha, lead, const)
        generic, _ = _ours(tmp_path, m, feeds, "float32")
        cases += 1
        differ += not _equal(generic, want)
    assert cases == 254 and differ > cases // 2, (cases, differ)


# -- the fusions -------------------------------------------------------------------------------------------

def _c(name, v):
    return numpy_helper.from_array(np.asarray(v, F), name)


def _fusion_case(case):
    """(nodes, inputs, outputs, initializers, FusedMatMul count ORT leaves, expected node count)."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 10, 32)).astype(F)
    k = rng.standard_normal((2, 3, 10, 32)).astype(F)
    kt = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    att = [mk("MatMul", ["q", "kt"], ["s"])]
    if case == "div-output":
        return att + [mk("Div", ["s", "d"], ["y"])], {"q": q, "kt": kt}, ["y"], [_c("d", 5.656854)], 1
    if case == "mul-output-scale-first":
        return att + [mk("Mul", ["c", "s"], ["y"])], {"q": q, "kt": kt}, ["y"], [_c("c", 0.17677669)], 1
    if case == "pow-scale":  # PyTorch's exporter: (head ** 0.5) from constants, folded by ORT
        return [mk("Pow", ["h", "e"], ["d"])] + att + [mk("Div", ["s", "d"], ["y"])], {"q": q, "kt": kt}, ["y"], \
            [_c("h", 32.0), _c("e", 0.5)], 1
    if case == "sqrt-scale":
        return [mk("Sqrt", ["h"], ["d"])] + att + [mk("Div", ["s", "d"], ["y"])], {"q": q, "kt": kt}, ["y"], \
            [_c("h", 24.0)], 1
    if case == "transpose-b-and-scale":
        return [mk("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])] + att + [mk("Div", ["s", "d"], ["y"])], \
            {"q": q, "k": k}, ["y"], [_c("d", 5.656854)], 1
    if case == "transpose-a":
        return [mk("Transpose", ["qt"], ["q"], perm=[0, 1, 3, 2]), mk("MatMul", ["q", "k2"], ["y"])], \
            {"qt": np.ascontiguousarray(np.swapaxes(q, -1, -2)), "k2": kt[..., :7]}, ["y"], [], 1
    if case == "transpose-shared":  # one Transpose read by two MatMuls and a Relu: it stays for the Relu
        return [mk("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), mk("MatMul", ["q", "kt"], ["y"]),
                mk("MatMul", ["q2", "kt"], ["y2"]), mk("Relu", ["kt"], ["y3"])], \
            {"q": q, "q2": q[:, :, :4] * 3, "k": k}, ["y", "y2", "y3"], [], 2
    if case == "transpose-graph-output":  # a Transpose that is a graph output is not fused
        return [mk("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])] + att, {"q": q, "k": k}, ["s", "kt"], [], 0
    if case == "transpose-not-last-two":
        return [mk("Transpose", ["k"], ["kt"], perm=[1, 0, 3, 2])] + att, \
            {"q": q[:, :2].copy(), "k": k[:, :2].transpose(1, 0, 2, 3).copy()}, ["s"], [], 0
    if case == "input-muls":  # scaled q and k, as exporters of scaled_dot_product_attention write it
        return [mk("Mul", ["q0", "c"], ["q"]), mk("Mul", ["c", "k0"], ["kt"])] + att, \
            {"q0": q, "k0": kt}, ["s"], [_c("c", 0.42044820)], 1
    if case == "input-and-output":
        return [mk("Mul", ["q0", "c"], ["q"])] + att + [mk("Div", ["s", "d"], ["y"])], \
            {"q0": q, "kt": kt}, ["y"], [_c("c", 0.3), _c("d", 7.0)], 1
    if case == "input-mul-shared":  # the Mul is read elsewhere too: merged, and kept for the other reader
        return [mk("Mul", ["q0", "c"], ["q"])] + att + [mk("Relu", ["q"], ["y2"])], \
            {"q0": q, "kt": kt}, ["s", "y2"], [_c("c", 0.3)], 1
    if case == "two-readers":  # the MatMul output is read twice: no output fusion
        return att + [mk("Div", ["s", "d"], ["y"]), mk("Relu", ["s"], ["y2"])], {"q": q, "kt": kt}, ["y", "y2"], \
            [_c("d", 5.656854)], 0
    if case == "matmul-graph-output":
        return att + [mk("Div", ["s", "d"], ["y"])], {"q": q, "kt": kt}, ["s", "y"], [_c("d", 5.656854)], 0
    if case == "vector-scale":  # not a scalar
        return att + [mk("Mul", ["s", "c"], ["y"])], {"q": q, "kt": kt}, ["y"], [_c("c", np.linspace(.1, 1, 10))], 0
    if case == "scalar-of-higher-rank":  # one element but more axes than the scaled operand
        return att + [mk("Mul", ["s", "c"], ["y"])], {"q": q, "kt": kt}, ["y"], [_c("c", np.full((1,) * 5, .3))], 0
    if case == "scalar-of-equal-rank":
        return att + [mk("Mul", ["s", "c"], ["y"])], {"q": q, "kt": kt}, ["y"], [_c("c", np.full((1,) * 4, .3))], 1
    if case == "chain":  # MatMul -> Mul -> MatMul: the Mul merges into the first only
        return att + [mk("Mul", ["s", "c"], ["p"]), mk("MatMul", ["p", "v"], ["y"])], \
            {"q": q, "kt": kt, "v": k[:, :, :, :8].copy()}, ["y"], [_c("c", 0.3)], 1
    if case == "transpose-batch-a":  # [K, b0, b1, M] -> [b0, b1, M, K]: FusedMatMul transBatchA + transA
        return [mk("Transpose", ["x"], ["q"], perm=[1, 2, 3, 0]), mk("MatMul", ["q", "kt"], ["y"])], \
            {"x": np.ascontiguousarray(q.transpose(3, 0, 1, 2)), "kt": kt}, ["y"], [], 1
    if case == "transpose-batch-a-and-b":  # [M, b0, b1, K] -> [b0, b1, M, K]; [K, b0, b1, N] -> [b0, b1, K, N]
        return [mk("Transpose", ["x"], ["q"], perm=[1, 2, 0, 3]), mk("Transpose", ["z"], ["kt"], perm=[1, 2, 0, 3]),
                mk("MatMul", ["q", "kt"], ["y"])], \
            {"x": np.ascontiguousarray(q.transpose(2, 0, 1, 3)), "z": np.ascontiguousarray(kt.transpose(2, 0, 1, 3))}, \
            ["y"], [], 1
    if case == "transpose-twice":  # two swaps cancel (ORT's level-1 transpose optimizer): a plain MatMul
        return [mk("Transpose", ["x"], ["x1"], perm=[0, 1, 3, 2]), mk("Transpose", ["x1"], ["q"], perm=[0, 1, 3, 2]),
                mk("MatMul", ["q", "kt"], ["y"])], {"x": q, "kt": kt}, ["y"], [], 0
    if case == "transpose-thrice":  # ORT's transpose_matmul_4d_fusion_3_transpose: two cancel, the third fuses
        return [mk("Transpose", ["x"], ["x1"], perm=[0, 1, 3, 2]), mk("Transpose", ["x1"], ["q"], perm=[0, 1, 3, 2]),
                mk("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), mk("MatMul", ["q", "kt"], ["y"])], \
            {"x": q, "k": k}, ["y"], [], 1
    if case == "transpose-composed":  # [0, 2, 1, 3] then [0, 1, 3, 2]: one Transpose of the composed perm
        return [mk("Transpose", ["x"], ["x1"], perm=[0, 2, 1, 3]), mk("Transpose", ["x1"], ["q"], perm=[0, 1, 3, 2]),
                mk("MatMul", ["q", "kt"], ["y"])], {"x": np.ascontiguousarray(q.transpose(0, 1, 3, 2).transpose(0, 2, 1, 3)),
                                                    "kt": kt}, ["y"], [], 0
    raise AssertionError(case)


FUSION_CASES = ["div-output", "mul-output-scale-first", "pow-scale", "sqrt-scale", "transpose-b-and-scale",
                "transpose-a", "transpose-shared", "transpose-graph-output", "transpose-not-last-two", "input-muls",
                "input-and-output", "input-mul-shared", "two-readers", "matmul-graph-output", "vector-scale",
                "scalar-of-higher-rank", "scalar-of-equal-rank", "chain", "transpose-batch-a", "transpose-batch-a-and-b",
                "transpose-twice", "transpose-thrice", "transpose-composed"]


@pytest.mark.parametrize("case", FUSION_CASES)
def test_matmul_fusions_at_default_optimisation(tmp_path, case):
    """ORT's optimized graph keeps as many FusedMatMuls as onnxruntime-cpu makes, and every output bit is
    equal at ORT_ENABLE_ALL."""
    nodes, feeds, outs, inits, fused = _fusion_case(case)
    m = _model(nodes, feeds, outs, inits)
    want = _ort(m, feeds, save=tmp_path / "opt.onnx")
    ort_ops = [nd.op_type for nd in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    assert ort_ops.count("FusedMatMul") == fused, ort_ops
    got, s = _ours(tmp_path, m, feeds)
    ops = [st.node.op for st in s.steps]
    assert ops.count(MS + ".FusedMatMul") == fused, ops
    assert len(ops) == len(ort_ops), (ops, ort_ops)
    assert _equal(got, want)
    if case in ROUNDS_OTHERWISE:
        assert not _equal(_ort(m, feeds, "ORT_DISABLE_ALL"), want)


# alpha = f32(1 / divisor), or a product of scales: the unfused graph rounds otherwise.  (A single Mul on
# the output of a one-K-block product is fl(acc * c) either way.)
ROUNDS_OTHERWISE = {"div-output", "pow-scale", "sqrt-scale", "transpose-b-and-scale", "input-muls",
                    "input-and-output"}


def test_dynamo_exported_transformer_block(tmp_path):
    """PyTorch's default (dynamo) export of a transformer block (tests/fixtures/onnx/README.md): the
    attention scale as two Muls on q and k (MatMulScaleFusion folds both into alpha), a (0, 2, 1)
    Transpose of k, the tanh GELU decomposed (Pow 3 -> ORT's x*x*x), MatMul + Add -> Gemm and
    SkipLayerNormalization: ORT_ENABLE_ALL's FusedMatMul / SkipLayerNormalization / Gemm counts and
    every output bit are reproduced; ORT_DISABLE_ALL rounds otherwise."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "transformer_block_float32.onnx"
    m = onnx.load(str(path))
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 10, 64)).astype(F)}
    want = _ort(m, feeds, save=tmp_path / "opt.onnx")
    ort_ops = [nd.op_type for nd in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    got, s = _ours(tmp_path, m, feeds)
    ops = [st.node.op.split(".")[-1] for st in s.steps]
    for op in ("FusedMatMul", "SkipLayerNormalization", "Gemm", "MatMul", "Softmax", "Tanh", "Pow"):
        assert ops.count(op) == ort_ops.count(op), (op, ops, ort_ops)
    assert _equal(got, want)
    assert not _equal(_ort(m, feeds, "ORT_DISABLE_ALL"), want)
