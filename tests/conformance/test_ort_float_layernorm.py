"""Layer norms and reductions under ``onnxruntime-cpu`` against onnxruntime 1.32.0, every float32 bit:
LayerNormalization (Welford below 8 elements, a float64 mean and 8 FMA lanes above), its RMS form
(RMSNormalization / ORT's SimplifiedLayerNormalization), com.microsoft.SkipLayerNormalization, ReduceMean
/ ReduceSum (Eigen's SSE row sums), and ORT's LayerNormFusion / SimplifiedLayerNormFusion /
SkipLayerNormFusion, which turn exporters' decomposed norms and residual Adds into those kernels at the
default ORT_ENABLE_ALL (kernels/onnxruntime/float_layernorm.py, float_reduce.py,
passes/ort_layernorm.py).  Each family also shows that the generic float kernel (or the unfused graph)
gives other bits, so the comparisons can fail."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402

F = np.float32
mk = helper.make_node


def _bits(a):
    return np.ascontiguousarray(a, F).view(np.uint32)


def _model(nodes, inputs: dict, outputs, inits=(), opset=17, ms=False):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
                                       for k, v in inputs.items()],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], list(inits))
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10 if opset >= 21 else 8
    return m


def _ort(m, feeds, level="ORT_ENABLE_ALL", save=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    if save:
        so.optimized_model_filepath = str(save)
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _ours(tmp_path, m, feeds, scheme="onnxruntime-cpu"):
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    s = refinterp.Session(refinterp.load(str(p)), scheme)
    out = s.run(feeds)
    return [np.asarray(out[o.name]) for o in m.graph.output], [st.node.op for st in s.steps]


def _equal(got, want) -> bool:
    return all(g.shape == w.shape and np.array_equal(_bits(g), _bits(w)) for g, w in zip(got, want))


# -- kernels ---------------------------------------------------------------------------------------------

LN_CASES = [((97, n), -1, bias) for n in (1, 2, 5, 7, 8, 9, 12, 13, 15, 16, 21, 31, 64, 65, 127, 768)
            for bias in (True, False)] + [((20, 3, 5), 1, True), ((4, 6, 7, 9), 2, True), ((10, 2, 48), -2, False)]


def test_layer_normalization_every_output(tmp_path):
    rng = np.random.default_rng(7)
    generic_differs = 0
    for shape, axis, bias in LN_CASES:
        norm = shape[axis % len(shape):]
        x = (rng.standard_normal(shape) * rng.uniform(0.1, 10) + rng.uniform(-3, 3)).astype(F)
        feeds = {"x": x, "s": rng.standard_normal(norm).astype(F)} | ({"b": rng.standard_normal(norm).astype(F)}
                                                                      if bias else {})
        m = _model([mk("LayerNormalization", list(feeds), ["y", "mean", "inv"], axis=axis, epsilon=1e-5)], feeds,
                   ["y", "mean", "inv"])
        want = _ort(m, feeds)
        got, _ = _ours(tmp_path, m, feeds)
        assert _equal(got, want), (shape, axis, bias, [int(np.sum(_bits(g) != _bits(w))) for g, w in zip(got, want)])
        generic_differs += not _equal(_ours(tmp_path, m, feeds, "float32")[0], want)
    assert generic_differs >= len(LN_CASES) // 2, "the generic kernel was expected to round differently"


@pytest.mark.parametrize("n", [1, 3, 8, 13, 64, 768])
def test_skip_layer_normalization_every_output(tmp_path, n):
    rng = np.random.default_rng(n)
    for beta, bias in ((True, True), (False, True), (True, False), (False, False)):
        feeds = {"x": (rng.standard_normal((2, 40, n)) * 2 + 0.5).astype(F), "k": rng.standard_normal((2, 40, n)).astype(F),
                 "g": rng.standard_normal(n).astype(F)}
        ins = ["x", "k", "g", "b" if beta else ""] + (["c"] if bias else [])
        feeds |= ({"b": rng.standard_normal(n).astype(F)} if beta else {}) | \
            ({"c": rng.standard_normal(n).astype(F)} if bias else {})
        m = _model([mk("SkipLayerNormalization", ins, ["y", "mean", "inv", "sum"], epsilon=1e-5, domain="com.microsoft")],
                   feeds, ["y", "mean", "inv", "sum"], opset=13, ms=True)
        assert _equal(_ours(tmp_path, m, feeds)[0], _ort(m, feeds)), (n, beta, bias)


@pytest.mark.parametrize("n", [5, 15, 16, 17, 64, 100])
def test_rms_normalization(tmp_path, n):
    """RMSNormalization (opset 23) is ORT's SimplifiedLayerNormalization kernel: sequential float32 sums
    below 16 elements, the 8 FMA lanes from 16 on."""
    rng = np.random.default_rng(n)
    feeds = {"x": (rng.standard_normal((60, n)) * 2 + 0.5).astype(F), "s": rng.standard_normal(n).astype(F)}
    m = _model([mk("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5)], feeds, ["y"], opset=23)
    want = _ort(m, feeds)
    assert _equal(_ours(tmp_path, m, feeds)[0], want)
    if n >= 16:
        assert not _equal(_ours(tmp_path, m, feeds, "float32")[0], want)


REDUCE_CASES = [((64, n), [-1]) for n in (1, 3, 4, 5, 7, 8, 9, 13, 16, 31, 33, 100, 768)] + [
    ((2, 10, 64), [-1]), ((3, 5, 7), [1, 2]), ((4, 9), None), ((100, 13), [0]), ((64, 3, 40), [0, 1]),
    ((1, 37, 8), [1]), ((2, 1, 50), [2])] + [  # a reduced middle block (KRK: M1 SGEMM of a row of ones)
    ((2, 37, 16), [1]), ((3, 50, 7), [1]), ((2, 5, 9, 13), [1, 2]), ((4, 130, 33), [1]), ((2, 600, 5), [1]),
    ((5, 3, 1), [1]), ((1, 4, 9, 6), [2]), ((3, 7, 1, 4), [1, 2]), ((1, 37, 8), [0, 1])]


def test_reduce_mean_and_sum_rows_and_columns(tmp_path):
    rng = np.random.default_rng(11)
    generic_differs = 0
    for shape, axes in REDUCE_CASES:
        for op in ("ReduceMean", "ReduceSum"):
            feeds = {"x": (rng.standard_normal(shape) * 3 + 0.7).astype(F)}
            inits = [numpy_helper.from_array(np.array(axes, np.int64), "ax")] if axes is not None else []
            m = _model([mk(op, ["x"] + (["ax"] if axes is not None else []), ["y"], keepdims=int(len(shape) % 2))],
                       feeds, ["y"], inits, opset=18)
            want = _ort(m, feeds)
            assert _equal(_ours(tmp_path, m, feeds)[0], want), (shape, axes, op)
            generic_differs += not _equal(_ours(tmp_path, m, feeds, "float32")[0], want)
    assert generic_differs >= 20, generic_differs


# -- ORT's fusions at ORT_ENABLE_ALL --------------------------------------------------------------------

def _ln(src, out, opset, dup=False, eps_first=False):
    """An exporter's decomposed layer norm of ``src`` (PyTorch's form; two Subs as older exports)."""
    p = src + "_"
    rm = (lambda i, o: mk("ReduceMean", [i, "ax"], [o])) if opset >= 18 else \
        (lambda i, o: mk("ReduceMean", [i], [o], axes=[-1]))
    d2 = p + "dd" if dup else p + "d"
    nodes = [rm(src, p + "mu"), mk("Sub", [src, p + "mu"], [p + "d"])]
    if dup:
        nodes.append(mk("Sub", [src, p + "mu"], [d2]))
    return nodes + [mk("Pow", [p + "d", "two"], [p + "sq"]), rm(p + "sq", p + "var"),
                    mk("Add", ["eps", p + "var"] if eps_first else [p + "var", "eps"], [p + "ve"]),
                    mk("Sqrt", [p + "ve"], [p + "sd"]), mk("Div", [d2, p + "sd"], [p + "nrm"]),
                    mk("Mul", [p + "nrm", "g"], [p + "sc"]), mk("Add", [p + "sc", "b"], [out])]


def _rms(src, out, opset):
    rm = mk("ReduceMean", ["p", "ax"], ["ms"]) if opset >= 18 else mk("ReduceMean", ["p"], ["ms"], axes=[-1])
    return [mk("Pow", [src, "two"], ["p"]), rm, mk("Add", ["ms", "eps"], ["me"]), mk("Sqrt", ["me"], ["rt"]),
            mk("Div", [src, "rt"], ["nx"]), mk("Mul", ["g", "nx"], [out])]


FUSIONS = {  # name -> (nodes(opset), ORT's optimized op types), all on x, r of shape (2, 10, n)
    "layernorm": (lambda o: _ln("x", "y", o), ["LayerNormalization"]),
    "layernorm-two-subs": (lambda o: _ln("x", "y", o, dup=True), ["LayerNormalization"]),
    "layernorm-eps-first": (lambda o: _ln("x", "y", o, eps_first=True), ["LayerNormalization"]),
    "rmsnorm": (lambda o: _rms("x", "y", o), ["SimplifiedLayerNormalization"]),
    "residual-layernorm": (lambda o: [mk("Add", ["x", "r"], ["s"])] + _ln("s", "y", o), ["SkipLayerNormalization"]),
    "residual-rmsnorm": (lambda o: [mk("Add", ["x", "r"], ["s"])] + _rms("s", "y", o),
                         ["Add", "SimplifiedLayerNormalization"]),
    "dense-residual-layernorm": (lambda o: [mk("MatMul", ["x", "W"], ["mm"]), mk("Add", ["mm", "c"], ["h"]),
                                            mk("Add", ["h", "r"], ["s"])] + _ln("s", "y", o),
                                 ["Reshape", "Gemm", "Reshape", "SkipLayerNormalization"]),
    "bias-add-first": (lambda o: [mk("Add", ["r", "c"], ["h"]), mk("Add", ["h", "x"], ["s"])] + _ln("s", "y", o),
                       ["SkipLayerNormalization"]),
    "bias-add-second": (lambda o: [mk("Add", ["r", "c"], ["h"]), mk("Add", ["x", "h"], ["s"])] + _ln("s", "y", o),
                        ["SkipLayerNormalization"]),
    "mean-used-elsewhere": (lambda o: _ln("x", "y0", o) + [mk("Relu", ["x_mu"], ["z"]), mk("Add", ["y0", "z"], ["y"])],
                            None),  # LayerNormFusion declines; SimplifiedLayerNormFusion takes its Pow .. Mul
}


@pytest.mark.parametrize("case", sorted(FUSIONS))
@pytest.mark.parametrize("opset", [13, 18])
def test_ort_norm_fusions_bit_exact(tmp_path, case, opset):
    build, ort_ops = FUSIONS[case]
    rng = np.random.default_rng(len(case) + opset)
    moved = []
    for n in (6, 20, 64):
        inits = [numpy_helper.from_array(v, k) for k, v in dict(
            two=np.float32(2.0), eps=np.float32(1e-5), ax=np.array([-1], np.int64),
            g=rng.standard_normal(n).astype(F), b=rng.standard_normal(n).astype(F),
            W=rng.standard_normal((n, n)).astype(F), c=rng.standard_normal(n).astype(F)).items()]
        nodes = build(opset)
        used = {i for nd in nodes for i in nd.input}
        feeds = {k: (rng.standard_normal((2, 10, n)) * 2 + 1).astype(F) for k in ("x", "r") if k in used}
        m = _model(nodes, feeds, ["y"], [t for t in inits if t.name in used], opset=opset)
        want = _ort(m, feeds, save=tmp_path / "opt.onnx")
        optimized = [nd.op_type for nd in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
        got, ops = _ours(tmp_path, m, feeds)
        if ort_ops is not None:
            assert optimized == ort_ops
        assert [o.split(".")[-1] for o in ops if o != "Relu"] == [o for o in optimized if o != "Relu"]
        if case == "mean-used-elsewhere":
            continue  # its unfused ReduceMean -> Sub -> ... order is the generic one (not bit-exact here)
        assert _equal(got, want), (case, opset, n)
        moved.append(not _equal(_ort(m, feeds, "ORT_DISABLE_ALL"), want))
    assert case == "mean-used-elsewhere" or any(moved), "the fusion was expected to change the bits"


@pytest.mark.parametrize("opset,heads", [(14, 4), (17, 4), (17, 2)])
def test_torch_exported_transformer_block_at_default_optimisation(tmp_path, opset, heads):
    """PyTorch's exporter output of a post-norm transformer block (fused QKV Linear, 4 heads of 16 or 2
    of 32, softmax attention, erf GELU MLP, two LayerNorms; opset 14 decomposes them): ORT_ENABLE_ALL
    turns it into Gemms (MatMul + Add), SkipLayerNormalization, Gelu and a FusedMatMul whose alpha is
    the folded 1 / Pow(head, 0.5), and so does onnxruntime-cpu -- every output bit equal (with heads of
    32 the alpha is inexact: test_ort_float_matmul_fusions.py has the FusedMatMul itself)."""
    torch = pytest.importorskip("torch")
    import io
    import warnings

    class Block(torch.nn.Module):
        def __init__(self, d=64, h=4, ff=128):
            super().__init__()
            self.h, self.qkv, self.o = h, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.n1, self.n2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.f1, self.f2, self.act = torch.nn.Linear(d, ff), torch.nn.Linear(ff, d), torch.nn.GELU()

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.reshape(b, t, self.h, d // self.h).transpose(1, 2) for z in self.qkv(x).split(d, dim=-1))
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
            x = self.n1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
            return self.n2(x + self.f2(self.act(self.f1(x))))

    torch.manual_seed(0)
    block = Block(h=heads).eval()
    x = torch.randn(2, 10, 64)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(block, (x,), f, opset_version=opset, input_names=["x"], output_names=["y"], dynamo=False)
    m = onnx.load_from_string(f.getvalue())
    feeds = {"x": x.numpy()}
    want = _ort(m, feeds, save=tmp_path / "opt.onnx")
    optimized = [nd.op_type for nd in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    assert optimized.count("SkipLayerNormalization") == 2 and "Gelu" in optimized and "FusedMatMul" in optimized
    got, ops = _ours(tmp_path, m, feeds)
    assert ops.count("com.microsoft.SkipLayerNormalization") == 2 and "Gelu" in ops and "com.microsoft.FusedMatMul" in ops
    assert _equal(got, want)
    assert not _equal(_ort(m, feeds, "ORT_DISABLE_ALL"), want)
