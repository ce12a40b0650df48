"""TVM Relay QNN requantize (documented, not verified against a runtime).

Sources read for understanding (map in docs/arithmetic/README.md): apache/tvm
src/relay/qnn/utils.cc (GetFixedPointMultiplierShift, FixedPointMultiply), src/relay/qnn/op/
requantize.cc, requantize_config.h, python/tvm/relay/qnn/op/qnn.py.
"""
from __future__ import annotations

import math

import numpy as np

from .fixedpoint import rdbp, srdhm

ROUNDINGS = ("UPWARD", "TONEAREST", "TFLITE")


def multiplier_shift(m: float) -> tuple[int, int]:
    """GetFixedPointMultiplierShift: frexp(m) = sig * 2^exp, M = std::round(sig * 2^31) (half away;
    2^31 -> 2^30 with exp + 1).  m = double(in_scale) / double(out_scale) of float32 scales."""
    if m == 0.0:
        return 0, 0
    sig, exp = math.frexp(m)
    mi = int(math.floor(sig * 2 ** 31 + 0.5))
    if mi == 2 ** 31:
        mi, exp = mi // 2, exp + 1
    return mi, exp


def requantize(x, m, rounding: str = "UPWARD") -> np.ndarray:
    """int64 requantize of x (= q_in - zp_in, |x| < 2^31): left shift max(exp, 0), multiply by M,
    right shift 31 + max(-exp, 0) with UPWARD (ties toward +inf, the default), TONEAREST (ties away
    from zero) or TFLITE (gemmlowp SRDHM + rounding divide by 2^r: double rounding).  ``m`` is a
    float or a per-channel sequence broadcasting against x.  Output zero point not added."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"TVM rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    pairs = [multiplier_shift(float(v)) for v in np.ravel(m)]
    shape = np.shape(m)
    mi = np.array([p[0] for p in pairs], np.int64).reshape(shape)
    exp = np.array([p[1] for p in pairs], np.int64).reshape(shape)
    x = np.asarray(x, np.int64) << np.maximum(exp, 0)
    right = np.maximum(-exp, 0)
    if rounding == "TFLITE":
        return rdbp(srdhm(x, mi), right)
    p = x * mi
    s = 31 + right
    half = np.int64(1) << (s - 1)
    if rounding == "UPWARD":
        return (p + half) >> s
    return (p + np.where(p >= 0, half, half - 1)) >> s
