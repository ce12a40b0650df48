"""Run-time input quantization of LiteRT dynamic-range ("hybrid") kernels, one scale per row.

LiteRT ``tensor_utils::SymmetricQuantizeFloats`` / ``AsymmetricQuantizeFloats`` as built into the
x86-64 wheels (SSE4.1: ``NEON_OR_PORTABLE`` resolves to the NEON code through NEON_2_SSE):

symmetric (per row ``v``, float32)::

    range = max(|min v|, |max v|)                       ; range == 0 -> q = 0, scale = 1
    scale = f32(range / 127) ; inv = f32(127 / range) ; p = f32(v * inv)
    q = clamp(R(p), -127, 127)

asymmetric::

    lo = min(0, min v), hi = max(0, max v)              ; lo == hi -> q = 0, scale = 1, zp = 0
    s  = double(f32(hi - lo)) / 255                     (the difference is rounded to float32)
    zp = the zero point from lo or from hi, whichever has the smaller |qbound| + |bound/s|,
         -128 / 127 when at or beyond the bounds, else round_half_away (double)
    scale = f32(s) ; inv = f32(1.0 / double(scale)) ; p = f32(v * inv)
    q = clamp(R(p) + zp, -128, 127)

``R``: the first ``8*floor(n/8)`` elements of a row take the vector path
``trunc(f32(p + (p < 0 ? -0.5 : 0.5)))`` (``RoundToNearest`` without ARMv8 ``vcvta``), the tail
takes ``std::round`` (half away from zero).  The two differ only when ``p + 0.5`` rounds in
float32 (|p| just below .5 of an odd integer step, e.g. p = 0.49999997 -> 1 in the vector path).
"""
from __future__ import annotations

import numpy as np

_F32 = np.float32


def _round_rows(p: np.ndarray) -> np.ndarray:
    """R(p) for a [rows, n] float32 array -> int32 (the vector-block / scalar-tail split above)."""
    n = p.shape[-1]
    vec = (n // 8) * 8
    out = np.empty(p.shape, np.int32)
    if vec:
        head = p[:, :vec]
        half = np.where(head < 0, _F32(-0.5), _F32(0.5)).astype(_F32)
        out[:, :vec] = np.trunc((head + half).astype(_F32)).astype(np.int32)
    if vec < n:
        tail = p[:, vec:].astype(np.float64)
        out[:, vec:] = (np.sign(tail) * np.floor(np.abs(tail) + 0.5)).astype(np.int32)
    return out


def symmetric_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x: float32 [rows, n] -> (q int8 [rows, n], scale float32 [rows])."""
    x = np.asarray(x, _F32)
    if x.shape[-1] == 0:
        return np.zeros(x.shape, np.int8), np.ones(x.shape[0], _F32)
    rng = np.maximum(np.abs(x.min(axis=1)), np.abs(x.max(axis=1))).astype(_F32)
    zero = rng == 0
    safe = np.where(zero, _F32(1), rng).astype(_F32)
    scale = np.where(zero, _F32(1), (safe / _F32(127)).astype(_F32)).astype(_F32)
    inv = (_F32(127) / safe).astype(_F32)
    p = (x * inv[:, None]).astype(_F32)
    q = np.clip(_round_rows(p), -127, 127)
    q[zero] = 0
    return q.astype(np.int8), scale


def asymmetric_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x: float32 [rows, n] -> (q int8 [rows, n], scale float32 [rows], zero point int32 [rows])."""
    x = np.asarray(x, _F32)
    rows = x.shape[0]
    if x.shape[-1] == 0:
        return np.zeros(x.shape, np.int8), np.ones(rows, _F32), np.zeros(rows, np.int32)
    lo = np.minimum(_F32(0), x.min(axis=1)).astype(_F32)
    hi = np.maximum(_F32(0), x.max(axis=1)).astype(_F32)
    flat = lo == hi
    diff = np.where(flat, _F32(1), (hi - lo).astype(_F32)).astype(_F32)
    s = diff.astype(np.float64) / 255.0
    lo_s, hi_s = lo.astype(np.float64) / s, hi.astype(np.float64) / s
    from_min, from_max = -128.0 - lo_s, 127.0 - hi_s
    err_min, err_max = 128.0 + np.abs(lo_s), 127.0 + np.abs(hi_s)
    zp_d = np.where(err_min < err_max, from_min, from_max)
    zp_r = np.sign(zp_d) * np.floor(np.abs(zp_d) + 0.5)  # C round(): half away from zero
    zp = np.where(zp_d <= -128.0, -128.0, np.where(zp_d >= 127.0, 127.0, zp_r)).astype(np.int32)
    scale = s.astype(_F32)
    inv = np.where(scale == 0, 0.0, 1.0 / np.where(scale == 0, 1.0, scale.astype(np.float64))).astype(_F32)
    p = (x * inv[:, None]).astype(_F32)
    q = np.clip(_round_rows(p).astype(np.int64) + zp[:, None], -128, 127)
    q[flat] = 0
    zp[flat] = 0
    scale[flat] = 1
    return q.astype(np.int8), scale, zp


def quantize_rows(x: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Either form with a zero point array (all 0 for symmetric)."""
    if asymmetric:
        return asymmetric_rows(x)
    q, s = symmetric_rows(x)
    return q, s, np.zeros(q.shape[0], np.int32)
