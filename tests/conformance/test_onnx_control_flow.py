"""ONNX If / Loop / Scan with bodies run under the session's scheme, vs ONNX Runtime and onnx.reference.

* If on a sample-rate input (a voice-activity model's branch), both branches reading outer values;
* Loop whose body quantizes its carried state and multiplies it by a constant int8 matrix
  (QuantizeLinear -> MatMulInteger -> Cast -> Mul), a trip count and an early-exit condition;
* Scan of a quantized recurrent cell over a sequence (QuantizeLinear / MatMulInteger / Tanh), state and
  per-step outputs, forward and reversed.
Every output compared bit for bit under onnxruntime-cpu (MLAS's own float Tanh included) and, where
onnx.reference runs the model, under onnx-reference; float32 within float tolerance.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import refinterp  # noqa: E402

F, I64, I8, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT8, TensorProto.INT32, TensorProto.BOOL


def _model(g, opset=17):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _ort(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def _ours(m, feeds, tmp_path, scheme):
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    return refinterp.Session(refinterp.load(str(p)), scheme).run(feeds)


def _check(m, feeds, tmp_path, reference: bool = True):
    """``reference``: also onnx.reference under the onnx-reference scheme.  Its Loop concatenates scan
    outputs along axis 0 instead of stacking them (ONNX's own test_loop11 data stacks, as ORT does) and
    its Scan supports neither reversed directions nor output axes other than 0: there the
    onnx-reference scheme is compared with ONNX Runtime instead."""
    want = _ort(m, feeds)
    runs = [("onnxruntime-cpu", want)]
    if reference:
        runs.append(("onnx-reference", dict(zip([o.name for o in m.graph.output], ReferenceEvaluator(m).run(None, feeds)))))
    for scheme, oracle in runs:
        got = _ours(m, feeds, tmp_path, scheme)
        for k, v in oracle.items():
            v = np.asarray(v)
            assert got[k].dtype == v.dtype and got[k].shape == v.shape, f"{scheme} {k}: {got[k].dtype}{got[k].shape}"
            same = np.array_equal(got[k].view(np.uint8), v.view(np.uint8)) if v.dtype.kind == "f" else \
                np.array_equal(got[k], v)
            assert same, f"{scheme} {k}: {np.sum(got[k] != v)}/{v.size} differ"
    # float32 (what the model means): NumPy's exp/tanh, not MLAS's, so floats within float tolerance
    got = _ours(m, feeds, tmp_path, "float32")
    for k, v in want.items():
        if np.asarray(v).dtype.kind == "f":
            np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=f"float32 {k}")


def _if_model():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "gain16"], ["y_then"])], "then", [],
                               [helper.make_tensor_value_info("y_then", F, None)])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "gain8"], ["t"]),
                                helper.make_node("Add", ["t", "x"], ["y_else"])], "else", [],
                               [helper.make_tensor_value_info("y_else", F, None)])
    nodes = [helper.make_node("Equal", ["sr", "k16000"], ["is16"]),
             helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "vad_branch", [helper.make_tensor_value_info("x", F, [1, 64]),
                                                helper.make_tensor_value_info("sr", I64, [])],
                          [helper.make_tensor_value_info("y", F, None)],
                          [numpy_helper.from_array(np.array(16000, np.int64), "k16000"),
                           numpy_helper.from_array(np.array(0.37, np.float32), "gain16"),
                           numpy_helper.from_array(np.array(1.9, np.float32), "gain8")])
    return _model(g)


@pytest.mark.parametrize("sr", [16000, 8000])
def test_if_on_sample_rate(sr, tmp_path):
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    _check(_if_model(), {"x": x, "sr": np.array(sr, np.int64)}, tmp_path)


def _loop_model():
    """state (1, 8) float: q = QuantizeLinear(state, 0.05, 0); acc = MatMulInteger(q, W); state' =
    Cast(acc) * 0.05 * 0.02 + bias; stop when max(state') > 20; scan output: q per step."""
    rng = np.random.default_rng(2)
    w = rng.integers(-60, 60, (8, 8)).astype(np.int8)
    body = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["s_in", "qs", "qz"], ["q"]),
         helper.make_node("MatMulInteger", ["q", "W"], ["acc"]),
         helper.make_node("Cast", ["acc"], ["accf"], to=F),
         helper.make_node("Mul", ["accf", "rescale"], ["r"]),
         helper.make_node("Add", ["r", "bias"], ["s_out"]),
         helper.make_node("ReduceMax", ["s_out"], ["mx"], keepdims=0),
         helper.make_node("Less", ["mx", "limit"], ["c_out"]),
         helper.make_node("Identity", ["q"], ["q_scan"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c_in", B, []),
                 helper.make_tensor_value_info("s_in", F, [1, 8])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("s_out", F, [1, 8]),
         helper.make_tensor_value_info("q_scan", I8, [1, 8])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "s0"], ["s_final", "qs_all"], body=body)], "loop",
        [helper.make_tensor_value_info("s0", F, [1, 8]), helper.make_tensor_value_info("M", I64, []),
         helper.make_tensor_value_info("cond", B, [])],
        [helper.make_tensor_value_info("s_final", F, None), helper.make_tensor_value_info("qs_all", I8, None)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(0.05, np.float32), "qs"),
         numpy_helper.from_array(np.array(0, np.int8), "qz"),
         numpy_helper.from_array(np.array(0.05 * 0.02, np.float32), "rescale"),
         numpy_helper.from_array(rng.standard_normal((1, 8)).astype(np.float32), "bias"),
         numpy_helper.from_array(np.array(20.0, np.float32), "limit")])
    return _model(g)


@pytest.mark.parametrize("trips,cond", [(6, True), (0, True), (50, True), (4, False)])
def test_loop_with_quantized_body(trips, cond, tmp_path):
    s0 = (np.random.default_rng(3).standard_normal((1, 8)) * 2).astype(np.float32)
    _check(_loop_model(), {"s0": s0, "M": np.array(trips, np.int64), "cond": np.array(cond)}, tmp_path,
           reference=False)


def _scan_model(reverse: int):
    """A quantized recurrent cell: h' = Tanh(deq(MatMulInteger(q(x_t), Wx)) + deq(MatMulInteger(q(h), Wh)))."""
    rng = np.random.default_rng(4)
    wx = rng.integers(-80, 80, (6, 8)).astype(np.int8)
    wh = rng.integers(-80, 80, (8, 8)).astype(np.int8)
    body = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x_t", "sx", "z"], ["qx"]),
         helper.make_node("QuantizeLinear", ["h", "sh", "z"], ["qh"]),
         helper.make_node("MatMulInteger", ["qx", "Wx"], ["ax"]),
         helper.make_node("MatMulInteger", ["qh", "Wh"], ["ah"]),
         helper.make_node("Add", ["ax", "ah"], ["a"]),
         helper.make_node("Cast", ["a"], ["af"], to=F),
         helper.make_node("Mul", ["af", "deq"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_new"]),
         helper.make_node("Identity", ["h_new"], ["y_t"]),
         helper.make_node("Identity", ["a"], ["acc_t"])],
        "cell", [helper.make_tensor_value_info("h", F, [1, 8]), helper.make_tensor_value_info("x_t", F, [1, 6])],
        [helper.make_tensor_value_info("h_new", F, [1, 8]), helper.make_tensor_value_info("y_t", F, [1, 8]),
         helper.make_tensor_value_info("acc_t", I32, [1, 8])])
    g = helper.make_graph(
        [helper.make_node("Scan", ["h0", "xs"], ["h_last", "ys", "accs"], body=body, num_scan_inputs=1,
                          scan_input_directions=[reverse], scan_output_directions=[0, reverse],
                          scan_output_axes=[0, 1])],
        "scan", [helper.make_tensor_value_info("h0", F, [1, 8]), helper.make_tensor_value_info("xs", F, [7, 1, 6])],
        [helper.make_tensor_value_info("h_last", F, None), helper.make_tensor_value_info("ys", F, None),
         helper.make_tensor_value_info("accs", I32, None)],
        [numpy_helper.from_array(wx, "Wx"), numpy_helper.from_array(wh, "Wh"),
         numpy_helper.from_array(np.array(0.02, np.float32), "sx"),
         numpy_helper.from_array(np.array(1 / 127, np.float32), "sh"),
         numpy_helper.from_array(np.array(0, np.int8), "z"),
         numpy_helper.from_array(np.array(0.02 / 127 / 4, np.float32), "deq")])
    return _model(g)


@pytest.mark.parametrize("reverse", [0, 1])
def test_scan_quantized_cell(reverse, tmp_path):
    rng = np.random.default_rng(5)
    feeds = {"h0": np.zeros((1, 8), np.float32), "xs": (rng.standard_normal((7, 1, 6)) * 1.5).astype(np.float32)}
    _check(_scan_model(reverse), feeds, tmp_path, reference=False)


def test_control_flow_nodes_prepare_their_bodies_once(tmp_path):
    """The body is a child Session built with the node (scheme applied once), not per run."""
    p = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), str(p))
    s = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu")
    step = s.steps[0]
    body = step.plan.sessions["body"]
    ops = {st.node.op for st in body.steps}
    assert {"QuantizeLinear", "MatMulInteger"} <= ops
    assert body.scheme.name == "onnxruntime-cpu"
    assert "W" in step.plan.implicit and "W" in step.node.inputs  # outer initializers: implicit inputs
