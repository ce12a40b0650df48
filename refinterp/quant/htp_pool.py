"""Qualcomm HTP window averages on exact window sums: GlobalAveragePool's (also 8x8 AveragePool windows)
and the 2x2 stride-2 AveragePool's, as measured against Qualcomm's host emulation of the HTP
(``libQnnHtp.so`` of QNN 2.51 in ``onnxruntime-qnn==2.7.0``); tests/conformance/test_qnn_htp_ops.py and
test_qnn_htp_pool.py re-measure them.  S is always the exact sum over the window of q - zp_x (8-bit: int8
codes and zero points moved by +128, which cancels in S; uint16 as is), so |S| <= n * 65535.

Window average, GlobalAveragePool (v68 and v73 identical), A = s_x / (s_y * n) for n cells::

    p  = 15 - e                                 e: the binary exponent of A (A * 2^p in [2^14, 2^15))
    i  = floor(A * 2^p + 1/2)
    y  = clamp(((S * i + 2^(p-1)) >> p) + zp_y)   S = sum of (q - zp_x) over the window, exact

    Evidence: 30 + 20 layers of 512 .. 2048 channels over 2x2 .. 7x7 windows, uint8 and int8:
    0 differences (plain rounding of the exact mean differs on 28 of 61,440).  uint16 the same: 10
    layers of 1,024 channels over windows of 12 .. 56 cells, v73 and v68, 0 of 10,240 (the QNN EP
    refuses an int16 GlobalAveragePool).  On uint16 with A below 1/2 (p >= 16) the HTP rounds twice, the first
    shift by a = the bit length of n, which is one rounding with the offset 2^(p-1) + 2^(a-1)::

        y  = clamp(((S * i + 2^(p-1) + 2^(a-1)) >> p) + zp_y)

    Evidence (v68 and v73, 2x2 .. 8x8 windows, 36 sets of 2,048 channels whose sums put S i within 1,700 units
    of 2^-p below a tie; tests/conformance/test_qnn_htp_gap16.py): the single rounding misses 4-251 codes per set,
    all within 2^(a-1) units of the tie, this form 0 on 35 sets; at A >= 1/2 (p = 15, 4 sets) the single rounding
    is exact.  Found on a MobileNetV3-Small by get_qnn_qdq_config at uint16 (v68, a 2x2 GlobalAveragePool: one
    code in 576).  One 3x3 set (A = 0.0722, p = 18) missed 1,018 positive sums as far as 0.0057 below the tie
    under both forms: not identified.  AveragePool with
    padding and ReduceMean do *not* follow this rule (v68 and v73 differ from it and from each other):
    not characterised.  ReduceMean measured further (v73, uint8): over H x W, the last axis or the
    channels it equals this rule on most layers (0 of 1,024 .. 2,048 codes for n = 10 .. 2,048), but with
    n = 9 a sweep of every window sum (S from -1152 to 1143, z_y = 128, six multipliers) differs from it
    near ties (2 .. 10 codes) and, for A > 1/2, on 154 .. 280 sums near the negative end, where the HTP's
    code is one higher; GlobalAveragePool on the same sweep follows the rule (0 of 13,776).

2x2 AveragePool with strides 2 (v68 and v73 identical; uint8, int8 and uint16 alike), A = s_x / (4 s_y)::

    p  = 15 - e                     e: the binary exponent of A (A * 2^p in [2^14, 2^15)), as above
    i  = floor(A * 2^p + 1/2)       a 15-bit multiplier
    A >= 1/2 (p <= 15): y = clamp(((S * i + 2^(p-1)) >> p) + zp_y)          one rounding, as above
    A <  1/2 (p >= 16): two roundings, the second by s2 = min(7, p - 12) bits:
        v  = (S * i + 2^(p-s2-1)) >> (p - s2)      an intermediate on a 2^-s2 grid of the output
        y  = clamp(((v + 2^(s2-1)) >> s2) + zp_y)

    The two roundings equal one with the offset 1/2 + 2^(p-s2-1) / 2^p: the output rounds up from a
    fraction 1/2 - 2^(11-p) (p <= 19) or 1/2 - 1/256 (p >= 19).  Evidence (2x2 windows over 6x6 .. 48x48
    inputs, 1 .. 64 channels): on 74 uint8 / int8 sets with A from 2^-8 to 200 and 20 uint16 sets with A
    from 0.0044 to 28.6, v73 (and 12 + 8 of them at v68): 0 differences.  The offsets were read from the
    data first: with A in [2^-5, 2^-4), [2^-4, 2^-3), [2^-3, 2^-2), [2^-2, 2^-1) the codes fit
    floor(S a + o) only with o - 1/2 in [0.0030, 0.0043], [0.0067, 0.0091], [0.0146, 0.0170] and
    [0.0297, 0.0327] (1/256, 1/128, 1/64, 1/32), whatever the zero points, and in [-0.0012, 0.0011] above
    1/2; the second shift of 7 bits at p = 20 .. 22 (6 or 8 miss 2 .. 59 codes in 2,048 .. 4,096).  The
    float32 path of the other AveragePool windows misses 0 .. 296 codes per set (rounding half to even
    at the exact mean misses as many).  Below A = 2^-8 (p >= 23) the few output levels left did not
    single out a rule (this one misses 33 .. 47 codes in 4,096): refused.  Windows hanging over padding
    or past the input (pads, ceil_mode on odd sizes) are not this rule either (the cells there differ
    under both counts of the divisor): refused.
"""
from __future__ import annotations

import math

import numpy as np

PAIR_MIN_EXPONENT = -8  # A below 2^-8 (p >= 23) is not characterised for the 2x2 stride-2 average


def average_params(A: float) -> tuple[int, int]:
    """(p, i) of the window average for A = s_x / (s_y * n) > 0."""
    if not (A > 0 and math.isfinite(A)):
        raise ValueError(f"multiplier {A!r} is not a positive finite number")
    p = 15 - math.frexp(A)[1]
    if p < 1:
        raise ValueError(f"multiplier {A!r} >= 2^14 is outside the measured range")
    return p, math.floor(A * 2.0 ** p + 0.5)


def average(S: np.ndarray, params: tuple[int, int], zy: int, qmin: int, qmax: int, n16: int = 0) -> np.ndarray:
    """Window sums S of zero-point-subtracted codes -> output codes (int64).  ``n16``: the window's cell count on
    uint16 codes (module docstring: A below 1/2 rounds twice there, the first shift by n's bit length)."""
    p, i = params
    extra = (1 << (n16.bit_length() - 1)) if n16 and p >= 16 else 0
    return np.clip(((np.asarray(S, np.int64) * i + (1 << (p - 1)) + extra) >> p) + zy, qmin, qmax)


def pair_average_params(A: float) -> tuple[int, int, int]:
    """(p, i, s2) of the 2x2 stride-2 AveragePool for A = s_x / (4 s_y) > 0 (module docstring)."""
    p, i = average_params(A)
    if math.frexp(A)[1] <= PAIR_MIN_EXPONENT:
        raise ValueError(f"multiplier {A!r} below 2^{PAIR_MIN_EXPONENT} is outside the measured range")
    return p, i, min(7, p - 12) if p >= 16 else 0


def pair_average(S: np.ndarray, params: tuple[int, int, int], zy: int, qmin: int, qmax: int) -> np.ndarray:
    """Window sums S of zero-point-subtracted codes -> output codes (int64); |S| <= 4 * 65535 and
    i < 2^15 + 1, so S * i < 2^34: exact in int64."""
    p, i, s2 = params
    v = (np.asarray(S, np.int64) * i + (1 << (p - s2 - 1))) >> (p - s2)
    if s2:
        v = (v + (1 << (s2 - 1))) >> s2
    return np.clip(v + zy, qmin, qmax)
