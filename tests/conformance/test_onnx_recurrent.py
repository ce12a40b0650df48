"""ONNX RNN / GRU / LSTM (float32) against ONNX Runtime on the options the node conformance cases
leave out: bidirectional, per-row sequence_lens (shorter rows, reverse direction inside each row's
length), layout 1, clip, peepholes, input_forget, linear_before_reset, non-default activations and
initial states.  Float tensors: within 1e-5 relative (refinterp's matmuls are BLAS calls)."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402

G = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, B, I, H = 5, 3, 4, 6


def _model(op: str, attrs: dict, with_lens: bool, with_init: bool, layout: int):
    rng = np.random.default_rng(len(op) + len(attrs))
    d = 2 if attrs.get("direction") == "bidirectional" else 1
    g = G[op]
    inits = {"W": rng.normal(0, 0.5, (d, g * H, I)), "R": rng.normal(0, 0.5, (d, g * H, H)),
             "B": rng.normal(0, 0.2, (d, 2 * g * H))}
    names = ["X", "W", "R", "B", "lens" if with_lens else "", "h0" if with_init else ""]
    if op == "LSTM":
        names += ["c0" if with_init else "", "P"]
        inits["P"] = rng.normal(0, 0.3, (d, 3 * H))
    feeds = {"X": rng.normal(0, 1, (B, T, I) if layout else (T, B, I)).astype(np.float32)}
    if with_lens:
        feeds["lens"] = np.array([5, 2, 4], np.int32)
    if with_init:
        shape = (B, d, H) if layout else (d, B, H)
        feeds["h0"] = rng.normal(0, 0.5, shape).astype(np.float32)
        if op == "LSTM":
            feeds["c0"] = rng.normal(0, 0.5, shape).astype(np.float32)
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=H, layout=layout, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "lens" else TensorProto.FLOAT, v.shape)
         for n, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.astype(np.float32).ravel()) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


CASES = [
    ("RNN", {"direction": "bidirectional"}, True, True, 0),
    ("RNN", {"activations": ["Relu"], "clip": 2.0}, False, True, 1),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1}, True, True, 0),
    ("GRU", {"direction": "reverse"}, True, False, 1),
    ("GRU", {"activations": ["HardSigmoid", "Tanh"], "activation_alpha": [0.3], "activation_beta": [0.4]},
     False, True, 0),
    ("LSTM", {"direction": "bidirectional"}, True, True, 0),
    ("LSTM", {"direction": "reverse", "clip": 1.5}, True, True, 1),
    ("LSTM", {"input_forget": 1}, False, False, 0),
    ("LSTM", {"activations": ["Sigmoid", "Tanh", "Relu"]}, True, False, 0),
]


@pytest.mark.parametrize("op,attrs,with_lens,with_init,layout", CASES,
                         ids=[f"{c[0]}-{'-'.join(f'{k}' for k in c[1]) or 'plain'}-{'lens' if c[2] else 'full'}"
                              f"-L{c[4]}" for c in CASES])
def test_recurrent_matches_onnxruntime(tmp_path, op, attrs, with_lens, with_init, layout):
    """ONNX Runtime has no layout 1 (batch-major): its answer there is the layout-0 twin's, with
    the inputs and outputs transposed."""
    model, feeds = _model(op, attrs, with_lens, with_init, layout)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    twin, twin_feeds = (model, feeds) if not layout else _model(op, attrs, with_lens, with_init, 0)
    if layout:
        twin_feeds = {k: (np.swapaxes(v, 0, 1) if k in ("X", "h0", "c0") else v) for k, v in feeds.items()}
    want = ort.InferenceSession(twin.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, twin_feeds)
    if layout:
        want = [np.transpose(want[0], (2, 0, 1, 3))] + [np.swapaxes(w, 0, 1) for w in want[1:]]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)
    for name, w in zip([o.name for o in model.graph.output], want):
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-6, err_msg=name)
