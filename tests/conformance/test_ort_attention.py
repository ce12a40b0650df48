"""com.microsoft Attention and QAttention (kernels/onnxruntime/attention.py) against ONNX Runtime's CPU
kernels: no mask, a raw 0/1 key mask, key lengths, a 3-D mask, causal (unidirectional); QAttention
fed by DynamicQuantizeLinear as ORT's quantizer writes it.  Float outputs within 1e-5 relative /
1e-6 absolute."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

import refinterp  # noqa: E402

B, S, D, N = 2, 5, 8, 2


def _model(quantized: bool, mask: np.ndarray | None, uni: int, seed: int):
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 0.3, (D, 3 * D)).astype(np.float32)
    bias = rng.normal(0, 0.1, 3 * D).astype(np.float32)
    inits = [numpy_helper.from_array(bias, "bias")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, D])]
    if mask is not None:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, list(mask.shape)))
    m_in = "mask" if mask is not None else ""
    if not quantized:
        inits.append(numpy_helper.from_array(W, "W"))
        nodes = [helper.make_node("Attention", ["x", "W", "bias", m_in], ["y"], domain="com.microsoft",
                                  num_heads=N, unidirectional=uni)]
    else:
        ws = np.float32(np.abs(W).max() / 127)
        inits += [numpy_helper.from_array(np.clip(np.rint(W / ws), -127, 127).astype(np.int8), "Wq"),
                  numpy_helper.from_array(np.array(ws, np.float32), "ws"),
                  numpy_helper.from_array(np.array(0, np.int8), "wz")]
        nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
                 helper.make_node("QAttention", ["xq", "Wq", "bias", "xs", "ws", m_in, "xz", "wz"], ["y"],
                                  domain="com.microsoft", num_heads=N, unidirectional=uni)]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def _masks():
    rng = np.random.default_rng(9)
    return {"none": (None, 0), "raw-2d": ((rng.random((B, S)) > 0.3).astype(np.int32), 0),
            "key-lengths": (np.array([3, 5], np.int32), 0), "3d": ((rng.random((B, S, S)) > 0.3).astype(np.int32), 0),
            "causal": (None, 1), "causal-raw-2d": ((rng.random((B, S)) > 0.2).astype(np.int32), 1)}


@pytest.mark.parametrize("quantized", [False, True], ids=["Attention", "QAttention"])
@pytest.mark.parametrize("case", sorted(_masks()))
def test_attention_matches_onnxruntime(tmp_path, quantized, case):
    import onnx

    mask, uni = _masks()[case]
    m = _model(quantized, mask, uni, seed=len(case))
    x = np.random.default_rng(3).normal(0, 1, (B, S, D)).astype(np.float32)
    feeds = {"x": x} | ({"mask": mask} if mask is not None else {})
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    got = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_past_state_is_refused_by_name(tmp_path):
    import onnx

    from refinterp.errors import UnsupportedOpError

    m = _model(False, None, 0, 0)
    m.graph.input.append(helper.make_tensor_value_info("past", TensorProto.FLOAT, [2, B, N, 0, D // N]))
    node = m.graph.node[0]
    node.input.extend(["past"])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    with pytest.raises(UnsupportedOpError, match="past"):
        refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu")
