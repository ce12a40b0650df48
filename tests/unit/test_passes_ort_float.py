"""Which nodes the ONNX Runtime float passes rewrite (refinterp/passes/ort_fold.py, ort_nchwc.py): the
rules' conditions, each checked on a small graph.  The numerics of the rewritten nodes are checked
against onnxruntime in tests/conformance/test_ort_float_nchwc.py."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.passes import ort_conv_fold, ort_nchwc16  # noqa: E402
from refinterp.passes.ort_nchwc import MARK  # noqa: E402

F = TensorProto.FLOAT


def _graph(tmp_path, nodes, inits, x_shape=(1, 16, 6, 6), outputs=("y",)):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, list(x_shape))],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return refinterp.load(str(path))


def _w(name, *shape, seed=0):
    return numpy_helper.from_array(np.random.default_rng(seed).normal(0, 1, shape).astype(np.float32), name)


def _ops(g):
    return [n.op for n in g.nodes]


def test_bn_mul_add_chain_folds_into_the_conv(tmp_path):
    bn = [_w("s", 32), _w("b", 32), _w("m", 32), numpy_helper.from_array(np.full(32, 0.5, np.float32), "v")]
    g = _graph(tmp_path, [helper.make_node("Conv", ["x", "w"], ["c"]),
                          helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["d"], epsilon=1e-3),
                          helper.make_node("Mul", ["d", "k"], ["e"]), helper.make_node("Add", ["e", "a"], ["y"])],
               [_w("w", 32, 16, 1, 1), _w("k", 32, 1, 1), _w("a", 1, 32, 1, 1)] + bn)
    out = ort_conv_fold(g)
    assert _ops(out) == ["Conv"] and out.nodes[0].outputs == ["y"] and len(out.nodes[0].inputs) == 3
    w = np.asarray(out.tensors[out.nodes[0].inputs[1]].const)
    s = (np.float32(1) * bn_scale(g) / np.sqrt(np.float32(0.5) + np.float32(1e-3))).astype(np.float32)
    assert w.dtype == np.float32 and np.array_equal(
        w, ((np.asarray(g.tensors["w"].const) * s.reshape(-1, 1, 1, 1)).astype(np.float32)
            * np.asarray(g.tensors["k"].const).reshape(-1, 1, 1, 1)).astype(np.float32))


def bn_scale(g):
    return np.asarray(g.tensors["s"].const, np.float32)


@pytest.mark.parametrize("why", ["used-twice", "graph-output", "conv-output-second", "runtime-operand", "bad-shape"])
def test_fold_conditions(tmp_path, why):
    inits = [_w("w", 16, 16, 1, 1), _w("a", 16, 2, 1) if why == "bad-shape" else _w("a", 16, 1, 1)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Add", ["a", "c"] if why == "conv-output-second" else ["c", "a"], ["y"])]
    outputs = ["y"]
    if why == "used-twice":
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outputs.append("r")
    elif why == "graph-output":
        outputs.append("c")
    elif why == "runtime-operand":  # the Add's other input is computed, not a constant
        nodes.insert(0, helper.make_node("ReduceMean", ["x"], ["a"], axes=[0, 2, 3], keepdims=1))
        inits = inits[:1]
    g = _graph(tmp_path, nodes, inits, outputs=tuple(outputs))
    assert ort_conv_fold(g) is g  # nothing folds


def test_sum_fusion_takes_the_first_eligible_conv_and_moves_it(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["c"]),
             helper.make_node("Add", ["a", "c"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    g = _graph(tmp_path, nodes, [_w("w1", 16, 16, 3, 3), _w("b1", 16), _w("w2", 16, 16, 1, 1)])
    out = ort_nchwc16(g)
    assert _ops(out) == ["Conv", "Conv", "Relu"]
    fused = out.nodes[1]
    assert fused.inputs == ["x", "w1", "b1", "c"] and fused.outputs == ["s"] and fused.attr(MARK) == 16
    assert out.nodes[0].outputs == ["c"] and out.nodes[0].attr(MARK) == 16


@pytest.mark.parametrize("why", ["conv-used-twice", "nchw-input-convs", "shapes-differ"])
def test_sum_fusion_conditions(tmp_path, why):
    c_in = 12 if why == "nchw-input-convs" else 16  # 12 input channels: MLAS's NCHW-input algorithm
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Conv", ["x", "w2"], ["c"]),
             helper.make_node("Add", ["a", "c"], ["y"])]
    outputs = ["y"]
    inits = [_w("w1", 16, c_in, 1, 1), _w("w2", 16, c_in, 1, 1)]
    if why == "conv-used-twice":
        outputs.append("a")
        nodes[1] = helper.make_node("Conv", ["x", "w2"], ["c"])
    if why == "shapes-differ":  # (1, 16, 6, 6) + (1, 16, 1, 1): a broadcasting Add is not fused
        nodes[1:2] = [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("Conv", ["g", "w2"], ["c"])]
    g = _graph(tmp_path, nodes, inits, x_shape=(1, c_in, 6, 6), outputs=tuple(outputs))
    out = ort_nchwc16(g)
    if why == "nchw-input-convs":  # still NCHWc Convs for ORT, so the Add fuses
        assert _ops(out) == ["Conv", "Conv"]
        return
    if why == "conv-used-twice":  # the second input's Conv is still single-use: it takes the Sum
        assert _ops(out) == ["Conv", "Conv"] and out.nodes[1].inputs[3] == "a"
        return
    assert _ops(out)[-1] == "Add"


def test_batchnorm_on_nchwc_input_becomes_a_depthwise_conv(tmp_path):
    bn = [_w("s", 16), _w("b", 16), _w("m", 16), numpy_helper.from_array(np.full(16, 2.0, np.float32), "v")]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("BatchNormalization", ["p", "s", "b", "m", "v"], ["y"], epsilon=1e-3)]
    out = ort_nchwc16(_graph(tmp_path, nodes, bn))
    conv = out.nodes[1]
    assert conv.op == "Conv" and conv.attr("group") == 16 and conv.attr(MARK) == 16 and conv.outputs == ["y"]
    w = np.asarray(out.tensors[conv.inputs[1]].const)
    want = (np.asarray(out.tensors["s"].const) / np.sqrt(np.float32(2.0) + np.float32(1e-3))).astype(np.float32)
    assert w.shape == (16, 1, 1, 1) and np.array_equal(w.ravel(), want)
    # 12 channels are not NCHWc after a pool: the BatchNormalization stays
    out12 = ort_nchwc16(_graph(tmp_path, nodes, [_w("s", 12), _w("b", 12), _w("m", 12), _w("v", 12)],
                               x_shape=(1, 12, 6, 6)))
    assert _ops(out12) == ["MaxPool", "BatchNormalization"]


def test_global_average_pool_marked_only_on_block_aligned_nchwc_input(tmp_path):
    def run(c_out):
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("GlobalAveragePool", ["c"], ["y"])]
        return ort_nchwc16(_graph(tmp_path, nodes, [_w("w", c_out, 16, 1, 1)])).nodes[1]
    assert run(32).attr(MARK) == 16
    assert run(24).attr(MARK) is None


@pytest.mark.parametrize("why", ["runtime-b", "runtime-b-unknown-size", "used-twice", "bias-shape", "fused"])
def test_matmul_add_fusion_conditions(tmp_path, why):
    from refinterp.passes import ort_matmul_add
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "b" if why.startswith("runtime-b") else "B"], ["m"]),
         helper.make_node("Add", ["m", "C2" if why == "bias-shape" else "C"], ["y"])]
        + ([helper.make_node("Relu", ["m"], ["r"])] if why == "used-twice" else []), "g",
        [helper.make_tensor_value_info("x", F, [4, 8])] +
        ([helper.make_tensor_value_info("b", F, [8, 6] if why == "runtime-b" else [8, "n"])]
         if why.startswith("runtime-b") else []),
        [helper.make_tensor_value_info("y", F, None)] + ([helper.make_tensor_value_info("r", F, None)]
                                                        if why == "used-twice" else []),
        [_w("B", 8, 6), _w("C", 6), _w("C2", 4, 6, 1)])
    path = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    graph = refinterp.load(str(path))
    out = ort_matmul_add(graph)
    if why in ("fused", "runtime-b"):  # ORT fuses a run-time 2-D B too (its dimensions known)
        b = "B" if why == "fused" else "b"
        assert _ops(out) == ["Gemm"] and out.nodes[0].inputs == ["x", b, "C"] and out.nodes[0].outputs == ["y"]
    else:
        assert out is graph


@pytest.mark.parametrize("why", ["fused", "erf-used-twice", "not-sqrt2", "x-from-a-mul"])
def test_gelu_fusion_conditions(tmp_path, why):
    """pattern 2 of ORT's GeluFusion; ORT also skips it when x itself comes from a Mul (its pattern-1
    probe takes that Mul and fails)."""
    from refinterp.passes import ort_gelu_fusion
    s2 = 1.3 if why == "not-sqrt2" else 1.4142135
    consts = [numpy_helper.from_array(np.array(np.float32(v)), k) for k, v in
              {"s2": s2, "one": 1.0, "half": 0.5, "k": 2.0}.items()]
    src = "x"
    nodes = []
    if why == "x-from-a-mul":
        nodes.append(helper.make_node("Mul", ["x", "k"], ["x2"]))
        src = "x2"
    nodes += [helper.make_node("Div", [src, "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
              helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", [src, "a"], ["m"]),
              helper.make_node("Mul", ["m", "half"], ["y"])]
    outputs = ("y", "e") if why == "erf-used-twice" else ("y",)
    g = _graph(tmp_path, nodes, consts, x_shape=(4, 8), outputs=outputs)
    out = ort_gelu_fusion(g)
    if why == "fused":
        assert _ops(out) == ["Gelu"] and out.nodes[0].inputs == ["x"] and out.nodes[0].outputs == ["y"]
    else:
        assert out is g


def test_identity_elimination_rewires_readers_and_renames_into_graph_outputs(tmp_path):
    from refinterp.passes import ort_identity_elim

    g = _graph(tmp_path, [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"]),
                          helper.make_node("Dropout", ["b"], ["c"]), helper.make_node("Sigmoid", ["c"], ["d"]),
                          helper.make_node("Identity", ["d"], ["y"]), helper.make_node("Identity", ["x"], ["z"])],
               [], outputs=("y", "z"))
    out = ort_identity_elim(g)
    # the Relu's readers read it directly; the Sigmoid now writes the graph output y; an Identity of a
    # graph input that is itself a graph output stays (its source has no producer to rename)
    assert [(n.op, n.inputs, n.outputs) for n in out.nodes] == [
        ("Relu", ["x"], ["a"]), ("Sigmoid", ["a"], ["y"]), ("Identity", ["x"], ["z"])]
    x = np.random.default_rng(0).normal(0, 1, (1, 16, 6, 6)).astype(np.float32)
    from refinterp.kernels.onnxruntime.float_activation import mlas_sigmoid
    got = refinterp.Session(g, "onnxruntime-cpu").run({"x": x})
    assert np.array_equal(got["y"], mlas_sigmoid(np.maximum(x, np.float32(0)))) and np.array_equal(got["z"], x)


def test_identity_whose_source_has_other_readers_stays_as_graph_output(tmp_path):
    from refinterp.passes import ort_identity_elim

    g = _graph(tmp_path, [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"]),
                          helper.make_node("Sigmoid", ["a"], ["s"])], [], outputs=("y", "s"))
    assert _ops(ort_identity_elim(g)) == ["Relu", "Identity", "Sigmoid"]
