"""The QDQ fusion pass (refinterp/passes/qdq.py), the ``graph_passes`` scheme key and the Session hook."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.errors import SchemeError  # noqa: E402
from refinterp.passes import fuse_qdq, fuse_qdq_x86  # noqa: E402
from refinterp.schemes import schema  # noqa: E402


def _init(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


def _qdq_graph(tmp_path, relu_zp=-128, expose_conv_out=False):
    """x -> Q -> DQ -> Conv(DQ w per-channel, DQ bias) -> Relu -> Q -> DQ -> Add(DQ other) -> Q -> DQ
    plus a Sigmoid whose float output is consumed twice (not fusable)."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (2, 2, 3, 3)).astype(np.int8)
    inits = [_init("xs", np.float32(0.02)), _init("xz", np.int8(3)), _init("w", w),
             _init("ws", np.float32([0.01, 0.02])), _init("wz", np.zeros(2, np.int8)),
             _init("b", rng.integers(-100, 100, 2).astype(np.int32)),
             _init("bs", (np.float32(0.02) * np.float32([0.01, 0.02])).astype(np.float32)),
             _init("bz", np.zeros(2, np.int32)),
             _init("cs", np.float32(0.05)), _init("cz", np.int8(relu_zp)),
             _init("os", np.float32(0.04)), _init("oz", np.int8(-7)),
             _init("ys", np.float32(0.06)), _init("yz", np.int8(2))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q_in"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq_in"),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dq_w", axis=0),
        helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], name="dq_b", axis=0),
        helper.make_node("Conv", ["xd", "wd", "bd"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("QuantizeLinear", ["relu", "cs", "cz"], ["cq"], name="q_conv"),
        helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["cd"], name="dq_conv"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd2"], name="dq_in2"),
        helper.make_node("Add", ["cd", "xd2"], ["add"], name="add"),
        helper.make_node("QuantizeLinear", ["add", "os", "oz"], ["aq"], name="q_add"),
        helper.make_node("DequantizeLinear", ["aq", "os", "oz"], ["ad"], name="dq_add"),
        helper.make_node("Sigmoid", ["ad"], ["sig"], name="sig"),
        helper.make_node("QuantizeLinear", ["sig", "ys", "yz"], ["sq"], name="q_sig"),
        helper.make_node("Mul", ["sig", "sig"], ["sq2"], name="mul_float"),
    ]
    outs = [helper.make_tensor_value_info("sq", TensorProto.INT8, None),
            helper.make_tensor_value_info("sq2", TensorProto.FLOAT, None)]
    if expose_conv_out:
        outs.append(helper.make_tensor_value_info("conv", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / "qdq.onnx"
    onnx.save(m, str(path))
    return refinterp.load(str(path))


def _by_name(g):
    return {n.name: n for n in g.nodes}


def test_fuses_conv_relu_add_and_leaves_shared_sigmoid(tmp_path):
    g = _qdq_graph(tmp_path)
    before = [(n.name, n.op, list(n.inputs)) for n in g.nodes]
    f = fuse_qdq(g)
    assert [(n.name, n.op, list(n.inputs)) for n in g.nodes] == before  # input graph untouched
    nodes = _by_name(f)
    conv = nodes["conv"]
    assert conv.source_op == "QDQ:Conv"
    assert conv.inputs == ["xq", "w", "b"] and conv.outputs == ["cq"]
    assert "relu" not in nodes  # ReluQuantFusion: Q zero point == int8 min
    wq = f.tensors["w"].quant
    assert wq.axis == 0 and np.allclose(wq.scale, [0.01, 0.02])
    assert f.tensors["cq"].quant.zero_point[0] == -128
    add = nodes["add"]
    assert add.source_op == "QDQ:Add" and add.inputs == ["cq", "xq"] and add.outputs == ["aq"]
    # Sigmoid's float output also feeds a float Mul: not a QDQ unit, stays float with its Q
    assert nodes["sig"].op == "Sigmoid" and nodes["sig"].source_op != "QDQ:Sigmoid"
    assert "q_sig" in nodes and "dq_add" in nodes
    for gone in ("dq_in", "dq_in2", "dq_w", "dq_b", "q_conv", "dq_conv", "q_add"):
        assert gone not in nodes


def test_relu_kept_when_zero_point_not_qmin(tmp_path):
    f = fuse_qdq(_qdq_graph(tmp_path, relu_zp=5))
    nodes = _by_name(f)
    assert nodes["relu"].op == "Relu"
    assert nodes["conv"].op == "Conv" and nodes["conv"].source_op != "QDQ:Conv"  # Conv -> Relu, not -> Q


def test_graph_output_blocks_fusion(tmp_path):
    f = fuse_qdq(_qdq_graph(tmp_path, expose_conv_out=True))
    assert _by_name(f)["conv"].inputs == ["xd", "wd", "bd"]


def test_session_applies_pass_only_when_scheme_asks(tmp_path):
    g = _qdq_graph(tmp_path)
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5)).astype(np.float32)
    s_float = refinterp.Session(g, "float32")
    assert any(st.node.op == "QuantizeLinear" and st.node.name == "q_conv" for st in s_float.steps)
    s_arm = refinterp.Session(g, "onnxruntime-arm64")  # graph_passes: [fuse_qdq]
    assert [st.node.name for st in s_arm.steps if st.node.source_op.startswith("QDQ:")] == ["conv", "add"]
    assert all(st.kernel.variant == "ort" for st in s_arm.steps if st.node.source_op.startswith("QDQ:"))
    y_float, y_arm = s_float.run({"x": x}), s_arm.run({"x": x})
    assert y_float["sq"].dtype == y_arm["sq"].dtype == np.int8
    # fused integer and literal float paths agree to within one code on this small graph
    assert np.max(np.abs(y_float["sq"].astype(int) - y_arm["sq"].astype(int))) <= 1


def test_x86_reencoding_blocks_mixed_type_units(tmp_path):
    """x86 (fuse_qdq_x86): 'xq' feeds two DQs and stays int8 while 'cq' (one DQ, one consumer) becomes
    uint8, so neither the Conv (int8 in, uint8 out) nor the Add (uint8 + int8) unit is fused."""
    g = _qdq_graph(tmp_path)
    s = refinterp.Session(g, "onnxruntime-cpu")
    assert not [st.node.name for st in s.steps if st.node.source_op.startswith("QDQ:")]
    assert "relu" not in _by_name(fuse_qdq_x86(g))  # ReluQuantFusion does not depend on the types


def test_x86_marks_int8_units_computed_as_uint8(tmp_path):
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("s0", 0.03), ("s1", 0.05), ("so", 0.07))]
    inits += [numpy_helper.from_array(np.int8(v), n) for n, v in (("z0", 1), ("z1", -3), ("zo", 9))]
    nodes = [helper.make_node("QuantizeLinear", ["a", "s0", "z0"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "s0", "z0"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "s1", "z1"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "s1", "z1"], ["bd"]),
             helper.make_node("Add", ["ad", "bd"], ["y"], name="add"),
             helper.make_node("QuantizeLinear", ["y", "so", "zo"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "so", "zo"], ["out"])]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 4]) for n in ("a", "b")]
    m = helper.make_model(helper.make_graph(nodes, "add", vi, [helper.make_tensor_value_info("out", 1, None)],
                                            initializer=inits), opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, str(tmp_path / "add.onnx"))
    g = refinterp.load(str(tmp_path / "add.onnx"))
    assert _by_name(fuse_qdq_x86(g))["add"].attrs.get("int8_as_uint8") == 1
    assert "int8_as_uint8" not in _by_name(fuse_qdq(g))["add"].attrs
    feeds = {k: rng.standard_normal((4, 4)).astype(np.float32) for k in ("a", "b")}
    assert refinterp.Session(g, "onnxruntime-cpu").run(feeds)["out"].shape == (4, 4)


def test_schema_validates_graph_passes():
    schema.validate({"name": "x", "graph_passes": ["fuse_qdq", "fuse_qdq_x86"]}, "t.yaml")
    with pytest.raises(SchemeError, match="unknown graph pass"):
        schema.validate({"name": "x", "graph_passes": ["fuse_everything"]}, "t.yaml")
    with pytest.raises(SchemeError, match="graph_passes"):
        schema.validate({"name": "x", "graph_passes": "fuse_qdq"}, "t.yaml")
