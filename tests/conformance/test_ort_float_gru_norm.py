"""ONNX Runtime's float RNN, GRU, GroupNormalization and MeanVarianceNormalization under the
``onnxruntime-cpu`` scheme (variant ``ort_float``) vs onnxruntime 1.32.0, float32 bit for bit; each test
also shows that the generic kernel gives other bits."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402

F = TensorProto.FLOAT


def _bits(a):
    return np.asarray(a, np.float32).view(np.int32)


def _both(tmp_path, m, feeds, generic: bool = True):
    """(ORT's outputs at its default session, the onnxruntime-cpu Session, its outputs, the float32
    scheme's outputs or None) for model ``m``."""
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    s = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    return want, s, s.run(feeds), \
        refinterp.Session(refinterp.load(str(path)), "float32").run(feeds) if generic else None


def _recurrent(op: str, gates: int, t, b, i, h, direction, const, lens, state, bias, attrs, rng, scale):
    """(model, feeds) of one ``op`` node (GRU / RNN) with W, R constant or graph inputs, an optional
    sequence_lens constant and initial state."""
    nd = 2 if direction == "bidirectional" else 1
    w = (rng.standard_normal((nd, gates * h, i)) * scale).astype(np.float32)
    r = (rng.standard_normal((nd, gates * h, h)) * scale).astype(np.float32)
    feeds = {"x": rng.standard_normal((t, b, i)).astype(np.float32)}
    inputs = [("x", [t, b, i])]
    inits = [numpy_helper.from_array((rng.standard_normal((nd, 2 * gates * h)) * 0.3).astype(np.float32), "B")]
    if const:
        inits += [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    else:
        feeds.update(W=w, R=r)
        inputs += [("W", list(w.shape)), ("R", list(r.shape))]
    ins = ["x", "W", "R", "B" if bias else "", "", ""]
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        ins[4] = "L"
    if state:
        feeds["h0"] = rng.standard_normal((nd, b, h)).astype(np.float32)
        inputs.append(("h0", [nd, b, h]))
        ins[5] = "h0"
    while ins[-1] == "":
        ins.pop()
    g = helper.make_graph([helper.make_node(op, ins, ["y", "yh"], hidden_size=h, direction=direction, **attrs)], "g",
                          [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, None) for n in ("y", "yh")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m, feeds


GRU_CASES = {  # name -> (T, B, I, H, direction, linear_before_reset, bias, initial state, sequence_lens,
    # constant W / R (ORT prepacks them) [, clip])
    "forward": (5, 2, 8, 16, "forward", 0, True, False, None, True),
    "forward-lbr": (5, 2, 8, 16, "forward", 1, True, False, None, True),
    "batch1-state": (6, 1, 8, 16, "forward", 0, True, True, None, True),
    "bidirectional-lens-lbr": (6, 4, 8, 16, "bidirectional", 1, True, True, [5, 0, 3, 1], True),
    "no-bias-clip": (5, 2, 8, 16, "reverse", 0, False, False, None, True, 0.7),
    "two-k-blocks": (3, 5, 300, 128, "forward", 0, True, False, None, True),
    "run-time-weights-batch1-lbr": (5, 1, 40, 48, "forward", 1, True, False, None, False),
    "run-time-weights-two-k-blocks": (3, 3, 300, 140, "forward", 0, True, False, None, False),
    "run-time-weights-batch70": (3, 70, 40, 24, "forward", 1, True, False, None, False),
    "run-time-weights-reverse-lens": (6, 4, 8, 16, "reverse", 0, True, True, [6, 0, 3, 1], False),
}


@pytest.mark.parametrize("case", sorted(GRU_CASES))
def test_gru_bit_exact(tmp_path, case):
    """ORT's DeepCPU GRU (kernels/onnxruntime/float_gru.py: MLAS GEMMs -- prepacked for constant W / R,
    unpacked with the M1 kernels otherwise --, rnn_helpers' polynomial reset / output gates, MLAS
    sigmoid): Y and Y_h bit for bit; the generic kernel differs."""
    t, b, i, h, direction, lbr, bias, state, lens, const, *clip = GRU_CASES[case]
    attrs = dict(linear_before_reset=lbr, **({"clip": clip[0]} if clip else {}))
    m, feeds = _recurrent("GRU", 3, t, b, i, h, direction, const, lens, state, bias, attrs,
                          np.random.default_rng(len(case)), 0.5)
    want, s, got, generic = _both(tmp_path, m, feeds)
    assert [st.kernel.variant for st in s.steps if st.node.op == "GRU"] == ["ort_float"]
    for name, w_ in zip(("y", "yh"), want):
        assert np.array_equal(_bits(got[name]), _bits(w_)), name
    assert not np.array_equal(_bits(generic["y"]), _bits(want[0]))


def test_torch_exported_gru_at_default_optimisation(tmp_path):
    """PyTorch's GRU export (two bidirectional layers, batch-first, an initial state, a Linear after:
    linear_before_reset 1, weights behind the exporter's Slice / Transpose, which ORT folds and
    prepacks) equals ONNX Runtime's default session on every output bit."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = torch.nn.GRU(20, 32, num_layers=2, batch_first=True, bidirectional=True)
            self.fc = torch.nn.Linear(64, 5)

        def forward(self, x, h):
            y, hn = self.gru(x, h)
            return self.fc(y), hn

    torch.manual_seed(0)
    net = Net().eval()
    x, h = torch.randn(1, 7, 20), torch.randn(4, 1, 32)
    path = tmp_path / "gru.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x, h), str(path), input_names=["x", "h"], output_names=["y", "hn"],
                          opset_version=14, dynamo=False)
    feeds = {"x": x.numpy(), "h": h.numpy()}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    s = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    assert [st.kernel.variant for st in s.steps if st.node.op == "GRU"] == ["ort_float"] * 2
    got = s.run(feeds)
    for name, w_ in zip(("y", "hn"), want):
        assert np.array_equal(_bits(got[name]), _bits(w_)), name


RNN_CASES = {  # name -> (T, B, I, H, direction, constant W / R, sequence_lens, initial state, extra attributes)
    "reverse-lens-state": (6, 3, 8, 16, "reverse", True, [6, 2, 4], True, {}),
    "bidirectional-lens": (6, 3, 8, 16, "bidirectional", True, [6, 2, 4], False, {}),
    "batch1-run-time-weights": (5, 1, 40, 48, "forward", False, None, True, {}),
    "clip-explicit-tanh": (5, 2, 8, 16, "forward", True, None, False, {"clip": 0.5, "activations": ["Tanh"]}),
    "batch70": (3, 70, 40, 24, "forward", True, None, False, {}),
    "two-k-blocks": (4, 2, 300, 140, "forward", False, None, False, {}),
}


@pytest.mark.parametrize("case", sorted(RNN_CASES))
def test_rnn_bit_exact(tmp_path, case):
    """ORT's RNN (kernels/onnxruntime/float_rnn.py: MLAS GEMMs added onto the summed biases, its own
    float32 tanh 2 Sigmoid(2 y) - 1 through expf, sequence_lens keeping the state): Y and Y_h bit for
    bit; the generic kernel differs."""
    t, b, i, h, direction, const, lens, state, extra = RNN_CASES[case]
    m, feeds = _recurrent("RNN", 1, t, b, i, h, direction, const, lens, state, True, extra,
                          np.random.default_rng(len(case)), 0.3)
    want, s, got, generic = _both(tmp_path, m, feeds)
    assert [st.kernel.variant for st in s.steps if st.node.op == "RNN"] == ["ort_float"]
    for name, w_ in zip(("y", "yh"), want):
        assert np.array_equal(_bits(got[name]), _bits(w_)), name
    assert not np.array_equal(_bits(generic["y"]), _bits(want[0]))


GROUP_NORM_CASES = [  # (shape, groups, opset, scale / bias as graph inputs)
    ((2, 8, 5, 7), 4, 21, False), ((2, 8, 5, 7), 4, 18, False), ((1, 32, 9, 9), 8, 21, False),
    ((3, 6, 13), 3, 18, True), ((2, 12, 3, 5), 12, 21, True), ((1, 64, 16, 16), 32, 18, False),
]


@pytest.mark.parametrize("shape, groups, opset, run_time", GROUP_NORM_CASES)
def test_group_normalization_bit_exact(tmp_path, shape, groups, opset, run_time):
    """ORT inlines GroupNormalization's ONNX function body (kernels/onnxruntime/float_group_norm.py:
    ReduceMean rows, E[x^2] - E[x]^2); opsets 18-20 take one scale / bias per group, which the loader
    repeats per channel -- bit for bit, constant or run-time scale / bias; the generic kernel differs."""
    rng = np.random.default_rng(sum(shape) + opset)
    k = shape[1] if opset >= 21 else groups
    sb = {"s": rng.standard_normal(k).astype(np.float32), "b": rng.standard_normal(k).astype(np.float32)}
    feeds = {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}
    inputs = [helper.make_tensor_value_info("x", F, shape)]
    if run_time:
        feeds.update(sb)
        inputs += [helper.make_tensor_value_info(n, F, [k]) for n in sb]
    inits = [] if run_time else [numpy_helper.from_array(v, n) for n, v in sb.items()]
    g = helper.make_graph([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                                            epsilon=1e-4)], "g", inputs,
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    want, s, got, generic = _both(tmp_path, m, feeds)
    assert [st.kernel.variant for st in s.steps if st.node.op == "GroupNormalization"] == ["ort_float"]
    assert np.array_equal(_bits(got["y"]), _bits(want[0]))
    assert not np.array_equal(_bits(generic["y"]), _bits(want[0]))
    np.testing.assert_allclose(generic["y"], want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, axes", [((2, 8, 5, 7), None), ((2, 8, 5, 7), [2, 3]), ((3, 5, 13), [2]),
                                         ((2, 3, 10, 9), [1, 2, 3]), ((4, 6, 7), [0, 2]), ((3, 6, 5), None)])
def test_mean_variance_normalization_bit_exact(tmp_path, shape, axes):
    """ORT's MeanVarianceNormalization (kernels/onnxruntime/float_mvn.py: normalized axes moved last,
    Eigen column sums with the aligned head for the mean and none for the squared deviations, no
    epsilon; axes outside the rank dropped) -- bit for bit; the generic kernel (ONNX's function) differs."""
    rng = np.random.default_rng(sum(shape))
    feeds = {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}
    g = helper.make_graph([helper.make_node("MeanVarianceNormalization", ["x"], ["y"],
                                            **({"axes": axes} if axes else {}))], "g",
                          [helper.make_tensor_value_info("x", F, shape)], [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    # (the generic kernel follows ONNX's function, where axes past the rank are an error)
    want, s, got, generic = _both(tmp_path, m, feeds, generic=len(shape) == 4 or bool(axes))
    assert [st.kernel.variant for st in s.steps] == ["ort_float"]
    assert np.array_equal(_bits(got["y"]), _bits(want[0]))
    if len(shape) == 4 or axes:
        assert not np.array_equal(_bits(generic["y"]), _bits(want[0]))
