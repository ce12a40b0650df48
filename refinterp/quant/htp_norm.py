"""The HTP's quantized LayerNormalization (8-bit activations and gamma, int32 beta, the last axis), found by
experiment against Qualcomm's host emulation (onnxruntime-qnn 2.7.0, QNN 2.51; v68 and v73 alike).

Per row of L codes q (int8 moved to the uint8 domain, q + 128, for the mean; the variance does not move):

* mean: in 1/64 of a code, m64 = floor(64 S f32(1 / L)), S the row's code sum, the product exact (not the
  exact quotient: 64 S / L on L = 100 is one 1/64 step higher on every S divisible by 25; not rounded to
  float32 either).
* variance: the exact variance of the codes rounded to float32, plus f32(eps / f32(s_x s_x)), in float32.
* reciprocal square root: the bit trick 0x5f3759df - (bits >> 1) and two Newton steps in float32
  (``rsqrt``); its error profile (up to -4.7e-6, zero near mantissas 0.53, 0.78, 1.27 of the variance in
  code units) is what the emulator shows, an exact reciprocal square root misses rows where the
  multiplier below lands near a step.
* multiplier: M = r f32(s_g) / f32(s_y) 2^16 (r in 1 / code units), kept as a 16-bit unsigned m with a
  shift k >= 0: m = floor(M / 2^k) < 65536, i.e. M floored onto a grid of 2^k / 2^16 (k = 0 below 65536).
  The product of r with the scale ratio is not reproduced to the last float32 ulp (measured: rows whose M
  lies within 1.9e-7 relative of a grid step go either way; no float32 or float64 order of the Newton steps,
  the variance or the product tried gives all of them -- the HTP may compute in its qf32 format), so a row
  whose M lies within ``GUARD`` of a step and whose codes depend on the side is refused (``layer_norm``).
* output: y = floor(d G m 2^k / 2^22 + 1/2) + bb + z_y, clamped; d = 64 q - m64 (the same domain), G the
  gamma code minus its zero point, bb = beta rounded on its own, half away from zero, from its float32 value
  times the float32 reciprocal of the output scale: f32(f32(f32(beta_q) s_b) f32(1 / s_y)).

Evidence (tests/conformance/test_qnn_htp_norm.py, v68 and v73, uint8 and int8; the alias archs once): 20 models
per arch and type -- rows of 49 .. 768 codes off the input grid, scale ratios s_g / s_y from 0.1 to 5 (M past
2^16: shifts), eps 1e-12 and 0.01, after an Add and a MatMul, beta on exact ties, beta where dividing by s_y
rounds apart, rows of zero variance, exact ties of the final rounding -- 2.1 million codes, 0 off; 6-15
of 6,734 rows undecided (0.1-0.2%, mostly at the ratio 5).  The exact layer norm rounded is 20-26% of the
codes off, beta added before the rounding about 6%, the exact mean 2% of rows at L = 100, the exact
reciprocal square root on the same grid up to 0.1% of rows; each of those and the other departures tried (no shift above
2^16, a floor for the final rounding, beta half up or divided by s_y, int8 means in the int8 domain) makes
the test fail.
"""
from __future__ import annotations

import math

import numpy as np

from .fixedpoint import round_half_away

F32 = np.float32
MAGIC = 0x5F3759DF
GUARD = 4e-7  # relative distance of M to a grid step below which the HTP's side is not characterised
MEAN_BITS = 6  # the mean in 1/64 of a code
MULT_BITS = 16  # the multiplier: 16 bits, 2^16 = one
SHIFT = MEAN_BITS + MULT_BITS


def rsqrt(v: np.ndarray) -> np.ndarray:
    """float32 1 / sqrt(v) as the HTP computes it: the 0x5f3759df seed, then y (1.5 - (v/2 y) y) and
    y + y (0.5 - v/2 y^2), every operation rounded to float32."""
    v = np.asarray(v, F32)
    y = (np.int32(MAGIC) - (v.view(np.int32) >> 1)).astype(np.int32).view(F32)
    h = (F32(0.5) * v).astype(F32)
    y = (y * (F32(1.5) - ((h * y).astype(F32) * y).astype(F32)).astype(F32)).astype(F32)
    t = (F32(0.5) - (h * (y * y).astype(F32)).astype(F32)).astype(F32)
    return (y + (y * t).astype(F32)).astype(F32)


def mean64(codes: np.ndarray) -> np.ndarray:
    """floor(64 S f32(1 / L)) per row (last axis), exact: f32(1 / L) = a 2^-b with an integer a < 2^24."""
    n = codes.shape[-1]
    a, e = math.frexp(float(F32(1) / F32(n)))  # 1/L = a 2^e, a in [0.5, 1)
    mant, b = int(a * 2 ** 24), 24 - e
    s = codes.sum(axis=-1, dtype=np.int64)  # |64 S a| < 2^6 2^16 L 2^24: int64 up to L = 2^17
    return np.floor_divide(s * (64 * mant), 1 << b)


def variance32(codes: np.ndarray) -> np.ndarray:
    """The exact population variance of each row, rounded to float32 (via a float64 quotient of exact
    integers)."""
    n = codes.shape[-1]
    q = codes.astype(np.int64)
    s, s2 = q.sum(axis=-1), (q * q).sum(axis=-1)
    return ((n * s2 - s * s) / float(n * n)).astype(F32)


def multiplier(r: np.ndarray, s_g: float, s_y: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, k, other): M = r s_g / s_y 2^16 as m 2^k, m = floor(M / 2^k) < 2^16; ``other`` is the m on the
    far side of the nearest step where M lies within ``GUARD`` (relative) of it, else m."""
    big = np.asarray(r, np.float64) * (float(F32(s_g)) / float(F32(s_y))) * 2.0 ** MULT_BITS
    k = np.maximum(np.frexp(big)[1] - MULT_BITS, 0).astype(np.int64)  # big < 2^e: big / 2^k < 2^16
    grid = big / 2.0 ** k
    m = np.floor(grid).astype(np.int64)
    near = np.abs(grid - np.round(grid)) * 2.0 ** k < GUARD * big
    other = np.where(near, np.where(grid - m >= 0.5, m + 1, m - 1), m)
    return m, k, other


def beta_codes(beta_q: np.ndarray, s_b: float, s_y: float) -> np.ndarray:
    """round(f32(f32(f32(beta_q) s_b) f32(1 / s_y))), half away from zero (int64).  Dividing by s_y instead
    rounds the other way on 0 of 768 entries chosen where the two differ (measured)."""
    v = ((np.asarray(beta_q).astype(F32) * F32(s_b)).astype(F32) * (F32(1) / F32(s_y))).astype(F32)
    return round_half_away(v).astype(np.int64)


def rows_out(d: np.ndarray, g: np.ndarray, m: np.ndarray, k: np.ndarray) -> np.ndarray:
    """floor(d g m 2^k / 2^22 + 1/2) per element (d: [rows, L] in 1/64 code, g: [L], m, k: [rows]); exact in
    int64 (|d g m| < 2^15 2^9 2^16)."""
    p = d * g[None, :] * m[:, None]
    kk = k[:, None]
    low = kk <= SHIFT - 1
    sh = np.where(low, SHIFT - kk, 0)
    up = np.where(low, 0, kk - SHIFT)
    rounded = (p + np.where(low, np.left_shift(1, np.maximum(sh - 1, 0)), 0)) >> sh
    return np.where(low, rounded, p << up)


def layer_norm(codes: np.ndarray, shift: int, s_x: float, eps: float, g: np.ndarray, s_g: float, s_y: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """(y0, undecided) for rows of codes (last axis), before beta, the zero point and the clamp: y0 =
    floor(d g m 2^k / 2^22 + 1/2) ([rows, L]; ``shift``: 128 for int8 codes, the mean's domain);
    ``undecided``: the rows whose M lies within ``GUARD`` of a step and whose y0 differs on its other side."""
    q = codes.reshape(-1, codes.shape[-1]).astype(np.int64) + shift
    v = (variance32(q) + (F32(eps) / (F32(s_x) * F32(s_x))).astype(F32)).astype(F32)
    m, k, other = multiplier(rsqrt(v), s_g, s_y)
    d = (q << MEAN_BITS) - mean64(q)[:, None]
    g = np.asarray(g, np.int64)
    y0 = rows_out(d, g, m, k)
    undecided = np.zeros(len(m), bool)
    near = np.nonzero(other != m)[0]
    if near.size:
        undecided[near] = (rows_out(d[near], g, other[near], k[near]) != y0[near]).any(axis=1)
    return y0, undecided
