"""The optional parts of LiteRT's 8x8_16 integer LSTM (``lstm_eval.cc``, ``portable_tensor_utils.cc``;
the optimized resolver runs the same portable code on x86): peephole connections, layer
normalization of the gates and the output projection.  Maths only; the plan is built in lstm.py.

Peephole (``VectorBatchVectorCwiseProductAccumulate``), added to a gate after both matmuls, before
layer normalization; the input and forget gates read the previous cell state, the output gate the
updated one.  LiteRT passes ``n_output`` as the vector length: with a projection narrower than the
cell (n_output < n_cell) only the first n_output cells of each batch row get their peephole term
(measured on LiteRT 2.3: batch 1 and 2, every tensor equal; per-cell products on all cells, or the
source's flattened reading, differ)::

    gate[b, j] = sat16(gate[b, j] + MBQM(w[j] * c[b, j], eff_peephole))     for j < n_output

Layer normalization (``ApplyLayerNorm``), per batch row of n gate values v (int16), the gate's bias
b (int32) applied here instead of in the matmul::

    mean = trunc(sum(v) * 1024 / n)                        (int64 sum, C division)
    var  = trunc((sum(v^2) * trunc(2^20 / n) - mean^2) / 2^20), int32; var < 1 -> guard
           (guard = max(1, trunc(f32(10000 * s_ln))))
    (a, s) = GetInvSqrtQuantizedMultiplierExp(var, -1)
    r    = MBQM(1024 * v - mean, a, s)
    t    = r * coef + b                                    (exact: the C++ writes it in int32, which
                                                            overflows, but the x86-64 and aarch64
                                                            builds form it in int64; measured with
                                                            biases near 2^31)
    u    = wrap32(trunc((t + 512 * sign(t)) / 1024))       (t = 0: -512 / 1024 = 0)
    out  = sat16(MBQM(u, ln_M, ln_shift + 12))             ((ln_M, ln_shift) = QuantizeMultiplier(s_ln))

On aarch64 (``impl: litert_neon``; NeonApplyLayerNorm) the sum of squares over the first
8 * floor(n / 8) values is formed four lanes at a time in int32 (each partial sum wraps), and the
first 16 * floor(n / 16) values of a row are normalized on the NEON path: both MBQMs are vqrdmulh +
vrshl (the ``upward`` rounding), t = r * coef + b is exact in int64 and u = wrap32((t + 512) >> 10)
(ties up); the remaining values take the scalar path above.

Projection (``CalculateLstmOutputInteger8x8_16``)::

    p   = clamp8(MBQM(o * tanh(c), eff_hidden) - zp_hidden)     (LiteRT subtracts the zero point here)
    h   = clamp8(MBQM(b_p + zp_hidden * rowsum(W_p) + W_p p, eff_proj) + zp_out)
    h   = clamp(h, -q_clip, q_clip) if q_clip > 0                (q_clip = int8(trunc(f32(clip / s_out))))
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.quant.fixedpoint import trunc_div, wrap_int32
from refinterp.quant.gemmlowp import inv_sqrt_multiplier_exp
from refinterp.quant.requant import Rounding
from ..common import mbqm

_I64 = np.int64


@dataclass(frozen=True)
class LayerNorm:
    coef: np.ndarray  # int16 coefficients as int64 [n_cell]
    bias: np.ndarray  # the gate bias, int64 [n_cell]
    mult: tuple[int, int]  # QuantizeMultiplier(s_ln); applied with shift + 12
    guard: int  # variance used when the computed one is < 1


@dataclass(frozen=True)
class Projection:
    weights: np.ndarray  # int8 [n_output, n_cell] as int64
    bias: np.ndarray  # b_p + zp_hidden * rowsum(W_p), int64 [n_output]
    mult: tuple[int, int]
    zp_out: int
    clip: int  # 0: none


def peephole(gate: np.ndarray, w: np.ndarray, c: np.ndarray, n_output: int, mult, r) -> np.ndarray:
    g = gate.copy()
    g[:, :n_output] = np.clip(g[:, :n_output] + mbqm(w[:n_output] * c[:, :n_output], *mult, r), -32768, 32767)
    return g


def layer_norm(gate: np.ndarray, ln: LayerNorm, r, neon: bool = False) -> np.ndarray:
    n = gate.shape[-1]
    mean = trunc_div(gate.sum(axis=-1) * 1024, n)[:, None]  # |mean| <= 2^25
    sq = gate * gate  # each <= 2^30
    k8 = n // 8 * 8 if neon else 0
    # NEON sums the squares of 8-value blocks four lanes at a time in int32 (vaddvq_s32): a lane
    # group of four saturated gates (4 * 32767^2 > 2^31) wraps
    sum_sq = wrap_int32(sq[:, :k8].reshape(sq.shape[0], -1, 4).sum(axis=-1)).sum(axis=-1) + sq[:, k8:].sum(axis=-1)
    var = sum_sq * ((1 << 20) // n) - (mean[:, 0] * mean[:, 0])
    var = wrap_int32(trunc_div(var, 1 << 20))
    var = np.where(var < 1, ln.guard, var)
    inv_m, inv_s = inv_sqrt_multiplier_exp(var, -1)
    rescaled = mbqm(1024 * gate - mean, inv_m[:, None], inv_s[:, None], r)
    t = rescaled * ln.coef + ln.bias  # exact: see the module docstring
    u = wrap_int32(trunc_div(t + np.where(t > 0, 512, -512), 1024))
    out = np.clip(mbqm(u, ln.mult[0], ln.mult[1] + 12, r), -32768, 32767)
    k = n // 16 * 16
    if neon and k:
        up = Rounding.UPWARD
        rv = mbqm(1024 * gate[:, :k] - mean, inv_m[:, None], inv_s[:, None], up)
        uv = wrap_int32((rv * ln.coef[:k] + ln.bias[:k] + 512) >> 10)
        out[:, :k] = np.clip(mbqm(uv, ln.mult[0], ln.mult[1] + 12, up), -32768, 32767)
    return out


def project(o: np.ndarray, tanh_c: np.ndarray, eff_hidden, hidden_zp: int, proj: Projection, r) -> np.ndarray:
    p = np.clip(mbqm(o * tanh_c, *eff_hidden, r) - hidden_zp, -128, 127)
    h = np.clip(mbqm(proj.bias + p @ proj.weights.T, *proj.mult, r) + proj.zp_out, -128, 127)
    return np.clip(h, -proj.clip, proj.clip) if proj.clip > 0 else h
