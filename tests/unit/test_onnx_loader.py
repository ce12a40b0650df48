"""ONNX loader: external data safety, malformed files, QOperator -> QuantParams, opset normalisation."""
from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp import Session  # noqa: E402
from refinterp.errors import ModelError, UnsupportedOpError  # noqa: E402
from refinterp.loaders.onnx import load_onnx, load_onnx_model  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17, domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


def _vi(name, shape, dt=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dt, shape)


# -- external data ---------------------------------------------------------------------------
def _external_model(location: str, offset: int = 0, length: int = 16):
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = w.external_data.add()
        e.key, e.value = k, v
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [w])


def _save(model, path):
    path.write_bytes(model.SerializeToString())
    return path


def test_external_data_inside_folder_loads(tmp_path):
    data = np.arange(8, dtype=np.float32)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(data.tobytes())
    p = _save(_external_model("sub/w.bin", offset=16, length=16), tmp_path / "m.onnx")
    g = load_onnx(p)
    np.testing.assert_array_equal(g.const("w"), data[4:])
    assert g.inputs == ["x"]
    out = Session(g).run({"x": np.ones(4, np.float32)})["y"]
    np.testing.assert_array_equal(out, data[4:] + 1)


@pytest.mark.parametrize("location, words", [
    ("../secret.bin", "'..'"),
    ("sub/../../secret.bin", "'..'"),
    ("/etc/passwd", "absolute"),
])
def test_external_data_outside_folder_refused(tmp_path, location, words):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    p = _save(_external_model(location), model_dir / "m.onnx")
    with pytest.raises(ModelError) as e:
        load_onnx(p)
    msg = str(e.value)
    assert words in msg and location in msg and str(p) in msg and "\n" not in msg


def test_external_data_symlink_leaving_folder_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 16)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    os.symlink(tmp_path / "secret.bin", model_dir / "w.bin")
    p = _save(_external_model("w.bin"), model_dir / "m.onnx")
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_onnx(p)


def test_external_data_missing_file_and_bad_range(tmp_path):
    p = _save(_external_model("nope.bin"), tmp_path / "m.onnx")
    with pytest.raises(ModelError, match="no such file"):
        load_onnx(p)
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)
    p = _save(_external_model("w.bin", length=16), tmp_path / "m2.onnx")
    with pytest.raises(ModelError, match="outside 'w.bin'"):
        load_onnx(p)


def test_in_memory_external_data_needs_a_folder():
    with pytest.raises(ModelError, match="external data"):
        load_onnx_model(_external_model("w.bin"))


# -- malformed files -------------------------------------------------------------------------
@pytest.mark.parametrize("payload", [b"this is plainly not a protobuf \xff\xff\xff", b"\x08\x07\x12", b""])
def test_not_a_model_file(tmp_path, payload):
    p = tmp_path / "bad.onnx"
    p.write_bytes(payload)
    with pytest.raises(ModelError) as e:
        refinterp.load(p)
    assert "not an ONNX model" in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_nodes_out_of_topological_order_run_in_dependency_order():
    """Graphs written out of order (ONNX Runtime sorts and runs them) are sorted, keeping the file's
    order where it is valid; outer names read by an If branch count as dependencies."""
    then_g = helper.make_graph([helper.make_node("Mul", ["t", "t"], ["r"])], "then", [], [_vi("r", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["t"], ["r2"])], "else", [], [_vi("r2", [2])])
    nodes = [helper.make_node("Relu", ["t"], ["a"], name="uses_t"),
             helper.make_node("If", ["c"], ["b"], name="if", then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["a", "b"], ["y"], name="sum"),
             helper.make_node("Neg", ["x"], ["t"], name="makes_t"),
             helper.make_node("ReduceSum", ["x"], ["s"], name="rs", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="cmp")]
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    m = _model(nodes, [_vi("x", [2])], [_vi("y", [2])], [zero])
    g = load_onnx_model(m)
    assert [n.name for n in g.nodes][:2] == ["makes_t", "uses_t"]
    assert [n.name for n in g.nodes].index("if") > [n.name for n in g.nodes].index("cmp")
    sess = refinterp.Session(g, "float32")
    for x in (np.array([1.5, -2.0], np.float32), np.array([-1.5, -2.0], np.float32)):
        t = -x
        want = np.maximum(t, 0) + (t * t if x.sum() > 0 else -t)
        np.testing.assert_array_equal(sess.run({"x": x})["y"], want)


def test_graph_cycle_refused_naming_it():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="head"),
             helper.make_node("Add", ["a", "c"], ["b"], name="p"), helper.make_node("Neg", ["b"], ["c"], name="q"),
             helper.make_node("Relu", ["b"], ["y"], name="tail")]
    m = _model(nodes, [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(ModelError, match=r"cycle: '(p|q)' -> '(p|q)' -> '(p|q)'") as e:
        load_onnx_model(m)
    assert "\n" not in str(e.value)


# -- structure -------------------------------------------------------------------------------
def test_names_constants_shapes_and_unknown_ops():
    c = helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0])
    nodes = [c, helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Add", ["a", "b"], ["s"], name="Add_1"),
             helper.make_node("Frobnicate", ["s"], ["y"], domain="com.example")]
    b = numpy_helper.from_array(np.ones(2, np.float32), "b")
    m = _model(nodes, [_vi("x", ["batch", 2]), _vi("b", [2])], [_vi("y", None)], [b], domains=["com.example"])
    g = load_onnx_model(m)
    assert g.inputs == ["x"]  # the initializer-backed input is not a graph input
    assert g.tensors["x"].shape == (None, 2) and g.tensors["a"].shape == (None, 2)
    np.testing.assert_array_equal(g.const("c"), [1.0, 2.0])
    assert [n.name for n in g.nodes] == ["Add_1_1", "Add_1", "Frobnicate_3"]  # explicit names win
    assert g.nodes[2].op == "com.example.Frobnicate"
    with pytest.raises(UnsupportedOpError, match="com.example.Frobnicate"):
        Session(g)


# -- QOperator -------------------------------------------------------------------------------
def _qop_model(scale_as_input: bool | str = False):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(np.array(v, dt), n) for n, v, dt in [
        ("xs", 0.05, np.float32), ("xz", 128, np.uint8),
        ("w", rng.integers(-20, 20, (4, 3, 3, 3)), np.int8), ("ws", [0.01, 0.02, 0.03, 0.04], np.float32),
        ("wz", [0, 0, 0, 0], np.int8), ("b", [10, -5, 0, 7], np.int32),
        ("cs", 0.1, np.float32), ("cz", 120, np.uint8),
        ("dw", rng.integers(-20, 20, (4, 1, 3, 3)), np.int8), ("dws", 0.02, np.float32), ("dwz", 0, np.int8),
        ("ds", 0.08, np.float32), ("dz", 125, np.uint8), ("as", 0.2, np.float32), ("az", 100, np.uint8),
        ("ss", 1 / 256, np.float32), ("sz", 0, np.uint8)]]
    fed = "xs" if scale_as_input is True else scale_as_input  # the scale fed as a graph input
    if fed:
        init = [t for t in init if t.name != fed]
    nodes = [
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "cs", "cz", "b"], ["c"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("QLinearConv", ["c", "cs", "cz", "dw", "dws", "dwz", "ds", "dz"], ["d"], group=4,
                         pads=[1, 1, 1, 1]),
        helper.make_node("QLinearAdd", ["c", "cs", "cz", "d", "ds", "dz", "as", "az"], ["a"],
                         domain="com.microsoft"),
        helper.make_node("QLinearSigmoid", ["a", "as", "az", "ss", "sz"], ["y"], domain="com.microsoft"),
    ]
    inputs = [_vi("x", [1, 3, 6, 6], TensorProto.UINT8)] + ([_vi(fed, [])] if fed else [])
    return _model(nodes, inputs, [_vi("y", [1, 4, 6, 6], TensorProto.UINT8)], init, opset=13,
                  domains=["com.microsoft"])


def test_qoperator_ops_become_float_ops_with_quant_params():
    g = load_onnx_model(_qop_model())
    assert [(n.op, n.source_op) for n in g.nodes] == [
        ("Conv", "QLinearConv"), ("DepthwiseConv", "QLinearConv"), ("Add", "com.microsoft.QLinearAdd"),
        ("Sigmoid", "com.microsoft.QLinearSigmoid")]
    assert [n.inputs for n in g.nodes] == [["x", "w", "b"], ["c", "dw"], ["c", "d"], ["a"]]
    t = g.tensors
    assert t["x"].quant.scale.tolist() == [np.float32(0.05)] and t["x"].quant.zero_point.tolist() == [128]
    assert t["w"].quant.axis == 0 and np.allclose(t["w"].quant.scale, [0.01, 0.02, 0.03, 0.04])
    np.testing.assert_allclose(t["b"].quant.scale, np.float32(0.05) * np.float32([0.01, 0.02, 0.03, 0.04]))
    assert t["b"].quant.zero_point.tolist() == [0, 0, 0, 0]
    assert t["c"].quant.zero_point.tolist() == [120] and t["c"].dtype == "uint8"
    assert t["a"].dtype == "uint8" and t["a"].quant.scale.tolist() == [np.float32(0.2)]
    assert t["y"].quant.scale.tolist() == [np.float32(1 / 256)]
    assert g.nodes[1].attrs["depth_multiplier"] == 1 and g.nodes[1].attrs["group"] == 4
    assert g.nodes[0].attrs["layout"] == "NCHW" and g.nodes[0].attrs["weight_layout"] == "OIHW"


def test_contrib_quantize_dequantize_outputs_are_typed_as_the_onnx_ops():
    """com.microsoft QuantizeLinear / DequantizeLinear (shape inference leaves them untyped): Q gives its zero
    point's type (uint8 without one), DQ its scale's, as the ONNX ops; not the first input's type."""
    c = lambda n, v, dt: numpy_helper.from_array(np.array(v, dt), n)  # noqa: E731
    ms = "com.microsoft"
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=ms),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], domain=ms),
             helper.make_node("QuantizeLinear", ["d", "s"], ["q8"], domain=ms),
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bd"], domain=ms),
             helper.make_node("Add", ["d", "bd"], ["y"])]
    m = _model(nodes, [_vi("x", [4])], [_vi("y", [4]), _vi("q8", [4], TensorProto.UINT8)],
               [c("s", 0.01, np.float32), c("z", 30000, np.uint16), c("b", [1, 2, 3, 4], np.int32),
                c("bs", 0.001, np.float32)], domains=[ms])
    t = load_onnx_model(m).tensors
    assert (t["q"].dtype, t["d"].dtype, t["q8"].dtype, t["bd"].dtype) == ("uint16", "float32", "uint8", "float32")


def test_qoperator_scale_must_be_constant():
    """QLinearConv / QLinearMatMul read run-time scales themselves (``*Runtime`` ops); the other
    QOperator ops need constant ones to turn into quantized tensors."""
    g = load_onnx_model(_qop_model(scale_as_input="xs"))
    assert g.nodes[0].op == "QLinearConvRuntime" and g.nodes[1].op == "DepthwiseConv"
    with pytest.raises(ModelError, match="'as' must be a constant"):
        load_onnx_model(_qop_model(scale_as_input="as"))


# -- opset normalisation ---------------------------------------------------------------------
def _opset11_model():
    i64 = TensorProto.INT64
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),                       # [1,2,3,4]
        helper.make_node("ReduceMean", ["u"], ["r"], axes=[3], keepdims=1),          # [1,2,3,1]
        helper.make_node("Squeeze", ["r"], ["s"], axes=[0, 3]),                      # [2,3]
        helper.make_node("Split", ["x"], ["p0", "p1"], axis=2, split=[1, 3]),        # [2,3,1] [2,3,3]
        helper.make_node("Softmax", ["p1"], ["sm"], axis=1),                         # coerced 2-D over 3x3
        helper.make_node("ReduceSum", ["sm"], ["rs"], axes=[1], keepdims=0),         # [2,3]
        helper.make_node("Add", ["rs", "s"], ["y"]),
    ]
    del i64
    return _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 3]), _vi("p0", [2, 3, 1])], opset=11)


def test_opset11_model_is_normalised():
    g = load_onnx_model(_opset11_model())
    by_src = {n.name: n for n in g.nodes}
    for n in g.nodes:
        assert "axes" not in n.attrs and "split" not in n.attrs, n
    unsq = by_src["Unsqueeze_0"]
    np.testing.assert_array_equal(g.const(unsq.inputs[1]), [0])
    assert g.tensors[unsq.inputs[1]].dtype == "int64"
    np.testing.assert_array_equal(g.const(by_src["Split_3"].inputs[1]), [1, 3])
    np.testing.assert_array_equal(g.const(by_src["ReduceMean_1"].inputs[1]), [3])
    assert [n.op for n in g.nodes if n.source_op == "Softmax"] == ["Shape", "Flatten", "Softmax", "Reshape"]


def test_opset11_model_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    m = _opset11_model()
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = Session(load_onnx_model(m)).run({"x": x})
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["p0"], want[1])


def test_legacy_attribute_inputs_opset9():
    nodes = [helper.make_node("Clip", ["x"], ["c"], min=-0.5, max=0.5),
             helper.make_node("Pad", ["c"], ["p"], pads=[0, 1, 0, 1], value=2.0),
             helper.make_node("Slice", ["p"], ["s"], starts=[1], ends=[4], axes=[1]),
             helper.make_node("Upsample", ["s", "sc"], ["y"], mode="nearest")]
    sc = numpy_helper.from_array(np.array([1, 2], np.float32), "sc")
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 6])], [sc], opset=9)
    g = load_onnx_model(m)
    assert [n.op for n in g.nodes] == ["Clip", "Pad", "Slice", "Resize"]
    rs = g.nodes[3]
    assert rs.inputs == ["s", "", "sc"] and rs.attrs["coordinate_transformation_mode"] == "asymmetric"
    np.testing.assert_array_equal(g.const(g.nodes[1].inputs[1]), [0, 1, 0, 1])
    ort = pytest.importorskip("onnxruntime")
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(Session(g).run({"x": x})["y"], want)


def test_more_com_microsoft_qoperator_ops():
    c = lambda n, v, dt: numpy_helper.from_array(np.array(v, dt), n)  # noqa: E731
    init = [c("s1", 0.05, np.float32), c("z1", 128, np.uint8), c("s2", 0.1, np.float32), c("z2", 100, np.uint8),
            c("B", np.arange(24).reshape(4, 6) % 7, np.uint8), c("bs", 0.02, np.float32), c("bz", 3, np.uint8),
            c("C", np.arange(6) - 3, np.int32), c("cond", [[True, False, True, False]], np.bool_)]
    ms = "com.microsoft"
    nodes = [
        helper.make_node("QLinearConcat", ["s2", "z2", "x", "s1", "z1", "x", "s1", "z1"], ["cat"], axis=1, domain=ms),
        helper.make_node("QLinearLeakyRelu", ["x", "s1", "z1", "s2", "z2"], ["lr"], alpha=0.1, domain=ms),
        helper.make_node("QGemm", ["lr", "s2", "z2", "B", "bs", "bz", "C", "s1", "z1"], ["gemm"], alpha=2.0,
                         domain=ms),
        helper.make_node("QGemm", ["lr", "s2", "z2", "B", "bs", "bz"], ["gemmf"], domain=ms),
        helper.make_node("QLinearSoftmax", ["gemm", "s1", "z1", "s2", "z2"], ["sm"], axis=-1, opset=13, domain=ms),
        helper.make_node("QLinearReduceMean", ["cat", "s2", "z2", "s1", "z1"], ["rm"], axes=[1], keepdims=0,
                         domain=ms),
        helper.make_node("QLinearWhere", ["cond", "x", "s1", "z1", "lr", "s2", "z2", "s2", "z2"], ["wh"], domain=ms),
    ]
    outs = [_vi(n, None, TensorProto.UINT8) for n in ("cat", "sm", "rm", "wh")] + [_vi("gemmf", None)]
    g = load_onnx_model(_model(nodes, [_vi("x", [2, 4], TensorProto.UINT8)], outs, init, opset=13, domains=[ms]))
    assert [(n.op, n.inputs) for n in g.nodes][:4] == [
        ("Concat", ["x", "x"]), ("LeakyRelu", ["x"]), ("Gemm", ["lr", "B", "C"]), ("Gemm", ["lr", "B"])]
    assert g.nodes[2].attrs["alpha"] == 2.0 and g.nodes[2].attrs["beta"] == 1.0
    np.testing.assert_allclose(g.tensors["C"].quant.scale, [np.float32(0.1) * np.float32(0.02) * 2])
    assert g.tensors["gemmf"].dtype == "float32" and g.tensors["gemmf"].quant is None
    assert g.tensors["cat"].quant.zero_point.tolist() == [100] and g.tensors["cat"].dtype == "uint8"
    rm = g.nodes[5]
    assert rm.op == "ReduceMean" and g.const(rm.inputs[1]).tolist() == [1] and rm.attrs["keepdims"] == 0
    assert (g.nodes[6].op, g.nodes[6].inputs) == ("Where", ["cond", "x", "lr"])
    assert g.tensors["wh"].quant.scale.tolist() == [np.float32(0.1)]
    shapes = {k: g.tensors[k].shape for k in ("cat", "lr", "gemm", "gemmf", "sm", "rm", "wh")}
    assert shapes == {"cat": (2, 8), "lr": (2, 4), "gemm": (2, 6), "gemmf": (2, 6), "sm": (2, 6), "rm": (2,),
                      "wh": (2, 4)}


def test_inconsistent_quant_params_refused():
    c = lambda n, v, dt: numpy_helper.from_array(np.array(v, dt), n)  # noqa: E731
    init = [c("s1", 0.05, np.float32), c("z1", 128, np.uint8), c("s2", 0.1, np.float32), c("z2", 100, np.uint8)]
    ms = "com.microsoft"
    nodes = [helper.make_node("QLinearSigmoid", ["x", "s1", "z1", "s2", "z2"], ["a"], domain=ms),
             helper.make_node("QLinearSigmoid", ["a", "s1", "z1", "s2", "z2"], ["y"], domain=ms)]
    m = _model(nodes, [_vi("x", [4], TensorProto.UINT8)], [_vi("y", [4], TensorProto.UINT8)], init, domains=[ms])
    with pytest.raises(ModelError, match="'a' already has different quantization"):
        load_onnx_model(m)


def test_backend_entry_point():
    from refinterp.onnx_backend import Backend

    assert Backend.supports_device("CPU") and not Backend.supports_device("CUDA")
    m = _model([helper.make_node("Sub", ["a", "b"], ["d"]), helper.make_node("Relu", ["d"], ["y"])],
               [_vi("a", [3]), _vi("b", [3])], [_vi("y", [3]), _vi("d", [3])])
    a, b = np.array([1, 2, 3], np.float32), np.array([3, 2, 1], np.float32)
    y, d = Backend.prepare(m).run([a, b])
    np.testing.assert_array_equal(d, a - b)
    np.testing.assert_array_equal(y, np.maximum(a - b, 0))
    (n,) = Backend.run_node(helper.make_node("Neg", ["x"], ["z"]), [a])
    np.testing.assert_array_equal(n, -a)


@pytest.mark.parametrize("opset, node, inits", [
    (7, helper.make_node("Upsample", ["x"], ["y"], mode="linear", scales=[1.0, 1.0, 2.0, 2.0]), []),
    (7, helper.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 3.0, 2.0]), []),
    (10, helper.make_node("Resize", ["x", "sc"], ["y"], mode="nearest"), [("sc", [1.0, 1.0, 2.0, 3.0])]),
    (10, helper.make_node("Resize", ["x", "sc"], ["y"], mode="linear"), [("sc", [1.0, 1.0, 2.0, 2.0])]),
    (12, helper.make_node("ReduceMax", ["x"], ["y"], axes=[1, 3], keepdims=1), []),
    (12, helper.make_node("Softmax", ["x"], ["y"], axis=-1), []),
    (12, helper.make_node("LogSoftmax", ["x"], ["y"], axis=2), []),
    (6, helper.make_node("Clip", ["x"], ["y"], min=-0.25), []),
])
def test_legacy_single_op_matches_onnxruntime(opset, node, inits):
    ort = pytest.importorskip("onnxruntime")
    init = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in inits]
    m = _model([node], [_vi("x", [1, 2, 3, 4])], [_vi("y", None)], init, opset=opset)
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    g = load_onnx_model(m)
    assert all(k not in n.attrs for n in g.nodes for k in ("axes", "scales", "min"))
    got = Session(g).run({"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_malformed_initializer_is_a_model_error():
    bad = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], raw_data=b"\0" * 5)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], [bad])
    with pytest.raises(ModelError, match="malformed ONNX model") as e:
        load_onnx_model(m)
    assert "\n" not in str(e.value)


def test_minus_one_dims_in_value_info_are_unknown(tmp_path):
    """PaddlePaddle's exporter and hand-built graphs write -1 for an unknown dimension in inputs,
    outputs and value_info; ONNX Runtime treats it as unknown, and so does refinterp (an initializer
    with a negative dim stays an error)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    import refinterp

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3])
    vi = helper.make_tensor_value_info("h", TensorProto.FLOAT, [-1, -1])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])], "g",
                          [x], [y], value_info=[vi])
    p = tmp_path / "neg.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
    m = refinterp.load(str(p))
    assert m.tensors["x"].shape == (None, 3) and m.tensors["h"].shape == (None, None)
    out = refinterp.Session(m).run({"x": np.array([[1, -2, 3], [4, 5, -6]], np.float32)})["y"]
    assert np.array_equal(out, -np.maximum(np.array([[1, -2, 3], [4, 5, -6]], np.float32), 0))


def test_a_depthwise_conv_reading_dequantized_weights_is_told_apart_without_shape_inference(tmp_path):
    """DequantizeLinear of a constant passes the constant's shape on when shape inference does not (it does
    not type com.microsoft's Q / DQ, nor every opset-21 16-bit QDQ model): a grouped Conv with one input
    channel per group reading DQ(weights) is a DepthwiseConv, as when the shape is known."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import refinterp

    w = numpy_helper.from_array(np.arange(36, dtype=np.uint8).reshape(4, 1, 3, 3), "w")
    inits = [w, numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
             numpy_helper.from_array(np.array(7, np.uint8), "wz")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], domain="com.microsoft"),
             helper.make_node("Conv", ["x", "wd"], ["y"], group=4, pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(m, tmp_path / "m.onnx")
    graph = refinterp.load(str(tmp_path / "m.onnx"))
    assert graph.tensors["wd"].shape == (4, 1, 3, 3)
    assert [n.op for n in graph.nodes if n.name.startswith("Conv") or n.op.endswith("Conv")] == ["DepthwiseConv"]
