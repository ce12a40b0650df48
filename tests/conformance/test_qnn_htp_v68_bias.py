"""The v68 8-bit convolution's bias (quant/htp_ops.py): folded with the output zero point in one float32 sum as v73's
untruncated bias quotient, against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0).  1x1 layers of 64 channels over
every input code with biases reaching 50 output codes, per-tensor and per-channel int8 weights, uint8 and int8
activations; only layers where the fold and the codes added to the accumulator (the rule before: one output of 7,680
off on an EfficientNet-B0) give another offset on some channel are kept, so the check can fail."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from refinterp.quant import htp, htp_ops
from tests.conformance.test_qnn_htp_ops import _check_many, _conv_model

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
O = 64


def _layers(pc: bool, act: str, count: int):
    rng = np.random.default_rng(zlib.crc32(repr(("v68bias", pc, act)).encode()))
    shift = 128 if act == "int8" else 0
    jobs = []
    while len(jobs) < count:
        xs, ws0 = F(10 ** rng.uniform(-2.5, -1.5)), F(10 ** rng.uniform(-2.5, -1.5))
        ws = (ws0 * rng.uniform(0.3, 3.0, O)).astype(F) if pc else np.full(O, ws0, F)
        M0 = 10 ** rng.uniform(-2.7, -2.0)
        ys = F(xs * ws.max() / F(M0))
        yz = int(rng.integers(64, 192)) - shift
        bias = rng.integers(-int(50 / M0), int(50 / M0), O).astype(np.int32)
        M = htp_ops.per_channel_multipliers(float(xs), ws, float(ys)) if pc \
            else np.full(O, float(F(F(xs * ws0) / ys)))
        b = htp.conv_bias_per_channel(bias, float(xs), ws, truncate=False) if pc \
            else htp.conv_bias(bias, float(F(xs * ws0)), float(xs), float(ws0), truncate=False)
        fold = htp_ops.folded_offset8(yz + shift, M, b)
        codes = htp_ops.folded_zero_point(yz + shift, M) + bias
        if np.all(fold == codes):
            continue
        xz = 128 if act == "uint8" else 0
        m = _conv_model((1, 1, 16, 16), np.ones((O, 1, 1, 1), np.int8), ws if pc else ws0, bias, float(xs), xz,
                        float(ys), yz, act)
        q = np.arange(256).reshape(1, 1, 16, 16) - (128 if act == "int8" else 0)  # every code
        jobs.append((m, {"x": ((q - xz) * xs).astype(F)}))
    return jobs


@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_v68_bias_folds_with_the_zero_point(tmp_path, act):
    jobs = _layers(False, act, 6) + _layers(True, act, 6)
    assert _check_many(tmp_path, jobs, "68") == len(jobs) * (1 + O) * 256
