"""Qualcomm HTP (Hexagon Tensor Processor) integer arithmetic, as measured against Qualcomm's own
host emulation of the HTP (``libQnnHtp.so`` of QNN 2.51, shipped in ``onnxruntime-qnn==2.7.0``,
``htp_arch`` 73; tests/conformance/test_qnn_htp_numerics.py re-measures every rule here).

Qualcomm does not publish the HTP kernels; every rule below was found by single-op sweeps against the
emulator (over scales, zero points, ties and saturation) and is stated with the evidence.  Only
what is stated here is characterised; the bias of a v73 convolution with per-channel weights is the
one piece found to differ from the rule below and not characterised yet.  The v68 convolution,
stride-2 depthwise, Add and GlobalAveragePool are in ``htp_ops.py``.

QuantizeLinear from float32 (a graph input quantized on the HTP)::

    r   = float32(1 / float32(scale))
    t   = x * r                                 the exact product of two float32 values
    8-bit outputs:  t16 = RNE(t to float16)     one rounding of the exact product to half precision
                    q   = clamp(round_half_away(t16) + zp)
    16-bit outputs: q   = clamp(round_half_away(t) + zp)

    NaN gives qmax, +-inf and out-of-range values saturate.
    Evidence: values within one float32 ulp of a float16 rounding boundary (48,000 per sweep, eight
    random scales) separate these from RNE(x / s), x * r rounded to float32 first, and a division
    instead of the reciprocal; the 8-bit rule gives 0 differences on all of them, uint8 and int8.

Convolution requantization, 8-bit output, real multiplier M = f32(f32(s_x * s_w) / s_y)::

    k   = ceil(log2(1 / M)) - 4                 so that M * 2^k lies in [1/16, 1/8]
    m   = M * 2^k rounded to 12 significant bits (round half up of the mantissa)
    a   = (acc + bias) >> k       (k >= 0)      arithmetic shift (floor) of the exact int32 sum
        = (acc + bias) << -k      (k < 0: M > 1/8)
    y   = clamp(floor((a + 1/2) * m + 1/2) + zp_y)

    The bias the HTP adds is not the model's int32 codes: it dequantizes them with the bias tensor's
    scale and requantizes with the accumulator scale, truncating (per-tensor weights)::

        bias_htp = trunc(f32(f32(bias) * f32(s_bias)) / f32(f32(s_x) * f32(s_w)))

    which is ``bias`` or one step toward zero (ties of the float32 division).  With per-channel
    weights the HTP's per-channel bias differs from this rule on about one channel in five (one step
    toward zero): not characterised yet.  Measured so far (M = 1, every channel with the same weight
    scale, bias codes -60..59, bias scale f32(s_x * s_w)): the bias comes out as ``b`` or one step
    toward zero, on a set of ``b`` that is symmetric in sign, not invariant under doubling (s_w = 0.001:
    |b| in {1, 7, 14, 28, 49, 56, 59}; s_w = 0.0031: 65 of 120 codes), and that no single float32
    denominator reproduces in trunc(f32(f32(b * s_b) / d)) (searched +-3000 ulps around s_b); with
    mixed per-channel scales a channel's bias can also move one step away from zero or by up to 3.
    The set of moved codes does not depend on the activation type or zero point (uint8 zx = 128, int8
    zx = 0) nor on the weights (sums 0, 4, 40): only on the bias codes and the scales.  It does depend
    on the other channels' weight scales, through their maximum S only, and through S's mantissa only:
    with 120 channels at s_w and 8 at t * s_w (x scale 0.02, s_w 0.0031, M = 1), every t <= 1 moves
    the same 65 of 120 codes, t = 1.1 / 1.25 / 1.5 / 1.75 / 1.9 move 33 / 12 / 8 / 46 / 87, and t = 3,
    5, 7 move exactly what 1.5, 1.25, 1.75 move.  Channels whose scales all equal S still move codes.
    The moved amount is a constant integer per channel: sweeping the accumulator over -60..60 (M = 1)
    shifts the output by the same b' for every accumulator value.  (v68 derives its per-channel
    multipliers through S too -- M[c] = f32(f32(f32(s_x * S) / s_y) * f32(s_w[c] / S)), htp_ops.py --
    but adds the bias codes unchanged; none of the M-through-S chains reproduces the v73 bias: 38,100
    codes at 300 scale sets, 6,829 moved, best chain 31,928 right.)  The v73 per-channel bias also
    depends on the *other channels' bias codes*: with 120 channels at biases -60..59 and 8 more at a
    bias B (all scales equal), the moved set changes with B -- B = 59 or 60 move {1}, B = 63 moves 20
    codes, B = 100 none; at B = 2^n the moved sets are nested (each doubling of B drops the smallest
    members: 64 -> 24 codes ... 1024 -> {44..52}, 2048 -> none) and depend on the scales too.  A
    re-quantization of the float bias vector to a common scale from max |b * s_b| (symmetric or
    asymmetric, 8 to 32 bits, three roundings) reproduces 15 of 72 such sets: not it either.  (x scale
    0.02, s_w 0.0031, M = 1, 120 channels at -60..59 and 8 at B: for B = 64 the moved codes are exactly
    those with |b| in [3 2^k, 3.5 2^k), i.e. a mantissa in [1.5, 1.75), and each doubling of B drops the
    smallest k (|b| >= 3 B / 64 moves); B = 100 moves {13, 26, 29, 52, 53, 58} and both signs always.
    A common int32 scale from max |b s_b| (2^8 .. 2^31 steps, three roundings) followed by float32
    conversions back to the accumulator scale predicts no move at all on that data.  By contrast the
    per-channel scales the HTP makes itself from uint8 weights, f32(s rh) with rh of 12 bits, take the
    per-tensor truncation rule exactly, with a bias (htp_weights.py).)  Tried and refuted on these sweeps
    (24 scale sets, 120 codes each): trunc of the float32 bias value divided in float64 by the exact
    s_x * s_w or s_x * S, with or without the float32 ratio s_w / S, and each with a float32 quotient.

    For k > 0 the low k bits of the accumulator are dropped and replaced by the middle of the dropped
    range (the ``+ 1/2``); for k <= 0 the same expression adds 2^(k-1) to the accumulator.  The
    final rounding is half up.  Evidence: the output switches level exactly at multiples of 2^k in
    the accumulator; the fitted multiplier and offset equal m and m/2 + 1/2 to 1e-6 over every
    level; dense sweeps of every accumulator value in [-512, 508] for M from 0.07 to 2.5 and random
    1x1 convolutions (2 to 256 input channels, int32 bias, M from 1e-5 to 4, output zero points
    0..255) give 0 differences; the bias rule held on 512 of 512
    per-tensor channels whose output pins the bias to one integer.

16-bit activations (a16w8 convolution): measured in part, *not used* (16-bit stays refused).  The same
on v73 for uint16 and int16, per-tensor and per-channel int8 weights; ``A`` is the accumulator on the
codes moved to int16 (uint16: q - 32768, padding with the moved zero point), ``Z`` the zero-point
term (zp_x - 32768) * sum(w), ``b`` the int32 bias codes::

    g = (A >> 8) - round_half_up(Z / 256) + trunc(b / 256)     (exact: y is a function of A >> 8)
    y ~ round_half_up(round_half_up(g * M * 2^16) / 2^8) + zp_y

That form is exact while |g| stays below about 150 (every accumulator of 2-channel 1x1 layers over
the whole int16 / uint16 range, 12 multipliers 4e-6 .. 3.5, 0 of 6.3 M codes differ; 1,584 codes of
random 3x3 / 1x1 layers without bias), but with |g| in the thousands about 1 code in 800 is one
LSB off, always within 1/256 LSB of a rounding tie (29,968 of 25 M codes, 192 multipliers): no single
multiplier per channel (any precision, fixed-point or float32 product, first-stage grid 2^-6 .. 2^-10,
float32 magic-number rounding) reproduces them, which points at the HTP's own floating-point
(qfloat) arithmetic; the scratch sweeps are not kept.  v68 differs from this form already on small
accumulators (not analysed).
"""
from __future__ import annotations

import math

import numpy as np

from .fixedpoint import round_half_away


def quantize_float(x: np.ndarray, scale: float, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """HTP QuantizeLinear of float32 ``x`` per tensor (module docstring); int64 codes."""
    r = float(np.float32(1) / np.float32(scale))
    t = np.asarray(x, np.float32).astype(np.float64) * r  # exact: a product of two float32 values
    if qmax - qmin <= 255:
        with np.errstate(over="ignore"):
            t = t.astype(np.float16).astype(np.float64)  # one RNE rounding; beyond 65504: inf, clamped
    with np.errstate(invalid="ignore"):
        v = round_half_away(t) + zero_point
    v = np.where(np.isnan(v), qmax, v)  # NaN: the largest code (measured, 8-bit and 16-bit)
    return np.clip(v, qmin, qmax).astype(np.int64)


def float_path_codes(v: np.ndarray, scale: float, zero_point: int, shift: int, qmin: int, qmax: int) -> np.ndarray:
    """The HTP's float32 path from float32 values ``v`` to codes (Add / Sub / Mul / Div with a constant,
    Sqrt / Abs / Log / Floor; kernels/qnn_htp/elementwise.py, activation.py): t = f32(f32(v * f32(1 /
    scale)) + f32(zero_point + shift)) rounded half to even, ``shift`` (int8: 128) taken off after; NaN
    gives qmax, infinities saturate.  int64 codes."""
    f32 = np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        t = ((np.asarray(v, f32) * f32(f32(1) / f32(scale))).astype(f32) + f32(zero_point + shift)).astype(f32)
        y = np.where(np.isnan(t), qmax + shift, np.round(t.astype(np.float64)))
    return np.clip(y - shift, qmin, qmax).astype(np.int64)


def mantissa12(v: float) -> float:
    """``v`` (> 0) rounded to 12 significant bits, half up."""
    m, e = math.frexp(v)  # v = m * 2^e, m in [0.5, 1)
    return math.floor(m * 4096 + 0.5) / 4096 * 2.0 ** e


def conv_requant_params(M: float) -> tuple[int, float]:
    """(k, m) of the convolution requantization for a real multiplier ``M`` > 0."""
    if not (M > 0 and math.isfinite(M)):
        raise ValueError(f"multiplier {M!r} is not a positive finite number")
    k = math.ceil(math.log2(1.0 / M)) - 4
    return k, mantissa12(M * 2.0 ** k)


def conv_bias(bias: np.ndarray, bias_scale: float, x_scale: float, w_scale: float) -> np.ndarray:
    """The int32 bias the HTP adds for per-tensor weights (module docstring)."""
    F = np.float32
    real = (np.asarray(bias).astype(F) * F(bias_scale)).astype(F)
    return np.trunc((real / F(F(x_scale) * F(w_scale))).astype(F).astype(np.float64)).astype(np.int64)


def conv_requant(acc: np.ndarray, M: float, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """The module docstring's rule on exact int32 accumulators (bias included); int64 codes.
    (a + 1/2) * m is exact in float64 while |a| < 2^40 (m has 12 significant bits)."""
    k, m = conv_requant_params(M)
    acc = np.asarray(acc, np.int64)
    a = acc >> k if k >= 0 else acc << -k
    y = np.floor((a.astype(np.float64) + 0.5) * m + 0.5).astype(np.int64) + zero_point
    return np.clip(y, qmin, qmax)
