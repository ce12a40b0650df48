"""The HTP's Mul (and Div) by a one-element constant, 8-bit (v68 and v73 identical; int8 as uint8 moved by 128),
measured against Qualcomm's host emulation (onnxruntime-qnn 2.7.0, QNN 2.51).

Mul by a constant with one element (a scalar or [1, 1, 1, 1] initializer) takes another kernel: a single
15-bit multiplier on the zero-point-subtracted codes, A = f32(f32(s_1 b) / s_y) with b =
f32((q_b - z_b) s_b) the constant's value::

    p = 15 - e   (e: the binary exponent of A);  i = round(A 2^p);  f = 0 if e <= -8 else min(6, 7 - e)
    v = ((q - z_1) i + 2^(p-f-1)) >> (p - f)       an intermediate on a 2^-f grid of the output
    y = clamp(((v + 2^(f-1)) >> f) + z_y)          (f = 0: y = clamp(v + z_y))

    Div by a positive one-element constant runs the same kernel with A = f32(f32(s_1 / b) / s_y)
    (0 of 22,784 codes over 88 constants, v68 / v73, uint8 / int8).
    Evidence: every code at 480 positive constants (A 1.8e-4 .. 16, v68 and v73): 0 of 122,880 differ;
    one rounding at 2^-p (f = 0) differs on 0.35% of them, near ties, for e > -8.  A >= 16 (e >= 5)
    and negative constants (and Div by a negative one) do not use this kernel but the HTP's float32
    path of kernels/qnn_htp/elementwise.py (f32(x * c) or f32(x / c), times f32(1 / s_y), plus the
    zero point, ties to even): 0 of 6,144 codes per arch and type differ; no 15 .. 31-bit form of this
    kernel had fitted them (4 codes off at best).
"""
from __future__ import annotations

import math

import numpy as np


def scale_params(A: float) -> tuple[int, int, int]:
    """(p, i, f) of the HTP's Mul by a one-element constant for A > 0 (module docstring)."""
    if not (A > 0 and math.isfinite(A)):
        raise ValueError(f"multiplier {A!r} is not positive: a Mul by a negative or zero constant is not "
                         f"characterised")
    e = math.frexp(A)[1]
    if e >= 5:
        raise ValueError(f"multiplier {A!r} >= 16 is outside the measured range")
    p = 15 - e
    return p, math.floor(A * 2.0 ** p + 0.5), 0 if e <= -8 else min(6, 7 - e)


def scale(acc: np.ndarray, params: tuple[int, int, int], zy: int, lo: int, hi: int) -> np.ndarray:
    """Zero-point-subtracted codes (|acc| <= 255) -> output codes (int64); acc * i < 2^24."""
    p, i, f = params
    s = p - f
    v = (np.asarray(acc, np.int64) * i + (1 << (s - 1))) >> s
    if f:
        v = (v + (1 << (f - 1))) >> f
    return np.clip(v + zy, lo, hi)


def scale_single(acc: np.ndarray, params: tuple[int, int, int], zy: int, lo: int, hi: int) -> np.ndarray:
    """The one-multiplier kernel with one rounding (the HTP's Mul / Div by a constant after a Conv-like
    producer, kernels/qnn_htp/elementwise.py): floor(acc * i / 2^p + 1/2) + zy, ``scale_params``' p and i,
    no second stage; |acc| <= 255 so acc * i < 2^24."""
    p, i, _ = params
    return np.clip(((np.asarray(acc, np.int64) * i + (1 << (p - 1))) >> p) + zy, lo, hi)
