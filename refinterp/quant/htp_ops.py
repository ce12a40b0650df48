"""Qualcomm HTP integer arithmetic beyond QuantizeLinear and the v73 convolution (``htp.py``): the v68 convolution
requantization, element-wise Add / Sub / Mul (window averages: ``htp_pool.py``), as measured against Qualcomm's host
emulation of the HTP (``libQnnHtp.so`` of QNN 2.51 in ``onnxruntime-qnn==2.7.0``); tests/conformance/test_qnn_htp_ops.py
and test_qnn_htp_elementwise.py re-measure every rule here against the emulator.

Qualcomm does not publish the HTP kernels; each rule was found by dense single-op sweeps (every pair
of 8-bit codes, every accumulator in [-16384, 16256]) and is stated with its evidence.

8-bit activations: int8 tensors are computed as uint8 with every code and zero point moved by +128
(the results below differ from the int8 forms where a zero point enters a rounding; measured: the
uint8 rule on shifted codes gives 0 differences on int8 sweeps, the rule on int8 codes 4,000 of 1.3M).

v68 convolution / Gemm / MatMul (per-tensor or per-channel 8-bit weights), real multiplier
M = f32(f32(s_x * s_w[c]) / s_y)::

    k  = ceil(log2(1 / M)) - 4                  (as v73: M * 2^k in [1/16, 1/8])
    m  = M * 2^k rounded to 11 significant bits (half up)           (v73: 12 bits)
    Z  = floor(f32(f32(f32(zp_y / M) + f32(b')) + 1/2))   the output zero point and the bias folded into the
                                                accumulator in one float32 sum and one rounding (without a
                                                bias: floor(f32(zp_y / M) + 1/2), ties of that float32
                                                value go up)
    a  = (acc + Z) >> k   (k >= 0; << -k otherwise)                 acc: the exact int32 sum of products
    y  = clamp(floor(a * m + 1/2), 0, 255)      uint8 domain; no zero point added after

    b' is the bias as v73 re-derives it, before v73's truncation (``htp.conv_bias`` / ``conv_bias_per_channel``
    with ``truncate=False``: the float32 quotient, per-channel ones re-quantized on the common scale first): the
    codes themselves but for a few thousandths.  Evidence: 1x1 layers (64 channels, every input code, biases
    reaching 50 output codes, 54 sets, per-tensor and per-channel weights): 0 of 2,351 channels off, 112 of them
    where the folds differ; adding the codes to the accumulator (the rule before) missed 14, the quotient folded in
    float64 98.  Found on an EfficientNet-B0 by quantize_static (one output of 7,680: f32(zp / M) = 54676.5 and
    b' = -22048.002, so the fold is 32628, the codes' 32629).
    Per-channel weights: M is derived through the largest weight scale S of the layer,
    M[c] = f32(f32(f32(s_x * S) / s_y) * f32(s_w[c] / S)) (``per_channel_multipliers``), one or two
    float32 ulps from f32(f32(s_x * s_w[c]) / s_y); it moves Z when f32(zp / M) is near n + 1/2.
    Evidence: the output's level boundaries fall on a grid of 2^k accumulators offset by Z mod 2^k;
    fitting (m, offset) to every boundary leaves exactly one 11-bit m (a dense sweep of M over
    [0.1500, 0.1503] steps m by 2 units of the 12-bit grid, switching at the 11-bit midpoints); 130
    dense sweeps (M 3e-4 .. 5, zero points 0 .. 255) give 0 differences in 4.2M outputs; random 1x1,
    3x3 padded, depthwise and Gemm layers with int32 biases, per-tensor and per-channel weights,
    uint8 and int8 activations: 0 of 600k.  The per-channel M was found on MobileNetV2 (one output of
    25,088 in a 1x1 projection moved with the largest channel scale only): over 2,560 channels (40
    dense sweeps, random scales and zero points) the folded Z equals round(f32(zp / M[c])) with this M
    on every channel, with f32(f32(s_x * s_w[c]) / s_y) on 2,548.  The float32 quotient in Z was found on per-channel Gemm
    / MatMul sweeps: 2 outputs of 65,536 where f32(zp / M) is exactly n + 1/2 while zp / M is below it.

v68 16-bit convolution (Conv, depthwise Conv stride 1, Gemm, MatMul; uint16, and int16 computed as uint16
with codes and zero points moved by 32768), M as above::

    g  = (A >> 8) - round_half_up(Z_x / 256)    A, Z_x as v73's 16-bit rule (htp.py); no bias there
    Z  = floor(f32(f32(f32(zp_y / M) + f32(bias)) + 1/2) / 256)   the output zero point in accumulator
                                                units plus the bias, summed in float32, then to g units
                                                with the half added first, in float32
    bias = v73's re-derived bias (htp.conv_bias / conv_bias_per_channel) *before* its truncation: the float32
           quotient f32(f32(b s_b) / f32(s_x s_w)) (per-channel weights: the vector re-quantized on the common
           scale first); uint8 weights (htp_weights.py): that quotient on the model's one weight scale, over rh
    m  = 256 M rounded to 11 significant bits (half up)    no pre-shift
    y  = clamp(floor((g + Z) m + 1/2), 0, 65535)

    Evidence: every uint16 / int16 input code through 1x1 layers (4-16 channels, multipliers 1e-3 .. 1.4,
    random zero points, biases to +-2^20: the offset of each channel read out exactly) and random 3x3 /
    strided / depthwise layers and Gemm / MatMul with biases to +-2^22, per-tensor and per-channel
    weights (tests/conformance/test_qnn_htp_ops.py): 0 differences.  Found by fitting
    y = floor(g alpha + beta): alpha is 256 M to 11 bits; the per-channel offset is
    floor(zp_y / 256 M + b / 256) - round(Z_x / 256) except where the float32 sum rounds across a
    multiple of 256 (3 channels in 124, at multipliers 2e-5 and 1.7e-4 where zp / M passes 10^8, and one
    whose exact sum was within 5e-4 of an integer); the integer sum of the rounded quotient and the bias
    misses those; v73's rule misses nearly every code; the 8-bit rule's pre-shift (k > 0 below
    M = 2^-12) misses codes, none without it.  The half: a MobileNet block by get_qnn_qdq_config at uint16
    (test_qnn_htp_models.py) has a channel whose float32 sum is 7,219,455.5 -- floor(x / 256) = 28200, the
    emulator 28201 (233 of 256 codes one or two below it before).  The half is added in float32: at M =
    f32(0.0025) and zero points 32768, 33520, 34000, 40000, f32(zp / M) is 256 n - 1 (float32 spacing 1 above
    2^23), f32(x + 1/2) rounds to even, 256 n, and the emulator's Z is n (with the half added in float64,
    n - 1: 299-326 of 512 codes one below; tests/conformance/test_qnn_htp_requant_moves.py found it).
    The bias: the codes as they are fit every bias below 2^22, where the float32 quotient is within 1/4 of the
    code; a ShuffleNetV2 by get_qnn_qdq_config at uint16 has a bias 7,654,911 = 256 * 29902 - 1 whose quotient is
    7,654,911.5, and the emulator's channel is one code up (4 of 384 outputs).  1x1 layers with output zero
    point 0 and biases 256 n + {-2 .. 2, +-128} in [2^22, 2^24) (80 layers of 64 channels: uint16 / int16,
    per-tensor / per-channel int8, uint8 weights): the codes as they are miss 10-50 channels per 16 layers, the
    quotient 0 (truncated, v73's bias, or the uint8 weights' quotient on the scale s rh: 15-16 channels).

Depthwise convolution with stride 2 (v68 and v73 identical: a kernel of its own)::

    p  = 15 - e                                 e: the binary exponent of M (M * 2^p in [2^14, 2^15))
    i  = floor(M * 2^p + 1/2)
    Z  = floor(f32(zp_y / M) + 1/2)             as the v68 convolution
    y  = clamp(((acc + bias + Z) * i + 2^(p-1)) >> p, 0, 255)       uint8 domain, no pre-shift

    Evidence: every accumulator in [-16384, 16256] through a 4-channel depthwise layer with stride 2:
    0 differences on 15 + 15 sweeps (v68, v73) with M from 4e-4 to 0.32; the v68 convolution rule
    differs on 10,611 of 652,820 (the output boundaries are not aligned to 2^k).  For M >= 1/2 the
    folded zero point is not an integer Z (Z - zp / M from -1.3 to 0 on 5 sweeps): not characterised.
    With per-channel weights *and* a bias, channels whose M is below about 7e-5 sometimes follow
    another rule (dense sweeps: 5 of 9 channels with M in [3.3e-5, 6.7e-5] differ on up to 2,948 of
    32,641 accumulators, none with M >= 8.1e-5 or without a bias): refused below
    DW_S2_PER_CHANNEL_BIAS_MIN_M.  Stride-1 depthwise layers follow the arch's convolution rule.

Add (v68 and v73 identical), M_i = f32(s_i / s_y)::

    p  = min(15, 14 - e)                        e: the binary exponent of M_1 + M_2 (frexp, so
                                                (M_1 + M_2) * 2^p lies in [2^13, 2^14) up to p = 15)
    i_j = M_j * 2^p rounded half to even        two multipliers on one common scale (``_mult``)
    K  = 256 * ceil((zp_y * 2^p + 2^(p-1) - zp_1 * i_1 - zp_2 * i_2) / 256 - 1/2)    ties down
    y  = clamp((q_1 * i_1 + q_2 * i_2 + K) >> p)        raw uint8 codes q_j; |sum| < 2^31

    Evidence: every pair of codes (65,536 per scale set) at 60 random scale / zero-point sets
    (M_j 0.005 .. 1.5): 0 differences; a common exponent, per-input exponents, 10..16-bit multipliers
    and an exact offset were each refuted on the same data; the offset K is always a multiple of 256.
    Its tie (k / 256 = n + 1/2, one set in 256) goes down whatever the sign and parity (4 constructed
    sets, every pair of codes: K 256 higher misses 556-1,660 codes, the lower one none).
    Below M_1 + M_2 = 1/4 p stays 15 (16 sets, M_1 + M_2 0.01 .. 0.23: 0 off; p up to 20 missed 33-178 codes
    in 32,768 on 7 of 8) -- which also settles the one code the uncapped rule had missed on an exact real-number
    tie (s 0.01 / 0.012 -> 0.14, zero points 3 / 5 -> 255, M_1 + M_2 = 0.157: the pair (2, 0) is 254.5 exactly;
    the HTP gives 255, as the capped rule does); multiplier ties go to even (test_qnn_htp_ops.py).

Add of 16-bit tensors (uint16 and int16 alike, raw codes; v68 and v73 identical), M_i = f32(s_i / s_y)::

    p  = 15 - e                                 e: the binary exponent of max(M_1, M_2)
    i_j = M_j * 2^p rounded half to even        (ties: test_qnn_htp_a16.py)
    K  = zp_y * 2^p + 2^(p-1) - 2 * floor((zp_1 * i_1 + zp_2 * i_2) / 2)    the zero-point term even
    y  = clamp((q_1 * i_1 + q_2 * i_2 + K) >> p)

    Evidence: 3,538,944 random uint16 code pairs at 18 scale / zero-point sets and 524,288 int16
    pairs at 8 (M_j 0.004 .. 2.5), v73, and the uint16 sets at v68: 0 differences.  Found by fitting
    y = floor(a alpha_1 + b alpha_2 + beta): alpha_j = i_j 2^-p exactly; the exact zero-point term missed
    17 codes, all at a sum one below a multiple of 2^p, all in the sets whose zp_1 i_1 + zp_2 i_2 is odd.

Sub (v68 and v73 identical), M_i = f32(s_i / s_y)::

    p  = min(15, 14 - e)                        e: the binary exponent of max(M_1, M_2)
    i_j = M_j * 2^p rounded half to even
    K  = 256 * ceil((zp_y * 2^p + 2^(p-1) - zp_1 * i_1 + zp_2 * i_2) / 256 - 1/2)   ties down
    y  = clamp((q_1 * i_1 - q_2 * i_2 + K) >> p)

    Evidence: every pair of codes at 64 scale / zero-point sets (M_j 0.008 .. 5.4, p 11..15), v68 and
    v73 alike: 0 differences where K < 2^23; the common exponent of Add (M_1 + M_2) fails on 3 sets,
    p = 16 on 2, an offset rounded half up on 2 (both ties).  Where K >= 2^23 (zp_y near 255 with
    p = 15) every output is 0 (the offset wraps, 2 of 2 sets): refused.

Sub of 16-bit tensors (uint16 and int16 alike; v68 and v73 identical), M_i = f32(s_i / s_y)::

    p  = min(16, 15 - e)                        e: the binary exponent of max(M_1, M_2)
    i_j = M_j * 2^p rounded half to even
    K  = zp_y * 2^p + 2^(p-1) - 2 * floor((zp_1 * i_1 - zp_2 * i_2) / 2)    as Add's, i_2 negated
    y  = clamp((q_1 * i_1 - q_2 * i_2 + K) >> p)

    Evidence: 16-bit Add's rule with i_2 negated and p capped at 16 (as the 8-bit Sub caps p at 15):
    random code pairs at 50 scale / zero-point sets (M_j 0.0004 .. 3, p 13 .. 16, uint16 and int16),
    v68 and v73: 0 differences where the offset fits (below); Add's uncapped p misses 470-1,116 codes
    in 8,192 wherever it would exceed 16.  The offset is held in 32 bits: with codes and zero points
    moved to the int16 range (z' = zp - 32768 on uint16) and without the rounding term,
    K_0 = z'_y 2^p - 2 floor((z'_1 i_1 - z'_2 i_2) / 2) must be below 2^31 -- at p = 16 every output is
    the lowest code from K_0 = 2^31 + 934 up (9 sets) and exact up to K_0 = 2^31 - 2,312 (12 sets);
    refused there (conservative below p = 16: K_0 up to 1.4 * 2^31 was exact at p = 15).  A negative
    K_0 down to -1.9 * 2^31 is exact.  On uint16 K_0 + 32768 (i_2 - i_1) must fit too (all lowest codes from
    there up: the boundary of one set found to a single zero-point step, the K_0 bound alone missing it).

Mul of two tensors (v68 and v73 identical; int8 as uint8 moved by 128), M = f32(f32(s_1 s_2) / s_y) in
float32.  A 16-bit multiply-and-shift in two stages, the operands first moved by a "range bias" so that
the product of the zero-point-subtracted codes fits 16 bits (the scheme of Hexagon NN's open-source
mul_d32 kernel, with the HTP's own choice of shifts)::

    P   = (q_1 - z_1)(q_2 - z_2)                    exact, |P| <= 65025
    rb  = 256 floor(((2 z_1 - 255)(2 z_2 - 255) + 256) / 512)
    r   = min(-e, 7)                                e: the binary exponent of M (frexp: M = m 2^e)
          r -= 1 when r > 0 and round(M 2^(r+15)) reaches 2^15
          while r > 0 and the offset below exceeds 32767: r -= 1
    r > 0:  ps = round(M 2^(r+15));  adj = round(rb ps / 2^15) + z_y 2^r
            y = clamp((floor((P - rb) ps / 2^15) + adj + 2^(r-1)) >> r)
    r <= 0: (M >= 1/2)  ps = min(round(M 2^(15+r)), 32767), r one higher when M is a power of two >= 1
            y = clamp(((round((P - rb) ps / 2^15) + round(rb ps / 2^15)) << -r) + z_y)

    (round: ps half to even -- half up misses 139-693 codes in 32,768 on its ties --, adj half up; the HTP
    saturates the 16-bit sums, which the final clamp makes invisible.)
    Evidence: every pair of codes at 170 scale / zero-point sets (680 outputs, M 1e-6 .. 9.1 incl.
    multipliers within 1e-8 of a power of two and output zero points 0 / 255), v68 and v73, uint8 and
    int8: 0 of 85 M codes differ.  The renormalisation at 2^15 and the r loop were each needed (the
    latter on output zero points above ~224 at r = 7, where adj would pass 2^15); M in float64 instead
    of float32 differs on multipliers within 1e-8 of a power of two.  Broadcast operands (a per-channel
    activation over H, W; a constant per-channel vector; x * x) follow the same rule (measured).
    Finding: for some zero points the emulator itself fails on M >= 1 (int8 -41, 110 -> -66 at M = 1,
    2, 4 and 1.0000001, every htp_arch: SIGABRT with "malloc(): unsorted double linked list
    corrupted", SIGSEGV, or an allocation past 24 GB); the rule above is unverified there, not refused.

Mul by a constant with one element: another kernel, quant/htp_scale.py.
"""
from __future__ import annotations

import math

import numpy as np


def mantissa(v: float, bits: int) -> float:
    """``v`` (> 0) rounded to ``bits`` significant bits, half up."""
    m, e = math.frexp(v)
    return math.floor(m * 2.0 ** bits + 0.5) / 2.0 ** bits * 2.0 ** e


def conv_requant_params_v68(M: float) -> tuple[int, float]:
    """(k, m) of the v68 convolution requantization for a real multiplier ``M`` > 0."""
    if not (M > 0 and math.isfinite(M)):
        raise ValueError(f"multiplier {M!r} is not a positive finite number")
    k = math.ceil(math.log2(1.0 / M)) - 4
    return k, mantissa(M * 2.0 ** k, 11)


def per_channel_multipliers(xs: float, ws: np.ndarray, ys: float) -> np.ndarray:
    """M[c] = f32(f32(f32(xs * S) / ys) * f32(ws[c] / S)), S = max(ws): the per-channel multipliers (v68;
    v73 the same, measured with the 22-bit multipliers of 16-bit activations)."""
    f32 = np.float32
    ws = np.asarray(ws, f32)
    S = ws.max()
    ms = f32(f32(f32(xs) * S) / f32(ys))
    return (ms * (ws / S).astype(f32)).astype(f32).astype(np.float64)


def folded_zero_point(zero_point_u8: int, M, extra=0.0) -> np.ndarray:
    """Z = floor(f32(zp / M) + extra + 1/2), per channel when ``M`` is an array (float32 division);
    ``extra`` (float64, per channel) is added before the one rounding (htp_weights.folded_offset_v68)."""
    q = (np.float32(zero_point_u8) / np.asarray(M, np.float32)).astype(np.float32)
    return np.floor(q.astype(np.float64) + extra + 0.5).astype(np.int64)


def conv16_multiplier_v68(M: float) -> float:
    """m of the v68 16-bit convolution (module docstring): 256 M rounded to 11 significant bits."""
    if not (M > 0 and math.isfinite(M)):
        raise ValueError(f"multiplier {M!r} is not a positive finite number")
    return mantissa(256.0 * M, 11)


def conv16_apply_v68(g: np.ndarray, z, m) -> np.ndarray:
    """The v68 16-bit rule on g (module docstring): clamp(floor((g + Z) m + 1/2)) on the uint16 range,
    Z and m broadcast per channel; int64 codes.  |(g + Z) m| < 2^40 with m of 11 bits: exact in float64."""
    a = np.asarray(g, np.int64) + np.asarray(z, np.int64)
    return np.clip(np.floor(a.astype(np.float64) * np.asarray(m, np.float64) + 0.5), 0, 65535).astype(np.int64)


def folded_offset8(zero_point_u8: int, M, bias) -> np.ndarray:
    """Z of the v68 8-bit convolution with a bias (module docstring): floor(f32(f32(f32(zp / M) + f32(b')) + 1/2)),
    per channel; ``bias`` b' as float64 values of float32 numbers."""
    f32 = np.float32
    q = (f32(zero_point_u8) / np.asarray(M, f32)).astype(f32)
    q = (q + np.asarray(bias).astype(f32)).astype(f32)
    return np.floor((q + f32(0.5)).astype(f32).astype(np.float64)).astype(np.int64)


def folded_zero_point16(zero_point_u16: int, M, bias=None) -> np.ndarray:
    """Z of the v68 16-bit convolution, in g units (module docstring): floor(f32(f32(f32(zp / M) + f32(b)) + 1/2)
    / 256), per channel (float32 division, sum and half -- the half rounds to even in float32 from 2^23 up --
    and one floor at the end)."""
    f32 = np.float32
    q = (f32(zero_point_u16) / np.asarray(M, f32)).astype(f32)
    if bias is not None:
        q = (q + np.asarray(bias).astype(f32)).astype(f32)
    return np.floor((q + f32(0.5)).astype(f32).astype(np.float64) / 256).astype(np.int64)


def conv_requant_v68(acc: np.ndarray, M: float, zero_point_u8: int) -> np.ndarray:
    """The v68 rule on exact accumulators (bias included), uint8 domain; int64 codes in [0, 255].
    a * m is exact in float64 while |a| < 2^42 (m has 11 significant bits)."""
    k, m = conv_requant_params_v68(M)
    z = folded_zero_point(zero_point_u8, M)
    a = np.asarray(acc, np.int64) + z
    a = a >> k if k >= 0 else a << -k
    return np.clip(np.floor(a.astype(np.float64) * m + 0.5), 0, 255).astype(np.int64)


DW_S2_PER_CHANNEL_BIAS_MIN_M = 1e-4  # see the module docstring (stride-2 depthwise)


def dw_stride2_params(M: float) -> tuple[int, int]:
    """(p, i) of the stride-2 depthwise requantization (multipliers below 1/2 only)."""
    if not (0 < M < 0.5):
        raise ValueError(f"multiplier {M!r} is outside (0, 1/2), where the rule is measured")
    p = 15 - math.frexp(M)[1]
    return p, math.floor(M * 2.0 ** p + 0.5)


def dw_stride2_requant(acc_z: np.ndarray, p, i, qmin: int = 0, qmax: int = 255) -> np.ndarray:
    """Accumulators with bias and folded zero point -> codes (int64); p, i broadcast per channel.
    |acc_z| < 2^31 and i < 2^15: the product is exact in int64."""
    p = np.asarray(p, np.int64)
    v = np.asarray(acc_z, np.int64) * np.asarray(i, np.int64) + (np.int64(1) << (p - 1))
    return np.clip(v >> p, qmin, qmax)


def _mult(m: float, p: int) -> int:
    """m 2^p (exact: m is float32) rounded half to even, the HTP's Add / Sub / Mul multipliers; half up misses
    120-8,966 codes in 32,768 on ties."""
    return round(m * 2.0 ** p)


def add_params(m1: float, m2: float, z1: int, z2: int, zy: int) -> tuple[int, int, int, int]:
    """(p, i1, i2, K) of the HTP's Add for real multipliers m_j = s_j / s_y and uint8 zero points."""
    if not (m1 > 0 and m2 > 0 and math.isfinite(m1 + m2)):
        raise ValueError(f"multipliers {m1!r}, {m2!r} are not positive finite numbers")
    p = min(15, 14 - math.frexp(m1 + m2)[1])  # capped: m1 + m2 below 1/4 keeps p = 15 (measured)
    if p < 9:
        raise ValueError(f"multipliers {m1!r} + {m2!r} >= 32 are outside the measured range")
    i1, i2 = _mult(m1, p), _mult(m2, p)
    k = zy * 2 ** p + 2 ** (p - 1) - z1 * i1 - z2 * i2
    return p, i1, i2, 256 * ((k + 127) // 256)  # k / 256 to the nearest integer, ties down (Python ints)


def add16_params(m1: float, m2: float, z1: int, z2: int, zy: int) -> tuple[int, int, int, int]:
    """(p, i1, i2, K) of the HTP's 16-bit Add (module docstring) for m_j = s_j / s_y, raw zero points."""
    if not (m1 > 0 and m2 > 0 and math.isfinite(m1 + m2)):
        raise ValueError(f"multipliers {m1!r}, {m2!r} are not positive finite numbers")
    p = 15 - math.frexp(max(m1, m2))[1]
    if not 12 <= p <= 24:
        raise ValueError(f"multipliers {m1!r}, {m2!r} are outside the measured range (p {p})")
    i1, i2 = _mult(m1, p), _mult(m2, p)
    return p, i1, i2, zy * 2 ** p + 2 ** (p - 1) - 2 * ((z1 * i1 + z2 * i2) >> 1)


def _sub_multipliers(m1: float, m2: float, cap: int) -> tuple[int, int, int]:
    """(p, i1, i2) of a Sub: p = min(cap, cap - 1 - e), e the binary exponent of max(m1, m2), and the two
    multipliers rounded half to even at 2^-p; p below cap - 4 (the larger multiplier >= 8) is not measured."""
    if not (m1 > 0 and m2 > 0 and math.isfinite(m1 + m2)):
        raise ValueError(f"multipliers {m1!r}, {m2!r} are not positive finite numbers")
    p = min(cap, cap - 1 - math.frexp(max(m1, m2))[1])
    if p < cap - 4:
        raise ValueError(f"multiplier {max(m1, m2)!r} >= 8 is outside the measured range")
    return p, _mult(m1, p), _mult(m2, p)


def sub16_params(m1: float, m2: float, z1: int, z2: int, zy: int, shift: int) -> tuple[int, int, int, int]:
    """(p, i1, i2, K) of the HTP's 16-bit Sub (y = x1 - x2; module docstring) for m_j = s_j / s_y and raw
    zero points; ``shift`` moves the codes to the int16 range (-32768 for uint16, 0 for int16), where the
    offset must fit 32 bits."""
    p, i1, i2 = _sub_multipliers(m1, m2, 16)
    k0 = (zy + shift) * 2 ** p - 2 * (((z1 + shift) * i1 - (z2 + shift) * i2) >> 1)
    # uint16: the offset on the raw codes too, K_0 + 32768 (i2 - i1) (measured: lowest codes from there up)
    for k in (k0, k0 - shift * (i2 - i1)):
        if k >= 2 ** 31:
            raise ValueError(f"the offset {k} does not fit 32 bits (the HTP's outputs are then all the lowest code)")
    return p, i1, i2, zy * 2 ** p + 2 ** (p - 1) - 2 * ((z1 * i1 - z2 * i2) >> 1)


def sub_params(m1: float, m2: float, z1: int, z2: int, zy: int) -> tuple[int, int, int, int]:
    """(p, i1, i2, K) of the HTP's Sub (y = x1 - x2) for m_j = s_j / s_y and uint8 zero points."""
    p, i1, i2 = _sub_multipliers(m1, m2, 15)
    k = 256 * math.ceil((zy * 2 ** p + 2 ** (p - 1) - z1 * i1 + z2 * i2) / 256 - 0.5)
    if not -2 ** 23 <= k < 2 ** 23:
        raise ValueError(f"the offset {k} does not fit 24 bits (the HTP's result is then not characterised)")
    return p, i1, i2, k


def add16(q1: np.ndarray, q2: np.ndarray, params: tuple[int, int, int, int], qmin: int, qmax: int) -> np.ndarray:
    """(q1 i1 + q2 i2 + K) >> p on raw codes, clamped (int64); |q| < 2^16, i < 2^15: exact in int64."""
    p, i1, i2, k = params
    v = np.asarray(q1, np.int64) * i1 + np.asarray(q2, np.int64) * i2 + k
    return np.clip(v >> p, qmin, qmax)


def add_u8(q1: np.ndarray, q2: np.ndarray, params: tuple[int, int, int, int]) -> np.ndarray:
    """Raw uint8 codes in, uint8 codes out (int64): ``add16``'s form on the uint8 range."""
    return add16(q1, q2, params, 0, 255)


MUL_MAX = 16.0  # the largest multiplier measured (9.1) rounded up to the next power of two


def mul_params(M: float, z1: int, z2: int, zy: int) -> tuple[int, int, int, int]:
    """(rb, r, ps, adj) of the HTP's Mul for the float32 multiplier ``M`` and uint8 zero points
    (module docstring); ps = M 2^(15 + r) rounded half to even (exact in float64; half up misses 139-693 codes
    in 32,768 where it is even + 1/2)."""
    if not (0 < M < MUL_MAX):
        raise ValueError(f"multiplier {M!r} is outside (0, {MUL_MAX:g}), where the Mul rule is measured")
    rb = (((2 * z1 - 255) * (2 * z2 - 255) + 256) >> 9) * 256
    m, e = math.frexp(M)
    r = min(-e, 7)
    if r > 0 and _mult(M, r + 15) >= 1 << 15:
        r -= 1
    while r > 0:
        ps = _mult(M, r + 15)
        adj = ((rb * ps + (1 << 14)) >> 15) + (zy << r)
        if adj <= 32767:
            return rb, r, ps, adj
        r -= 1
    if r < 0 and m == 0.5:
        r += 1
    ps = min(_mult(M, 15 + r), 32767)
    return rb, r, ps, (rb * ps + (1 << 14)) >> 15


def mul_u8(q1: np.ndarray, q2: np.ndarray, z1: int, z2: int, zy: int, params: tuple[int, int, int, int]) -> np.ndarray:
    """uint8 codes in (broadcast), uint8 codes out (int64); |(P - rb) ps| < 2^32: exact in int64."""
    rb, r, ps, adj = params
    d = (np.asarray(q1, np.int64) - z1) * (np.asarray(q2, np.int64) - z2) - rb
    if r > 0:
        return np.clip(((((d * ps) >> 15) + adj) + (1 << (r - 1))) >> r, 0, 255)
    return np.clip(((((d * ps + (1 << 14)) >> 15) + adj) << -r) + zy, 0, 255)
