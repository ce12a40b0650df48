"""One uint8 QDQ model run under the fbgemm and qnnpack schemes and compared with ``refinterp
diff`` (a dump made with ``refinterp run --dump`` under fbgemm, diffed under qnnpack): the report
must show the layers where PyTorch's two engines part ways (the residual Add: float add vs QNNPACK's
fixed point; Sigmoid: float vs table) while the layers whose arithmetic is shared stay exact.
The engine formulas themselves are checked against torch in test_torch_quant_ops.py."""
from __future__ import annotations

import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import refinterp
from refinterp.cli.main import main as cli_main


def _qdq_model(path):
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def q(x, s, z, name):
        nodes.append(helper.make_node("QuantizeLinear", [x, const(f"{name}_s", np.float32(s)),
                                                         const(f"{name}_z", np.uint8(z))], [name], name=name))
        return name

    def dq(x, s, z, name, dtype=np.uint8):
        nodes.append(helper.make_node("DequantizeLinear", [x, const(f"{name}_s", np.float32(s)),
                                                           const(f"{name}_z", dtype(z))], [name], name=name))
        return name

    xq = dq(q("input", 0.02, 128, "in_q"), 0.02, 128, "in_dq")
    w = const("w_q", rng.integers(-100, 100, (8, 3, 3, 3)).astype(np.int8))
    wd = dq(w, 0.01, 0, "w_dq", np.int8)
    b = const("b_q", rng.integers(-500, 500, 8).astype(np.int32))
    nodes.append(helper.make_node("DequantizeLinear", [b, const("b_s", np.float32(0.02 * 0.01))], ["b_dq"], name="b_dq"))
    nodes.append(helper.make_node("Conv", [xq, wd, "b_dq"], ["conv"], name="conv", pads=[1, 1, 1, 1]))
    c = dq(q("conv", 0.05, 121, "conv_q"), 0.05, 121, "conv_dq")
    w2 = dq(const("w2_q", rng.integers(-100, 100, (8, 8, 1, 1)).astype(np.int8)), 0.01, 0, "w2_dq", np.int8)
    nodes.append(helper.make_node("Conv", [c, w2], ["conv2"], name="conv2"))
    c2 = dq(q("conv2", 0.04, 131, "conv2_q"), 0.04, 131, "conv2_dq")
    nodes.append(helper.make_node("Add", [c, c2], ["add"], name="add"))
    a = dq(q("add", 0.07, 127, "add_q"), 0.07, 127, "add_dq")
    nodes.append(helper.make_node("Sigmoid", [a], ["sig"], name="sig"))
    sg = dq(q("sig", 1.0 / 256, 0, "sig_q"), 1.0 / 256, 0, "sig_dq")
    nodes.append(helper.make_node("GlobalAveragePool", [sg], ["gap"], name="gap"))
    dq(q("gap", 1.0 / 256, 0, "gap_q"), 1.0 / 256, 0, "output")
    g = helper.make_graph(nodes, "torch_engines", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 1, 1])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def test_fbgemm_vs_qnnpack_diff(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    _qdq_model(model)
    assert cli_main(["run", str(model), "--scheme", "fbgemm", "--random-inputs", "3", "--dump",
                     str(tmp_path / "fb"), "--quiet"]) == 0
    cli_main(["diff", str(model), "--scheme", "qnnpack", "--against", str(tmp_path / "fb"),
              "--json", str(tmp_path / "r.json"), "--quiet"])
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {r["name"]: r for r in report["tensors"]}
    # the report agrees with running both schemes directly
    graph = refinterp.load(str(model))
    feeds = {"input": np.load(tmp_path / "fb" / "input.npy", allow_pickle=False)}
    fb = refinterp.Session(graph, scheme="fbgemm").run(feeds, capture="all")
    qn = refinterp.Session(graph, scheme="qnnpack").run(feeds, capture="all")
    order = ["conv_q", "conv2_q", "add_q", "sig_q", "gap_q"]
    same = {n: bool(np.array_equal(fb[n], qn[n])) for n in order}
    for n in order:
        assert (rows[n]["status"] == "exact") == same[n], (n, rows[n]["status"], same)
    assert same["conv_q"], same                 # 3x3 conv: no near-tie in this model
    assert not same["add_q"], same              # float add vs QNNPACK fixed point
    first = next(n for n in order if not same[n])
    assert report["first_divergence"] == first, report["first_divergence"]
