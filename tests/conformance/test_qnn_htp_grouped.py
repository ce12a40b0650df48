"""Grouped convolutions (1 < group < channels: RegNet, ResNeXt) under the qnn-htp schemes against Qualcomm's HTP
emulation (onnxruntime-qnn 2.7.0): 3x3 layers of 4 .. 8 groups with random biases, uint8 activations.  v73 with
per-channel weights and a bias is refused (kernels/qnn_htp/gemm.py: found on a RegNet-X by quantize_static, one
output of 1,600 off); the other forms run, every code compared."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.conformance.test_qnn_htp_ops import _check_many, _conv_model, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _layer(rng, groups: int, pc: bool, with_bias: bool):
    cg, og, H = 4, 4, 7
    C, O = cg * groups, og * groups
    xs, ws0 = F(10 ** rng.uniform(-2, -1)), F(10 ** rng.uniform(-2.5, -1.5))
    ws = (ws0 * rng.uniform(0.3, 3.0, O)).astype(F) if pc else ws0
    ys = float(F(xs * float(np.max(ws)) * 10 ** rng.uniform(1, 2)))
    w = rng.integers(-127, 128, (O, cg, 3, 3)).astype(np.int8)
    bias = rng.integers(-3000, 3000, O).astype(np.int32) if with_bias else None
    m = _conv_model((1, C, H, H), w, ws, bias, float(xs), 128, ys, int(rng.integers(0, 256)), "uint8", group=groups,
                    pads=[1, 1, 1, 1])
    q = rng.integers(0, 256, (1, C, H, H))
    return m, {"x": ((q - 128) * xs).astype(F)}


@pytest.mark.parametrize("arch", ["68", "73"])
def test_grouped_conv(tmp_path, arch):
    rng = np.random.default_rng(zlib.crc32(repr(("grouped", arch)).encode()))
    jobs = []
    for groups in (4, 8):
        for pc in (False, True):
            for with_bias in (False, True):
                for _ in range(2):
                    m, feeds = _layer(rng, groups, pc, with_bias)
                    if arch == "73" and pc and with_bias:
                        assert "grouped Conv" in _refused(tmp_path, m, "qnn-htp-v73")
                    else:
                        jobs.append((m, feeds))
    assert _check_many(tmp_path, jobs, arch) > 0
