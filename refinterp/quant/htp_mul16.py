"""Qualcomm HTP Mul of two 16-bit tensors (uint16, and int16 computed as uint16 with codes and zero points
moved by +32768; v68 and v73 identical), as measured against Qualcomm's host emulation of the HTP
(``libQnnHtp.so`` of QNN 2.51 in ``onnxruntime-qnn==2.7.0``); tests/conformance/test_qnn_htp_a16.py
re-measures it.  The 16-bit analogue of the 8-bit two-stage kernel (htp_ops.py, "Mul of two tensors"): a
range bias rb centres the product of the zero-point-subtracted codes, a 31-bit multiplier on 2^-34 scales
it onto a grid of 1/8 output code (floored), the range bias comes back rounded on that grid, and one final
rounding shift by 3 bits::

    M   = f32(f32(s_1 s_2) / s_y)                   below 1/8 (measured range)
    ps  = M 2^34 rounded half to even               < 2^31
    P   = (q_1 - z_1)(q_2 - z_2)                    exact, |P| < 2^32
    rb  = floor((2 z_1 - 65535)(2 z_2 - 65535) / 2)  (twice the product of the zero points' offsets from
                                                      the middle of the range, 32767.5)
    adj = round_half_up(rb ps / 2^31) + 8 z_y
    y   = clamp((floor((P - rb) ps / 2^31) + adj + 4) >> 3)

The result is floor(P ps / 2^34 + beta) with beta = 1/2 + (adj - 8 z_y - rb ps / 2^31) / 8: the rounding of
the range-bias term on the 1/8 grid moves the offset by up to 1/16 of a code, which is what made the
outputs look like the exact product rounded with an offset of 0.459 .. 0.562 (MEASURED.md before this).

Evidence: 65,536 random code pairs per set (input spreads chosen so that about 0-20% of the outputs
saturate): 70 uint16 sets at v73 with M from 1.2e-8 to 0.11 and random zero points, plus sweeps of one zero
point by single codes (the offset then steps by 0.0088 and wraps at 1/8: the rounding of rb ps on the 1/8
grid), 12 int16 sets at v73, 12 uint16 and 8 int16 sets at v68: 0 differences.  Rounding ps half up instead
of to even misses 2,402 codes on the one set where M 2^34 fell on a tie (M in [2^-12, 2^-11) has one
fractional bit there); floor misses on 33 sets; the exact product rounded differs on 0.8-18% of the codes.
From M = 1/8 up (ps would pass 2^31) the outputs are not a floor of an affine function of P: another form,
not characterised (refused).
"""
from __future__ import annotations

import math

import numpy as np

MAX_M = 0.125  # the measured range: M < 1/8 (ps < 2^31)


def mul16_params(M: float, z1: int, z2: int, zy: int) -> tuple[int, int, int]:
    """(ps, rb, adj) for uint16-domain zero points and the float32 multiplier M (module docstring)."""
    if not (0 < M < MAX_M and math.isfinite(M)):
        raise ValueError(f"multiplier {M!r} is outside (0, 1/8), where the 16-bit Mul is measured")
    ps = round(M * 2.0 ** 34)  # M has 24 significant bits: M 2^34 is exact in float64; round(): half to even
    rb = ((2 * z1 - 65535) * (2 * z2 - 65535)) // 2
    adj = (rb * ps + (1 << 30)) // (1 << 31) + 8 * zy  # Python integers: exact
    return ps, rb, adj


def _floor_mul_shift31(d: np.ndarray, ps: int) -> np.ndarray:
    """floor(d ps / 2^31) exactly in int64 for |d| < 2^34, 0 <= ps < 2^31 (d ps itself may pass 2^63):
    d = dh 2^16 + dl with 0 <= dl < 2^16, dh ps = aq 2^15 + ar with 0 <= ar < 2^15, so
    d ps / 2^31 = aq + (ar 2^16 + dl ps) / 2^31, every term below 2^50."""
    dh, dl = d >> 16, d & 0xFFFF
    a = dh * ps
    aq, ar = a >> 15, a & 0x7FFF
    return aq + (((ar << 16) + dl * ps) >> 31)


def mul16(q1: np.ndarray, q2: np.ndarray, z1: int, z2: int, params: tuple[int, int, int]) -> np.ndarray:
    """uint16-domain codes in (broadcast), uint16-domain codes out (int64)."""
    ps, rb, adj = params
    q1, q2 = np.broadcast_arrays(np.asarray(q1, np.int64), np.asarray(q2, np.int64))
    d = (q1 - z1) * (q2 - z2) - rb  # |P| < 2^32, |rb| < 2^31
    return np.clip((_floor_mul_shift31(d, ps) + adj + 4) >> 3, 0, 65535)
