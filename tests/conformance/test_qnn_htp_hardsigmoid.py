"""HardSigmoid on the HTP (``qnn-htp-v68`` / ``qnn-htp-v73``, uint8) against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0): the float32 path of kernels/qnn_htp/activation.py, checked where it differs from
the float64 table -- parameter sets built to put one entry within 3e-8 .. 3e-5 of a rounding tie (a
MobileNetV3 squeeze-excitation gate, alpha 1/6, was 2 codes of 120 off under the table)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from refinterp.quant import htp
from tests.conformance.test_qnn_htp_numerics import _model
from tests.conformance.test_qnn_htp_ops import _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _near_tie_set(rng):
    """(s_x, z_x, alpha, beta, s_y, z_y) with one code's exact output within 3e-8 .. 3e-5 of n + 1/2."""
    sx, zx = float(F(rng.uniform(0.001, 0.03))), int(rng.integers(60, 200))
    alpha = float(F(rng.choice([1 / 6, 0.2, 1 / 3, 0.15])))
    beta = float(F(rng.choice([0.5, 0.4, 0.6])))
    zy = int(rng.integers(0, 100))
    v = np.clip(alpha * (np.arange(256) - zx) * sx + beta, 0, 1)
    q = int(rng.choice(np.flatnonzero((v > 0.05) & (v < 0.95))))
    n = int(rng.integers(60, 250 - zy))
    sy = float(F(v[q] / (n + 0.5 + rng.choice([-1, 1]) * 10 ** rng.uniform(-7.5, -4.5))))
    return sx, zx, alpha, beta, sy, zy


def _float64_table_misses(sx, zx, alpha, beta, sy, zy) -> int:
    """Codes where the float64 table (the rule before) and the float32 path differ."""
    q = np.arange(256)
    x32 = ((q - zx) * F(sx)).astype(F)
    v32 = np.clip(((F(alpha) * x32).astype(F) + F(beta)).astype(F), F(0), F(1))
    path = htp.float_path_codes(v32, sy, zy, 0, 0, 255)
    table = np.clip(np.floor(np.clip(alpha * (q - zx) * sx + beta, 0, 1) / sy + 0.5) + zy, 0, 255)
    return int(np.sum(path != table))


@pytest.mark.parametrize("arch", ["68", "73"])
def test_hardsigmoid_near_ties_every_code(tmp_path, arch):
    """24 near-tie sets per arch, every uint8 code, plus the MobileNetV3 gate's own parameters: every
    output code equal (the float64 table misses codes on about a third of these sets)."""
    rng = np.random.default_rng(90 + int(arch))
    sets = [_near_tie_set(rng) for _ in range(24)]
    sets.append((0.002049894, 147, float(F(1 / 6)), 0.5, 0.002105787, 0))
    assert sum(_float64_table_misses(*s) > 0 for s in sets) >= 4  # the test tells the two rules apart
    q = np.arange(256)
    jobs = []
    for sx, zx, alpha, beta, sy, zy in sets:
        i1, n1 = _qdq_in("x", sx, zx, "uint8")
        io, no = _qdq_out("h", "y", sy, zy, "uint8")
        m = _model(n1 + [helper.make_node("HardSigmoid", ["x_d"], ["h"], alpha=alpha, beta=beta)] + no, i1 + io,
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        jobs.append((m, {"x": ((q - zx) * F(sx)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)


def test_int8_hardsigmoid_is_refused(tmp_path):
    """The QNN EP does not run HardSigmoid on int8 tensors on the HTP (measured): refused, not guessed."""
    i1, n1 = _qdq_in("x", 0.02, 0, "int8")
    io, no = _qdq_out("h", "y", 1 / 256, -128, "int8")
    m = _model(n1 + [helper.make_node("HardSigmoid", ["x_d"], ["h"], alpha=0.2, beta=0.5)] + no, i1 + io,
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "does not run HardSigmoid on int8" in _refused(tmp_path, m, "qnn-htp-v73")
