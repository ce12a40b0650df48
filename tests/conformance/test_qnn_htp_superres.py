"""An ESPCN-style super-resolution model (tests/onnx_models.py ``super_resolution``: Convs with Tanh, then the pixel
shuffle -- a DepthToSpace onto its own parameters, which the HTP folds into the Conv before it) quantized the way
ONNX Runtime recommends for the QNN EP, on Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0) as deployed:
``capture`` (checked against the model run without taps) -> ``diff``: every quantized tensor exact, none
unmodelled (the DepthToSpace was refused before)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.conformance.test_qnn_htp_transformer import capture_and_diff
from tests.onnx_models import super_resolution

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "uint16"), ("73", "uint16")])
def test_super_resolution_model(tmp_path, arch, act):
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    src, model = tmp_path / "f32.onnx", tmp_path / "qdq.onnx"
    onnx.save(super_resolution(), str(src))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": np.random.default_rng(i).uniform(0, 1, (1, 1, 12, 12)).astype(np.float32)}
                            for i in range(4)])

        def get_next(self):
            return next(self.it, None)

    qt = {"uint8": QuantType.QUInt8, "uint16": QuantType.QUInt16}[act]
    quantize(str(src), str(model), get_qnn_qdq_config(str(src), Reader(), activation_type=qt))
    assert "DepthToSpace" in {n.op_type for n in onnx.load(str(model)).graph.node}
    feeds = tmp_path / "in.npz"
    np.savez(feeds, input=np.random.default_rng(7).uniform(0, 1, (2, 1, 1, 12, 12)).astype(np.float32))  # 2 samples
    by, q_outputs = capture_and_diff(tmp_path, model, feeds, arch)
    assert all(by[n]["status"] == "exact" for n in q_outputs), {n: by[n]["status"] for n in q_outputs}
    g = onnx.load(str(model)).graph
    moved = {n.output[0] for n in g.node if n.op_type == "DepthToSpace"}
    d2s = [n.output[0] for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] in moved]
    assert d2s and by[d2s[0]]["status"] == "exact" and len(q_outputs) >= 6, (d2s, q_outputs)
