"""Qualcomm HTP (Hexagon Tensor Processor) integer arithmetic, as measured against Qualcomm's own
host emulation of the HTP (``libQnnHtp.so`` of QNN 2.51, shipped in ``onnxruntime-qnn==2.7.0``,
``htp_arch`` 73; tests/conformance/test_qnn_htp_numerics.py re-measures every rule here).

Qualcomm does not publish the HTP kernels; every rule below was found by single-op sweeps against the
emulator (over scales, zero points, ties and saturation) and is stated with the evidence.  Only
what is stated here is characterised.  The v68 convolution, stride-2 depthwise, Add and
GlobalAveragePool are in ``htp_ops.py``.

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

    which is ``bias`` or one step toward zero (ties of the float32 division).

    With per-channel weights (convolutions, Gemm and MatMul alike) the whole bias vector is
    re-quantized to one scale first, on the common accumulator scale s = f32(s_x * S), S the largest
    weight scale, the codes read as accumulator units (the bias scale is s_x s_w[c])::

        r[c]     = f32(b[c] * s)                  top = max |r|,  u = top * 2^-28 (exact)
        q[c]     = round_half_even(f32(r[c] * f32(1 / u)))
        bias_htp = trunc(f32(f32(q[c] * u) / s))

    so a channel's bias depends on the largest bias of the layer and on S's mantissa, and comes out as
    ``b`` or one step toward zero.  Evidence (tests/conformance/test_qnn_htp_numerics.py
    ``test_per_channel_bias``, 1x1 layers whose multipliers are at least 1, so every bias step shows):
    one weight scale with largest biases 121 .. 4096 and 2^20 / 10^6 (biases up to 2^20 read through
    accumulator offsets), two weight scales (ratios 1.25, 1.5, 1.75: a code moves alike in both
    groups, wherever the largest bias is), random per-channel scales: 0 of 4,445 channels differ, where
    the per-tensor rule applied per channel is wrong on 1,021.  Sweeps of 7,230 more channels while
    finding it (largest biases 121..140 one by one: nothing moves at 124, 127, 130, 140; 2,400 biases
    up to 2^20 at two largest values): 0 differ.  Normalising the real biases f32(b s_x s_w[c]) instead
    of the codes on the common scale fits one weight scale but misses 37% of the channels with mixed
    scales; v68 adds the codes unchanged.  Which tie rule ``round_half_even`` is, and 2^28 against
    2^28 - 1, are not separated by the data.

    For k > 0 the low k bits of the accumulator are dropped and replaced by the middle of the dropped
    range (the ``+ 1/2``); for k <= 0 the same expression adds 2^(k-1) to the accumulator.  The
    final rounding is half up.  Evidence: the output switches level exactly at multiples of 2^k in
    the accumulator; the fitted multiplier and offset equal m and m/2 + 1/2 to 1e-6 over every
    level; dense sweeps of every accumulator value in [-512, 508] for M from 0.07 to 2.5 and random
    1x1 convolutions (2 to 256 input channels, int32 bias, M from 1e-5 to 4, output zero points
    0..255) give 0 differences; the bias rule held on 512 of 512
    per-tensor channels whose output pins the bias to one integer.

16-bit activations (a16w8: Conv, depthwise Conv, Gemm, MatMul; v73, uint16 and int16, per-tensor and
per-channel int8 weights).  ``A`` is the accumulator on the codes moved to int16 (uint16: q - 32768;
padding carries the moved zero point), ``Z`` the zero-point term (zp_x - 32768) * sum(w) (int16: zp_x *
sum(w)), ``b`` the bias the HTP re-derives (``conv_bias`` / ``conv_bias_per_channel``)::

    g  = (A >> 8) - round_half_up(Z / 256) + trunc(b / 256)     (y is a function of A >> 8)
    M2 = 256 M,  k = ceil(log2(1 / M2)) - 8                     (M2 2^k in [2^-8, 2^-7))
    m  = M2 2^k rounded to 22 significant bits (half up)
    a  = g << -k  (k <= 0),  g >> k  (k > 0: floor)
    y  = clamp(floor((a + 1/2) m + 1/2) + zp_y)

the 8-bit rule with eight more bits on both sides.  Evidence: 16 layers with every uint16 input code
(4 output channels each, M from 1e-3 to 2: 4,194,304 codes) and 12 random layers (random zero points,
biases to +-2^20, 36,307 unsaturated codes): 0 differ; 21 or 23 significant bits, the other
exponent offsets and a floor / ceiling of the mantissa miss 1,555 to hundreds of thousands of codes.
(The earlier two-rounding form round_half_up(round_half_up(g M 2^16) / 2^8) misses about 1 code in
640: the fitted offset of y = floor(g alpha + beta) is beta = 1/2 + m/2, not 1/2.)  v68 differs: its
own rule is in htp_ops.py ("v68 16-bit convolution").
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


def conv_bias(bias: np.ndarray, bias_scale: float, x_scale: float, w_scale: float,
              truncate: bool = True) -> np.ndarray:
    """The int32 bias the HTP adds for per-tensor weights (module docstring); ``truncate=False``: the
    float32 quotient before the truncation (float64 array of float32 values; v68's 16-bit convolution adds
    it so, htp_ops.py)."""
    F = np.float32
    real = (np.asarray(bias).astype(F) * F(bias_scale)).astype(F)
    q = (real / F(F(x_scale) * F(w_scale))).astype(F).astype(np.float64)
    return np.trunc(q).astype(np.int64) if truncate else q


def conv_bias_per_channel(bias: np.ndarray, x_scale: float, w_scales: np.ndarray,
                          truncate: bool = True) -> np.ndarray:
    """The int32 bias the v73 HTP adds for per-channel weights (module docstring): the bias codes (in
    each channel's accumulator units, the bias scale being s_x s_w[c]) as reals on the common scale
    s = f32(s_x max(s_w)), re-quantized together to the largest magnitude over 2^28, back on s,
    truncated (``truncate=False``: the float32 values before it, as ``conv_bias``)."""
    F = np.float32
    s = F(F(x_scale) * np.asarray(w_scales, F).max())
    real = (np.asarray(bias).astype(F) * s).astype(F)
    top = float(np.abs(real).max()) if real.size else 0.0
    if top == 0.0:
        return np.zeros(real.shape, np.int64 if truncate else np.float64)
    unit = F(top * 2.0 ** -28)  # exact: a power-of-two scaling of a float32 value
    q = np.round((real * (F(1) / unit)).astype(F).astype(np.float64))  # half to even; |q| <= 2^28
    back = (q * np.float64(unit)).astype(F)
    q = (back / s).astype(F).astype(np.float64)
    return np.trunc(q).astype(np.int64) if truncate else q


def conv_requant(acc: np.ndarray, M: float, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """The module docstring's rule on exact int32 accumulators (bias included); int64 codes.
    (a + 1/2) * m is exact in float64 while |a| < 2^40 (m has 12 significant bits)."""
    k, m = conv_requant_params(M)
    acc = np.asarray(acc, np.int64)
    a = acc >> k if k >= 0 else acc << -k
    y = np.floor((a.astype(np.float64) + 0.5) * m + 0.5).astype(np.int64) + zero_point
    return np.clip(y, qmin, qmax)


def conv16_requant_params(M: float) -> tuple[int, int]:
    """(k, mi) of the 16-bit requantization (module docstring): m = mi 2^-29, mi of 22 bits."""
    if not (M > 0 and math.isfinite(M)):
        raise ValueError(f"multiplier {M!r} is not a positive finite number")
    M2 = M * 256.0
    k = math.ceil(math.log2(1.0 / M2)) - 8
    v = M2 * 2.0 ** k  # in [2^-8, 2^-7)
    return k, math.floor(v * 2.0 ** 29 + 0.5)  # 22 significant bits, half up (2^22 on a carry)


def conv16_bound(M: float) -> int:
    """|g| beyond which every 16-bit output saturates (2^19 / M2 + 2); within it (2a + 1) mi < 2^52."""
    return int(2.0 ** 19 / (M * 256.0)) + 2


def conv16_apply(g: np.ndarray, k, mi, bound, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """The 16-bit rule on g with per-channel (k, mi, bound) broadcast against g; exact integer
    arithmetic, int64 codes."""
    k, mi, bound = (np.asarray(v, np.int64) for v in (k, mi, bound))
    g = np.clip(np.asarray(g, np.int64), -bound, bound)
    a = np.where(k <= 0, g << np.maximum(-k, 0), g >> np.maximum(k, 0))
    y = (((2 * a + 1) * mi + (1 << 29)) >> 30) + zero_point
    return np.clip(y, qmin, qmax)


def conv16_requant(g: np.ndarray, M: float, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """The 16-bit rule (module docstring) for one multiplier; int64 codes."""
    k, mi = conv16_requant_params(M)
    return conv16_apply(g, k, mi, conv16_bound(M), zero_point, qmin, qmax)
