"""Ops that select codes (kernels/qnn_htp/select.py: Where, Max / Min, GlobalMaxPool, ReduceMax / ReduceMin,
TopK; and Split, kernels/qnn_htp/shape.py) against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0, the
oracle subprocess of test_qnn_htp_ops.py): every QuantizeLinear output and TopK's indices, as ONNX
Runtime's QDQ quantizer writes them (one set of parameters through each)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
SHAPE = (1, 4, 8, 16)
OPS = ("Split", "Where", "TopK", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Max", "Min")
INT16 = tuple(op for op in OPS if op not in ("ReduceMin", "Min"))  # the QNN EP leaves int16 ReduceMin / Min to the CPU


def _select_model(act: str, s: float, z: int, out_s: float | None = None, only: tuple | None = None):
    """x, b (SHAPE) and b2 (broadcast over H) on (s, z) through every selecting op (``only``: through
    those); outputs on (s, z) too unless ``out_s`` (then the zero point moves by 3 as well)."""
    os_, oz = (s, z) if out_s is None else (out_s, z + 3)
    inits, nodes = [_init(np.array([1, 3], np.int64), "split", np.int64), _init(np.array([5], np.int64), "k5", np.int64),
                    _init(np.array([3], np.int64), "k3", np.int64), _init(np.array([3], np.int64), "ax3", np.int64),
                    _init(np.array([1, 2], np.int64), "ax12", np.int64)], []
    for name in ("x", "b", "b2"):
        i, n = _qdq_in(name, s, z, act)
        inits, nodes = inits + i, nodes + n
    # TopK reads an Add's codes (on a graph input's codes the HTP folds TopK into the QuantizeLinear)
    i, n = _qdq_out("xb", "xb_q", 2 * s, z, act)
    inits, nodes = inits + i, nodes + [helper.make_node("Add", ["x_d", "b_d"], ["xb"])] + n
    ops = [("Split", ["x_d", "split"], 2, {"axis": 1}), ("Where", ["c", "x_d", "b_d"], 1, {}),
           ("TopK", ["xb_q_dq", "k5"], 2, {"axis": -1}), ("TopK", ["xb_q_dq", "k3"], 2, {"axis": 2, "largest": 0}),
           ("GlobalMaxPool", ["x_d"], 1, {}), ("ReduceMax", ["x_d", "ax3"], 1, {}),
           ("ReduceMin", ["x_d", "ax12"], 1, {"keepdims": 0}), ("Max", ["x_d", "b_d"], 1, {}),
           ("Min", ["x_d", "b2_d"], 1, {})]
    outputs = []
    ops = [(j, o) for j, o in enumerate(ops) if only is None or o[0] in only]
    for j, (op, ins, n_out, attrs) in ops:
        outs = [f"p{j}_{o}" for o in range(n_out)]
        nodes.append(helper.make_node(op, ins, outs, **attrs))
        for o, name in enumerate(outs):
            if op == "TopK" and o == 1:  # the indices: an int64 graph output
                outputs.append(helper.make_tensor_value_info(name, TensorProto.INT64, None))
                continue
            i, n = _qdq_out(name, f"y{j}_{o}", os_ * (2 if op == "TopK" else 1), oz, act)
            inits, nodes = inits + i, nodes + n
    outputs.insert(0, helper.make_tensor_value_info(f"y{ops[0][0]}_0_dq", TensorProto.FLOAT, None))
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(sh)) for n, sh in
              (("x", SHAPE), ("b", SHAPE), ("b2", SHAPE[:2] + (1,) + SHAPE[3:]))]
    inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, list(SHAPE)))
    return _model(nodes, inits, inputs, outputs)


@pytest.mark.parametrize("arch", ["68", "73"])
@pytest.mark.parametrize("act", ["uint8", "int8", "uint16", "int16"])
def test_selecting_ops(tmp_path, arch, act):
    """Codes drawn from 12 neighbouring values (ties in nearly every TopK row: the HTP puts the higher
    index first) and from the whole range, two parameter sets; int16 ReduceMin / Min refused, as the QNN
    EP does not take them."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(5 + int(arch) + lo % 7)
    jobs = []
    for narrow in (True, False):
        s = float(F(10 ** rng.uniform(-2.5, -1))) * (1 if hi < 256 else 2 ** -8)
        z = int(rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4))
        m = _select_model(act, s, z, only=None if act != "int16" else INT16)
        feeds = {}
        for name in ("x", "b", "b2"):
            shape = SHAPE[:2] + (1,) + SHAPE[3:] if name == "b2" else SHAPE
            base = int(rng.integers(lo, hi - 12))
            q = rng.integers(base, base + 12, shape) if narrow else rng.integers(lo, hi + 1, shape)
            feeds[name] = ((q - z) * F(s)).astype(F)
        feeds["c"] = rng.integers(0, 2, SHAPE).astype(bool)
        jobs.append((m, feeds))
    _check_many(tmp_path, jobs, arch)
    if act == "int16":
        for op in ("ReduceMin", "Min"):
            assert "does not run" in _refused(tmp_path, _select_model(act, s, z, only=(op,)), f"qnn-htp-v{arch}")


def test_selecting_ops_refused_off_their_parameters(tmp_path):
    """A requantizing selection (the HTP's requantization there depends on the producer), TopK with
    sorted=0 and TopK of a graph input's codes are not characterised."""
    msg = _refused(tmp_path, _select_model("uint8", 0.02, 128, 0.03, ("Split",)), "qnn-htp-v73")
    assert "different quantization" in msg and "requantizing Split" in msg, msg
    i, n = _qdq_in("x", 0.02, 128, "uint8")
    o, no = _qdq_out("p", "y", 0.02, 128, "uint8")
    m = _model(n + [helper.make_node("TopK", ["x_d", "k"], ["p", "idx"], sorted=0)] + no,
               i + o + [_init(np.array([2], np.int64), "k", np.int64)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("idx", TensorProto.INT64, None)])
    assert "sorted=0" in _refused(tmp_path, m, "qnn-htp-v68")
    del m.graph.node[2:]  # TopK on a graph input's codes (measured: the HTP sorts the float inputs)
    m.graph.node.extend([helper.make_node("TopK", ["x_d", "k"], ["p", "idx"])] + no)
    assert "TopK of codes made by a graph input" in _refused(tmp_path, m, "qnn-htp-v68")
    for op in OPS[1:]:
        assert f"requantizing {op}" in _refused(tmp_path, _select_model("uint8", 0.02, 128, 0.03, (op,)), "qnn-htp-v73")
