"""Nodes a scheme does not model: a plain Session refuses the model; ``unmodelled=True`` (diff,
inspect, --explain) keeps them as stubs whose outputs are anchored on given values, and the diff
compares every other tensor, the ones after a stub from the device's values."""
import json

import numpy as np
import pytest

from refinterp import Session
from refinterp.cli.main import main
from refinterp.compare.engine import Differ
from refinterp.errors import UnsupportedOpError

from tests.unit.test_compare_engine import as_dump, cnn, device_run, x_img

REFUSAL = "relu refused for this test"


def no_relu(tmp_path) -> str:
    p = tmp_path / "no-relu.yaml"
    p.write_text(f"name: no-relu\nextends: float32\nops:\n  Relu: {{refuse_dtypes: {{float32: \"{REFUSAL}\"}}}}\n")
    return str(p)


def test_plain_session_refuses_and_stub_session_needs_anchors(tmp_path):
    g, scheme = cnn(), no_relu(tmp_path)
    with pytest.raises(UnsupportedOpError, match=REFUSAL):
        Session(g, scheme)
    s = Session(g, scheme, unmodelled=True)
    assert list(s.unmodelled) == ["n_relu"] and REFUSAL in s.unmodelled["n_relu"]
    x = x_img()
    with pytest.raises(UnsupportedOpError, match=REFUSAL):  # no anchors: the stub refuses as the plain Session
        s.run({"x": x})
    lost = s.run({"x": x}, capture="all", anchors={})  # no value to continue from: the rest is not computed
    assert "out" not in lost and "conv1/out:0" in lost and list(s.not_computed) == ["n_relu", "n_conv2", "n_add"]
    dev = device_run(g, x)
    anchor = dev["relu1"] + 1.0  # any value: the nodes after the stub run on it
    got = s.run({"x": x}, capture="all", anchors={"relu1": anchor})
    assert np.array_equal(got["relu1"], anchor)
    assert np.array_equal(got["conv2"], Session(g).run_node("n_conv2", [anchor])[0])
    with pytest.raises(UnsupportedOpError, match=REFUSAL):
        s.run_node("n_relu", [dev["conv1/out:0"]])


def test_diff_reports_the_stub_and_compares_the_rest_from_the_device_values(tmp_path):
    g, scheme = cnn(), no_relu(tmp_path)
    x = x_img()
    res = Differ(g, scheme).run(as_dump(device_run(g, x)))
    by = {t.name: t for t in res.tensors}
    assert by["relu1"].status == "unmodelled" and any(REFUSAL in n for n in by["relu1"].notes)
    assert by["relu1"].metrics is None and by["relu1"].local is None
    assert all(by[n].status == "exact" for n in ("x", "conv1/out:0", "conv2", "out")) and res.passed
    assert any("not modelled under no-relu" in n for n in res.notes)
    # a device fault at the unmodelled node itself is not attributed to it; the later layers, run on
    # the device's own (faulty) values, still match
    res = Differ(g, scheme).run(as_dump(device_run(g, x, fault="relu1")))
    by = {t.name: t for t in res.tensors}
    assert by["relu1"].status == "unmodelled" and by["conv2"].status == "exact" and res.passed
    # a fault after it is found, with its own local cause
    res = Differ(g, scheme).run(as_dump(device_run(g, x, fault="conv2")))
    assert res.first_divergence.name == "conv2" and res.first_divergence.cause == "local" and not res.passed


def test_diff_without_the_stubs_output_in_the_dump_leaves_what_follows_uncomputed(tmp_path):
    """No device value of the stub's output (a float op between QDQ units, which a capture of QuantizeLinear
    outputs does not hold) nor of what follows: the nodes reading it are not computed and say so; what comes
    before is compared."""
    g, scheme = cnn(), no_relu(tmp_path)
    vals = device_run(g, x_img())
    del vals["relu1"], vals["conv2"]
    res = Differ(g, scheme).run(as_dump(vals))
    by = {t.name: t for t in res.tensors}
    assert by["conv1/out:0"].status == "exact" and res.passed
    assert all(by[n].status == "unmodelled" for n in ("relu1", "conv2", "out"))
    assert any("no value" in n for n in by["relu1"].notes) and any("not computed" in n for n in by["out"].notes)


def test_diff_goes_on_from_the_device_values_after_a_node_it_could_not_compute(tmp_path):
    """The dump lacks the stub's output but has the next node's: that node is not computed (and not compared),
    the nodes after it run on its device values and are compared (a capture of QuantizeLinear outputs: the float
    op's output missing, the next unit's codes there).  A fault further down is still found."""
    g, scheme = cnn(), no_relu(tmp_path)
    vals = device_run(g, x_img())
    del vals["relu1"]
    res = Differ(g, scheme).run(as_dump(vals))
    by = {t.name: t for t in res.tensors}
    assert by["relu1"].status == "unmodelled" and by["conv2"].status == "unmodelled"
    assert any("ran on the device's values" in n for n in by["conv2"].notes) and by["conv2"].metrics is None
    assert by["out"].status == "exact" and res.passed
    vals = device_run(g, x_img(), fault="out")
    del vals["relu1"]
    res = Differ(g, scheme).run(as_dump(vals))
    assert res.first_divergence.name == "out" and not res.passed


def test_inspect_lists_the_nodes_a_scheme_does_not_model(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert main(["inspect", str(path), "--scheme", no_relu(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["unmodelled"]) == [doc["nodes"][0]["name"]] and REFUSAL in next(iter(doc["unmodelled"].values()))
    assert [n["variant"] for n in doc["nodes"]] == ["unmodelled", "float"]
    assert main(["inspect", str(path), "--scheme", no_relu(tmp_path)]) == 0
    assert "1 node(s) not modelled under no-relu" in capsys.readouterr().out


def test_write_scheme_verifies_under_the_float_tolerance(tmp_path):
    """The suggested scheme is verified as --explain judged: float tensors within the diff's float
    tolerance count as reproduced (here the device's last layer is one float32 ulp off).  (A best scheme
    with unmodelled nodes: test_qnn_htp_transformer.py.)"""
    from refinterp.compare.scheme_writer import write_scheme

    g, scheme = cnn(), no_relu(tmp_path)
    vals = device_run(g, x_img())
    vals["out"] = np.nextafter(vals["out"], np.float32(np.inf))
    differ = Differ(g, scheme)
    differ.explain = True
    differ.run(as_dump(vals))
    summary = write_scheme(differ.explanation, tmp_path / "fix.yaml")
    assert summary["verified"] and summary["not_reproduced"] == [], summary
    assert summary["extends"] == "float32" and summary["unmodelled"] == []


def test_a_refusal_when_run_is_anchored_in_a_diff_and_raised_elsewhere():
    """A kernel that refuses its inputs only when run (the HTP's undecided LayerNormalization rows): a plain run
    raises it; the diff takes the node's outputs from the device for that sample, reports them unmodelled with
    the reason, and compares the rest."""
    import dataclasses

    from refinterp.kernels.registry import Kernel

    def refuse(plan, *args):
        raise UnsupportedOpError("this row is undecided")

    g = cnn()
    x = x_img()
    differ = Differ(g)
    i = next(k for k, st in enumerate(differ.session.steps) if st.node.name == "n_relu")
    st = differ.session.steps[i]
    differ.session.steps[i] = dataclasses.replace(st, kernel=Kernel(st.kernel.op, st.kernel.variant, refuse))
    with pytest.raises(UnsupportedOpError, match="undecided"):
        differ.session.run({"x": x})
    res = differ.run(as_dump(device_run(g, x, fault="relu1")))
    by = {t.name: t for t in res.tensors}
    assert by["relu1"].status == "unmodelled" and any("undecided" in n for n in by["relu1"].notes)
    assert by["conv2"].status == "exact" and by["out"].status == "exact" and res.passed
