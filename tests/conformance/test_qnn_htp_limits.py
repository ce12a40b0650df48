"""Forms refused because a published architecture found them off the rules (torchvision models exported by torch.onnx,
quantized by quantize_static / get_qnn_qdq_config, against Qualcomm's HTP emulation): each refusal names the node,
and the measured neighbour of the form still builds.  No emulator run: the measurements are in the kernels' notes."""
from __future__ import annotations

import numpy as np
import pytest

import refinterp
from tests.conformance.test_qnn_htp_ops import _conv_model, _refused
from tests.conformance.test_qnn_htp_resize import _resize_model

F = np.float32


def _builds(tmp_path, m, scheme: str) -> None:
    p = tmp_path / "ok.onnx"
    p.write_bytes(m.SerializeToString())
    refinterp.Session(refinterp.load(str(p)), scheme)


@pytest.mark.parametrize("arch", ["68", "73"])
def test_16bit_stride2_depthwise_biases_beyond_2_22(tmp_path, arch):
    """EfficientNet-B0 / LR-ASPP at uint16: the stride-2 depthwise kernel missed 1-8 codes per layer, all on channels
    whose bias passes 2^22 (measured within 2^22: test_qnn_htp_ops.py test_a16_depthwise_stride_2)."""
    w = np.ones((4, 1, 3, 3), np.int8)
    for top, refused in ((2 ** 22 + 1, True), (2 ** 22, False)):
        bias = np.array([top, -5, 7, 0], np.int32)
        m = _conv_model((1, 4, 9, 9), w, F(0.01), bias, 1e-5, 32768, 1e-5, 30000, "uint16", group=4,
                        pads=[1, 1, 1, 1], strides=[2, 2])
        if refused:
            assert "biases up to" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
        else:
            _builds(tmp_path, m, f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch", ["68", "73"])
def test_bilinear_upscaling_beyond_3(tmp_path, arch):
    """LR-ASPP's head upsamples by 8 on unchanged parameters: 8 codes of 86,016 off the code-domain rule."""
    for f, refused in ((8, True), (4, True), (3, False), (2, False)):
        for same in (True, False):
            m = _resize_model((1, 2, 4, 4), (f, f), 0.05, 128, 0.05 if same else 0.07, 128 if same else 120, "uint8")
            if refused:
                assert "up to 3x upscaling" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
            else:
                _builds(tmp_path, m, f"qnn-htp-v{arch}")
