"""QDQ node units (Q -> DQ -> op -> Q) vs onnxruntime at ORT_ENABLE_ALL, int8 and uint8 activations.

The float inputs are exact dequantized codes, so the input Q reproduces every (a, b) code pair;
on x86 ORT re-encodes int8 Q/DQ pairs as uint8 (QDQS8ToU8Transformer) before fusing, which the
``onnxruntime-cpu`` scheme models with the ``qdq_s8_to_u8`` pass.  Compared: the final Q output.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402

_T = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}


def _unit(tmp_path, op, dtype, params, shape, n_in=2, **attrs):
    inits, nodes = [], []
    ins = []
    for i in range(n_in):
        s, z = params[i]
        inits += [numpy_helper.from_array(np.float32(s), f"s{i}"), numpy_helper.from_array(dtype(z), f"z{i}")]
        nodes += [helper.make_node("QuantizeLinear", [f"x{i}", f"s{i}", f"z{i}"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"d{i}"])]
        ins.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, list(shape)))
    so, zo = params[-1]
    inits += [numpy_helper.from_array(np.float32(so), "so"), numpy_helper.from_array(dtype(zo), "zo")]
    nodes += [helper.make_node(op, [f"d{i}" for i in range(n_in)], ["y"], **attrs),
              helper.make_node("QuantizeLinear", ["y", "so", "zo"], ["yq"])]
    g = helper.make_graph(nodes, "unit", ins, [helper.make_tensor_value_info("yq", _T[np.dtype(dtype)], None)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / f"{op}.onnx"
    onnx.save(m, str(path))
    return m, str(path)


def _run_both(m, path, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = s.run(None, feeds)[0]
    got = refinterp.Session(refinterp.load(path), "onnxruntime-cpu").run(feeds)["yq"]
    return int(np.sum(want.astype(np.int64) != got.astype(np.int64)))


def _codes_as_float(codes, s, z):
    return (np.float32(s) * (codes.astype(np.int64) - z).astype(np.float32)).astype(np.float32)


@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qdq_binary_all_code_pairs(tmp_path, op, dtype):
    info = np.iinfo(dtype)
    v = np.arange(int(info.min), int(info.max) + 1)
    a, b = (t.reshape(256, 256) for t in np.meshgrid(v, v))
    rng = np.random.default_rng(5)
    total = 0
    for trial in range(12):
        sa, sb = (rng.random(2) * 0.1 + 0.002).astype(np.float32)
        za, zb, zo = (int(z) for z in rng.integers(int(info.min), int(info.max) + 1, 3))
        if op == "Add":
            so = np.float32((sa + sb) * (0.6 + rng.random()))
        else:
            so = np.float32(sa * sb * 60 * (0.5 + rng.random()))
        m, path = _unit(tmp_path, op, dtype, [(sa, za), (sb, zb), (so, zo)], (256, 256))
        total += _run_both(m, path, {"x0": _codes_as_float(a, sa, za), "x1": _codes_as_float(b, sb, zb)})
    assert total == 0, f"{total} of {12 * 65536} differ"


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qdq_average_pool(tmp_path, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(6)
    total = 0
    for trial in range(8):
        s, so = (rng.random(2) * 0.05 + 0.002).astype(np.float32)
        z, zo = (int(t) for t in rng.integers(int(info.min), int(info.max) + 1, 2))
        m, path = _unit(tmp_path, "AveragePool", dtype, [(s, z), (so, zo)], (2, 4, 9, 9), n_in=1,
                        kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=trial % 2)
        x = _codes_as_float(rng.integers(int(info.min), int(info.max) + 1, (2, 4, 9, 9)), s, z)
        total += _run_both(m, path, {"x0": x})
    assert total == 0


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qdq_where(tmp_path, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    m, path = _unit(tmp_path, "Where", dtype, [(0.05, 3), (0.11, int(info.max) - 9), (0.08, 11)], (16, 16))
    # prepend a bool condition input: Where(cond, d0, d1)
    g = m.graph
    g.input.insert(0, helper.make_tensor_value_info("c", TensorProto.BOOL, [16, 16]))
    where = next(n for n in g.node if n.op_type == "Where")
    where.input.insert(0, "c")
    onnx.save(m, path)
    x0 = _codes_as_float(np.arange(256).reshape(16, 16) + int(info.min), 0.05, 3)
    x1 = _codes_as_float(rng.integers(int(info.min), int(info.max) + 1, (16, 16)), 0.11, int(info.max) - 9)
    feeds = {"c": rng.random((16, 16)) < 0.5, "x0": x0, "x1": x1}
    assert _run_both(m, path, feeds) == 0
    kinds = {st.node.source_op for st in refinterp.Session(refinterp.load(path), "onnxruntime-cpu").steps}
    assert "QDQ:Where" in kinds or dtype == np.int8  # int8 output Q without DQ stays unfused on x86
