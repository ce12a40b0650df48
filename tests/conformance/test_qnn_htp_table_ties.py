"""Table activations near a rounding tie on the HTP (``qnn-htp-v68`` / ``qnn-htp-v73``) against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0): an entry that rounds one way in float64 and the other from float32 inputs is refused
(kernels/qnn_htp/activation.py), the float64 table being one code off there."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _model
from tests.conformance.test_qnn_htp_ops import _htp_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
SX, ZX, SY = float(F(0.09856522)), 43, float(F(0.13604777))


@pytest.mark.parametrize("arch", ["68", "73"])
def test_elu_entry_the_two_evaluations_round_apart_is_refused(tmp_path, arch):
    """Elu's linear side at code 190: t = 106.5000031 in float64, 106.4999982 from the float32 input times
    f32(1 / s_y); the HTP gives 106, the float64 table 107 (found through an Elu feeding a requantizing Concat)."""
    i1, n1 = _qdq_in("x", SX, ZX, "uint8")
    io, no = _qdq_out("f", "y", SY, 0, "uint8")
    m = _model(n1 + [helper.make_node("Elu", ["x_d"], ["f"])] + no, i1 + io,
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "rounds one way in float64" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    q = np.arange(256)
    got = _htp_many(tmp_path, [(m, {"x": ((q - ZX) * F(SX)).astype(F)[None]})], arch)[0]["y"]
    t = (190 - ZX) * SX / SY
    assert 106.5 < t < 106.5 + 1e-5 and got[0, 190] == 106  # the float64 table: 107
