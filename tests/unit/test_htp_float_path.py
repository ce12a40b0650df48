"""The HTP's float32-path units (kernels/qnn_htp/activation.py): what is fused, what is refused.  Their
codes are checked against the emulator in tests/conformance/test_qnn_htp_elementwise.py."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.errors import UnsupportedOpError  # noqa: E402
from refinterp.passes import fuse_qdq_htp  # noqa: E402
from tests.unit.test_htp_ops import load_graph  # noqa: E402

F = np.float32


def _load(tmp_path, op, extra_inits=(), extra_inputs=(), xs=0.05, ys=0.02, yz=100, act=np.uint8, graph_inputs=()):
    """x -> Q -> DQ -> op(x_d, *extra_inputs) -> Q -> DQ; ``extra_inits``: (value, name) float32 constants."""
    inits = [numpy_helper.from_array(np.asarray(v, dt), n) for v, n, dt in
             [(xs, "s", F), (128 if act == np.uint8 else 0, "z", act), (ys, "s2", F), (yz, "z2", act)]]
    inits += [numpy_helper.from_array(np.asarray(v, F), n) for v, n in extra_inits]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node(op, ["d", *extra_inputs], ["f"]),
             helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["fq"]),
             helper.make_node("DequantizeLinear", ["fq", "s2", "z2"], ["y"])]
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in [("x", [1, 256]), *graph_inputs]]
    return load_graph(tmp_path, nodes, ins, inits)


def test_a_clip_after_a_dequantize_is_an_op_of_its_own(tmp_path):
    """A Clip whose bounds cover the output's range would fold into the QuantizeLinear (fuse_qdq); between
    DequantizeLinear and QuantizeLinear the HTP runs it (measured: the fold differs on 3-8 of 256 codes)."""
    g = fuse_qdq_htp(_load(tmp_path, "Clip", [(0.0, "lo"), (6.0, "hi")], ["lo", "hi"], ys=0.0235, yz=0))
    assert [(n.op, n.source_op) for n in g.nodes if n.op not in ("QuantizeLinear", "DequantizeLinear")] == \
        [("Clip", "QDQ:Clip")]


@pytest.mark.parametrize("scheme", ["qnn-htp-v68", "qnn-htp-v73"])
def test_float_path_refusals(tmp_path, scheme):
    # a Sin entry within a few float32 ulps of a code boundary: the HTP's sin is not correctly rounded
    v = float(F(np.sin(np.float64(F((150 - 128) * F(0.05))))))
    with pytest.raises(UnsupportedOpError, match="Sin.*within 4 float32 ulps"):
        refinterp.Session(_load(tmp_path, "Sin", ys=v / 40.5, yz=100), scheme)
    with pytest.raises(UnsupportedOpError, match="Clip min that is not a one-element constant"):
        refinterp.Session(_load(tmp_path, "Clip", extra_inputs=["m"], graph_inputs=[("m", [])]), scheme)
    with pytest.raises(UnsupportedOpError, match="uint16.*8-bit activations only"):
        refinterp.Session(_load(tmp_path, "Clip", [(0.0, "lo")], ["lo"], ys=1e-4, yz=0, act=np.uint16), scheme)
    with pytest.raises(UnsupportedOpError, match="Reciprocal"):  # measured off (an approximate reciprocal)
        refinterp.Session(_load(tmp_path, "Reciprocal"), scheme)


def test_table_entry_on_a_float32_tie_is_refused(tmp_path):
    """HardSwish at x = f32(-50 * f32(0.03)) = -1.5 with s_y = 0.05: -0.375 * f32(1 / 0.05) = -7.5 exactly in
    float32 steps (1.1e-7 from the tie in float64): the HTP rounded it down where the float64 table rounds
    up (measured), so such a table is refused."""
    with pytest.raises(UnsupportedOpError, match="rounding tie"):
        refinterp.Session(_load(tmp_path, "HardSwish", xs=0.03, ys=0.05, yz=100), "qnn-htp-v73")
