"""The NCHWc naming rules of the ONNX Runtime capture (loaders/onnx_dump_nchwc.py) on hand-built graphs
shaped like ORT's optimized ones (names and wiring as nchwc_transformer.cc makes them); the captures
of real ORT graphs are tested in tests/conformance/test_capture_ort_float.py."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from refinterp.loaders import onnx_dump_nchwc as nc  # noqa: E402

N = nc.NCHWC


def _orig():
    """x -> Conv -> a -> Relu -> r ; Conv(r) -> c ; Add(c, r) -> s ; Relu(s) -> y ; BN(y) -> q ;
    Add(q, y) -> z (ORT wraps that one in Reshapes)."""
    mk = helper.make_node
    nodes = [mk("Conv", ["x", "w"], ["a"], name="conv_a"), mk("Relu", ["a"], ["r"], name="relu_r"),
             mk("Conv", ["r", "w2"], ["c"], name="conv_c"), mk("Add", ["c", "r"], ["s"], name="add_s"),
             mk("Relu", ["s"], ["y"], name="relu_y"), mk("BatchNormalization", ["y", "s1", "b1", "m1", "v1"], ["q"]),
             mk("Add", ["q", "y"], ["z"], name="add_z")]
    return nodes


def _optimized():
    mk = helper.make_node
    return helper.make_graph([
        mk("ReorderInput", ["x"], ["ri"], domain=N, name="ReorderInput"),
        mk("Conv", ["ri", "w", ""], ["t0"], domain=N, name="r_nchwc", activation="Relu"),  # FusedConv a+r
        mk("Conv", ["t0", "w2", "", "t0"], ["t1"], domain=N, name="c_nchwc_token_3", activation="Relu"),
        mk("Conv", ["t1", "bs", "bb"], ["t2"], domain=N, name="q_bn_nchwc"),
        mk("Reshape", ["t2", "shp"], ["f0"], name="Reshape_token_7"),
        mk("Reshape", ["t1", "shp"], ["f1"], name="Reshape_token_8"),
        mk("Add", ["f0", "f1"], ["f2"], name="add_z"),
        mk("Reshape", ["f2", "shp2"], ["t3"], name="Reshape_token_9"),
        mk("Transpose", ["t3"], ["u"], perm=[0, 2, 3, 1]),
        mk("ReorderOutput", ["t3"], ["z"], domain=N, channels=16, name="ReorderOutput"),
    ], "opt", [], [], [helper.make_tensor("shp", onnx.TensorProto.INT64, [1], [-1]),
                       helper.make_tensor("shp2", onnx.TensorProto.INT64, [1], [-1])])


def test_classify_blocked_unknown_and_the_reshaped_add():
    blocked, unknown, via = nc.classify(_optimized())
    assert blocked == {"ri", "t0", "t1", "t2", "t3"}
    assert unknown == {"f0", "f1", "f2", "u"}  # z (ReorderOutput) is plain: in neither set
    assert via["t3"].name == "add_z"


def test_targets_follow_the_fusions_nchwc_transformer_makes():
    orig = _orig()
    producer = {o: n for n in orig for o in n.output}
    cons: dict[str, list] = {}
    for n in orig:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    tensors = {"x"} | set(producer)
    g = _optimized()
    by = {n.name: n for n in g.node}

    def target(name):
        return nc.nchwc_target(by[name], producer.get, lambda t: cons.get(t, []), tensors)

    assert target("r_nchwc") == "r"  # Relu fused before NCHWc (FusedConv): named after its output
    assert target("c_nchwc_token_3") == "y"  # Sum fusion (4th input) then the Relu that consumed the Add
    assert target("q_bn_nchwc") == "q"  # a BatchNormalization as a depthwise conv
    assert target("ReorderInput") is None


def test_a_name_that_is_not_a_model_tensor_maps_nothing():
    g = _optimized()
    conv = next(n for n in g.node if n.name == "r_nchwc")
    assert nc.nchwc_target(conv, {}.get, lambda t: [], {"x"}) is None
    sumconv = next(n for n in g.node if n.name == "c_nchwc_token_3")
    # the Sum's Add is not the single consumer: no target rather than a wrong one
    two = [helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["c"], ["k"])]
    assert nc.nchwc_target(sumconv, {}.get, lambda t: two if t == "c" else [], {"c", "s"}) is None
