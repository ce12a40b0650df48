"""Glow (pytorch/glow) integer numerics (documented, not verified against a runtime).

Sources read for understanding (map in docs/arithmetic/README.md): lib/Quantization/Base/Base.cpp
(quantizeScaleOffset32To8), include/glow/Quantization/Base/Base.h (QuantizationTransform32To8::
transform), lib/LLVMIRCodeGen/libjit/libjit_defs.h (libjit_scale), lib/Backends/Interpreter/
InterpreterNodes.cpp (float conv / add / avg-pool arithmetic).
"""
from __future__ import annotations

import math

import numpy as np


def scale_transform(scale: float) -> tuple[int, int, int]:
    """quantizeScaleOffset32To8: (pre, post, M) with scale ~ M * 2^-(pre + post), M ~ 8-9 bits.
    Powers of two are exact (pre = 0; post = -exp, M = 1, or M = scale for exp > 0).  The doubling
    loops run on a float32 like the C++ (exact: doubling never rounds); M = std::round (half away)."""
    s = np.float32(scale)
    m, e = math.frexp(float(s))
    if m == 0.5:
        exp = e - 1
        return (0, 0, int(s)) if exp > 0 else (0, -exp, 1)
    pre = post = 0
    while s < 0.5 or (s < 256 and post < 15):
        s, post = np.float32(s * 2), post + 1
    while s < 255 and pre < post // 2:
        s, pre = np.float32(s * 2), pre + 1
    return pre, post, int(math.floor(float(s) + 0.5))


def transform(x, pre, post, mult, offset: int = 0) -> np.ndarray:
    """((x >> pre) * M + 2^(post-1)) >> post + offset: truncating pre-shift, half-up post-shift
    (the rounding term only when post > 0).  pre / post / M may be per-channel arrays broadcasting
    against x; int64 arithmetic (|x| < 2^31, M < 2^9: no overflow)."""
    pre, post, mult = (np.asarray(v, np.int64) for v in (pre, post, mult))
    v = (np.asarray(x, np.int64) >> pre) * mult
    half = np.where(post > 0, np.int64(1) << np.maximum(post - 1, 0), 0)
    return ((v + half) >> post) + offset


def round_half_away(v) -> np.ndarray:
    """std::round on a float32 value."""
    v = np.asarray(v, np.float32)
    return (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int64)


def interp_requant(acc, scale, offset: int, lo: int, hi: int) -> np.ndarray:
    """Interpreter: clip(std::round(f32(f32(acc) * scale + offset))) (zero point added in float)."""
    v = (np.asarray(acc).astype(np.float32) * np.asarray(scale, np.float32)).astype(np.float32) + np.float32(offset)
    return np.clip(round_half_away(v), lo, hi)
