"""Bilinear Resize (mode linear, half_pixel) on Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0)
against the ``qnn-htp-v68`` / ``qnn-htp-v73`` schemes (refinterp/kernels/qnn_htp/resize.py): every
QuantizeLinear output code for code."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import MAIN, _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _resize_model(shape, scales, xs, xz, ys, yz, act, ctm="half_pixel", mode="linear"):
    i1, n1 = _qdq_in("x", xs, xz, act)
    i1 = i1 + [_init(np.array([1, 1, *scales], np.float32), "sc", np.float32)]
    n1.append(helper.make_node("Resize", ["x_d", "", "sc"], ["r"], mode=mode, coordinate_transformation_mode=ctm))
    io, no = _qdq_out("r", "y", ys, yz, act)
    return _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])


def _params(rng, info, same: bool):
    xs, xz = float(F(10 ** rng.uniform(-2, -1))), int(rng.integers(int(info.min), int(info.max) + 1))
    if same:
        return xs, xz, xs, xz
    return xs, xz, float(F(xs * 10 ** rng.uniform(-0.4, 0.4))), int(rng.integers(int(info.min), int(info.max) + 1))


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_every_pair_of_codes(tmp_path, arch, act):
    """W 2 -> 4: the outer cells copy, the inner ones weigh the pair 3/4 + 1/4 -- every pair of codes,
    on the input's parameters (ties at 1/2 every fourth pair: half up) and on four other ones."""
    info = np.iinfo(act)
    a, b = np.meshgrid(np.arange(int(info.min), int(info.max) + 1), np.arange(int(info.min), int(info.max) + 1),
                       indexing="ij")
    q = np.stack([a.ravel(), b.ravel()], -1).reshape(1, 1, 65536, 2)
    rng = np.random.default_rng(2 + (act == "int8"))
    jobs = []
    for trial in range(5):
        xs, xz, ys, yz = _params(rng, info, same=trial == 0)
        jobs.append((_resize_model(q.shape, (1, 2), xs, xz, ys, yz, act), {"x": ((q - xz) * F(xs)).astype(F)}))
    assert _check_many(tmp_path, jobs, arch) == 5 * (2 + 4) * 65536  # the quantized input and y


# (input shape, spatial scales, output parameters equal to the input's)
CASES = [((1, 1024, 2, 2), (2, 2), True), ((1, 1024, 2, 2), (2, 2), False), ((1, 64, 5, 7), (2, 2), True),
         ((1, 64, 5, 7), (2, 2), False), ((1, 64, 5, 7), (3, 3), True), ((1, 64, 5, 7), (3, 3), False),
         ((1, 64, 5, 7), (1.5, 1.5), False), ((1, 64, 5, 7), (0.5, 0.5), False), ((1, 16, 6, 8), (2, 1), False)]


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_images(tmp_path, arch, act):
    """Random images: factors 2 and 3 on the input's parameters and other ones; 1.5 and 0.5 (size
    ratios 7 / 5, 10 / 7, 2 / 5, 3 / 7: the HTP's coordinates use them, not the scales) and one axis
    only on other parameters."""
    info = np.iinfo(act)
    rng = np.random.default_rng(7 + (act == "int8"))
    jobs = []
    for shape, scales, same in CASES:
        xs, xz, ys, yz = _params(rng, info, same)
        q = rng.integers(int(info.min), int(info.max) + 1, shape)
        jobs.append((_resize_model(shape, scales, xs, xz, ys, yz, act), {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_forms_not_characterised_are_refused(tmp_path):
    rng = np.random.default_rng(0)
    xs, xz, ys, yz = _params(rng, np.iinfo("uint8"), same=True)
    # fractional size ratio on unchanged parameters: about 1 code in 20 differs from the code-domain rule
    m = _resize_model((1, 4, 5, 7), (1.5, 1.5), xs, xz, ys, yz, "uint8")
    assert "whole-number upscaling only" in _refused(tmp_path, m, "qnn-htp-v73")
    for ctm in ("align_corners", "asymmetric"):
        m = _resize_model((1, 4, 5, 7), (2, 2), xs, xz, ys, yz, "uint8", ctm=ctm)
        assert "half_pixel coordinates" in _refused(tmp_path, m, "qnn-htp-v68")
    m = _resize_model((1, 4, 5, 7), (2, 2), xs, xz, ys, yz, "uint8", mode="cubic")
    assert "characterised on the HTP for nearest" in _refused(tmp_path, m, "qnn-htp-v68")
