"""A YOLO-style detection head (tests/onnx_models.py ``detection_head``) quantized four ways -- as ONNX Runtime
recommends for the QNN EP at uint8 and uint16, and by ``quantize_static`` at uint8 per channel and int8 -- on
Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0), v68 and v73: ``capture`` -> ``diff`` under the matching
scheme.  The nodes the scheme does not model (a Mul by a constant after a Split; at 16 bits also the requantizing
Concat after the scores' Sigmoid, modelled at 8 bits since -- the Sigmoid's codes copied there, refused before) are
anchored on the device's values; every other quantized tensor must equal the emulator's code for code."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.conformance.test_qnn_htp_transformer import capture_and_diff
from tests.onnx_models import detection_head

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

FORMS = ("qnn_uint8", "qnn_uint16", "static_uint8_pc", "static_int8")


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize, quantize_static
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    d = tmp_path_factory.mktemp("htp_detection")
    src = d / "f32.onnx"
    onnx.save(detection_head(), str(src))

    def reader():
        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{"input": np.random.default_rng(i).standard_normal((1, 3, 32, 32)).astype(np.float32)}
                                for i in range(6)])

            def get_next(self):
                return next(self.it, None)
        return Reader()

    made = {f: d / f"{f}.onnx" for f in FORMS}
    quantize(str(src), str(made["qnn_uint8"]), get_qnn_qdq_config(str(src), reader()))
    quantize(str(src), str(made["qnn_uint16"]),
             get_qnn_qdq_config(str(src), reader(), activation_type=QuantType.QUInt16))
    quantize_static(str(src), str(made["static_uint8_pc"]), reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    quantize_static(str(src), str(made["static_int8"]), reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    feeds = d / "in.npz"
    np.savez(feeds, input=(np.random.default_rng(100).standard_normal((1, 3, 32, 32)) * 1.5).astype(np.float32))
    return made, feeds


@pytest.mark.parametrize("arch", ["68", "73"])
@pytest.mark.parametrize("form", FORMS)
def test_every_modelled_tensor_equals_the_emulator(tmp_path, quantized, arch, form):
    made, feeds = quantized
    by, q_outputs = capture_and_diff(tmp_path, made[form], feeds, arch)
    status = [by[n]["status"] for n in q_outputs]
    assert set(status) <= {"exact", "unmodelled"}, {n: s for n, s in zip(q_outputs, status)}
    assert status.count("unmodelled") == (2 if form == "qnn_uint16" else 1) and status.count("exact") >= 14, status
