"""Fast TFLite integer SOFTMAX over the last axis, bit-exact with the NumPy kernels it replaces:
``softmax._run_8bit`` / ``_run_int16`` (LiteRT reference, TFLM) and the float-table 8-bit kernel
of ``optimized.misc.softmax`` (LiteRT optimized; also what XNNPACK schemes run).

Everything that depends only on d = q - max(row) is tabulated once per plan with the NumPy code
itself (8-bit: 256 entries; int16: 65536): the reference exp values ``E[d]``, their Q12 terms
``R[d]`` (0 where d < diff_min) and validity; int16: the exp-LUT output.  Per row (Numba): the
max, the sum of the tabulated terms, one reciprocal, and a scalar loop over the row:

* reference 8-bit: total < 2^31 (depth < 4096, checked); ``GetReciprocal`` in gemmlowp fixed
  point (scalar port, ``_reciprocal``); out = clamp(RDBP(SRDHM(recip, E), over + 31 - bits) + min);
* reference int16: total = sum of LUT outputs (2 <= total < 2^31, checked per row), the 1/(1+x)
  LUT interpolation, out = clamp((e * recip + 2^(rs-1)) >> rs, 0, 32767);
* optimized float table: sequential float32 sum, inv = 1 / (sum * so) in float32,
  out = round_half_away(e * inv) + zo (uint8: trunc(e * inv + 0.5f)), clamped; tables with entries
  outside [0, 1] and rows whose inv is not finite or >= 4e18 are not covered.

A row outside these bounds makes the whole call return None (the NumPy path runs).
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.quant import gemmlowp, lut
from refinterp.quant.fixedpoint import rdbp as np_rdbp
from ..common import mbqm, qrange
from ...prepared import prepared
from refinterp.quant.fixedpoint_nb import rdbp, srdhm, srdhm_pos, wrap32

_I64 = np.int64
_INT32_MAX = 2147483647
_INT32_MIN = -2147483648


@numba.njit(cache=True, inline="always")
def _sat_mul_pot(v, e):  # pragma: no cover - compiled
    """SaturatingRoundingMultiplyByPOT<e> for e > 0."""
    thr = (np.int64(1) << (31 - e)) - 1
    if v > thr:
        return np.int64(_INT32_MAX)
    if v < -thr:
        return np.int64(_INT32_MIN)
    return v << e


@numba.njit(cache=True, inline="always")
def _bit_length(x):  # pragma: no cover - compiled
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


@numba.njit(cache=True)
def _reciprocal(total):  # pragma: no cover - compiled
    """``GetReciprocal(total, 12)`` for 0 < total < 2^31: (Q0.31 recip, num_bits_over_unit)."""
    hp1 = 32 - _bit_length(total)
    shifted = (total << hp1) - 2147483648
    s = shifted + _INT32_MAX  # RoundingHalfSum(shifted, One)
    s += 1 if s >= 0 else -1
    half_den = (s >> 1) if s >= 0 else -((-s) >> 1)
    x = wrap32(1515870810 + srdhm(half_den, -1010580540))
    for _ in range(3):
        one_minus = wrap32((1 << 29) - srdhm(half_den, x))
        x = wrap32(x + _sat_mul_pot(srdhm(x, one_minus), 2))
    return _sat_mul_pot(x, 1), 12 - hp1


@numba.njit(cache=True)
def _ref8(x, E, R, valid, out_bits, out_min, lo, hi, out):  # pragma: no cover - compiled
    rows, depth = x.shape
    for r in range(rows):
        m = np.int64(x[r, 0])
        for j in range(depth):
            m = max(m, np.int64(x[r, j]))
        total = np.int64(0)
        for j in range(depth):
            total += R[np.int64(x[r, j]) - m + 255]
        if total <= 0 or total >= 2147483648:
            return False
        recip, over = _reciprocal(total)
        exponent = over + 31 - out_bits
        if exponent < 0 or exponent > 62:
            return False
        for j in range(depth):
            k = np.int64(x[r, j]) - m + 255
            y = min(max(rdbp(srdhm_pos(E[k], recip), exponent) + out_min, lo), hi)
            out[r, j] = y if valid[k] else out_min
    return True


@numba.njit(cache=True)
def _ref16(x, E, inv_lut, out):  # pragma: no cover - compiled
    rows, depth = x.shape
    for r in range(rows):
        m = np.int64(x[r, 0])
        for j in range(depth):
            m = max(m, np.int64(x[r, j]))
        total = np.int64(0)
        for j in range(depth):
            total += np.int64(E[np.int64(x[r, j]) - m + 65535])
        if total < 2 or total >= 2147483648:
            return False
        hp1 = 32 - _bit_length(total)
        shifted = ((total << (hp1 - 1)) + (1 << 13)) >> 14
        v = min(max(shifted - ((1 << 15) + (1 << 16)), -32768), 32767)
        idx = 256 + (v >> 7)
        base = inv_lut[idx]
        rr = base + (((inv_lut[idx + 1] - base) * (v & 0x7F) + 64) >> 7)
        recip = ((rr + 32768) & 0xFFFF) - 32768
        rs = 31 - hp1
        half = np.int64(1) << (rs - 1)
        for j in range(depth):
            e = np.int64(E[np.int64(x[r, j]) - m + 65535])
            out[r, j] = min(max((e * recip + half) >> rs, 0), 32767)
    return True


@numba.njit(cache=True)
def _opt_float(x, table, so, zo, uint8_out, lo, hi, out):  # pragma: no cover - compiled
    rows, depth = x.shape
    for r in range(rows):
        m = np.int64(x[r, 0])
        for j in range(depth):
            m = max(m, np.int64(x[r, j]))
        total = np.float32(0.0)
        for j in range(depth):
            total += table[255 - m + np.int64(x[r, j])]
        inv = np.float32(1.0) / np.float32(total * so)
        if not (inv < np.float32(4.0e18)):  # also rejects inf / NaN; entries <= 1 so e * inv < 2^62
            return False
        for j in range(depth):
            prob = np.float32(table[255 - m + np.int64(x[r, j])] * inv)
            if uint8_out:
                v = np.int64(np.trunc(np.float32(prob + np.float32(0.5))))
            else:
                t = np.trunc(prob)
                if abs(np.float32(prob - t)) >= np.float32(0.5):
                    t = np.float32(t + (np.float32(1.0) if prob > 0 else np.float32(-1.0)))
                v = np.int64(t) + zo
            out[r, j] = min(max(v, lo), hi)
    return True


def _build(p: dict):
    """Per-plan tables: ('ref8', E, R, valid, ...), ('ref16', E, inv_lut) or ('float', ...)."""
    if getattr(p, "uint16_lut", False):
        return None
    if getattr(p, "float_lut", False):
        table = np.ascontiguousarray(p.table, np.float32)
        if table.shape != (256,) or not (np.all(np.isfinite(table)) and table.min() >= 0 and table.max() <= 1):
            return None  # beta <= 0 or NaN scales: not covered
        lo, hi = qrange(p.dtype)
        return ("float", table, np.float32(p.inv_scale_of),
                int(p.zo), p.dtype == "uint8", lo, hi)
    if not hasattr(p, "int16"):
        return None
    if p.int16:
        d = np.arange(-65535, 1, dtype=_I64)
        scaled = mbqm(d, p.multiplier, p.shift, p.rounding) + 32767
        E = lut.lut_lookup_int16(np.clip(scaled, -32768, 32767), p.exp_lut).astype(_I64)
        if E.min() < 0 or E.max() > 32767:
            return None
        return ("ref16", np.ascontiguousarray(E, np.int32), np.ascontiguousarray(p.inv_lut, _I64))
    d = np.arange(-255, 1, dtype=_I64)
    valid = d >= p.diff_min
    z = mbqm(np.where(valid, d, 0), p.multiplier, p.left_shift, p.rounding)
    E = gemmlowp.exp_on_negative_values(z, 5).astype(_I64)
    if E.min() < 0:
        return None
    R = np.where(valid, np_rdbp(E, 12), 0).astype(_I64)
    lo, hi = qrange(p.dtype)
    return ("ref8", E, R, valid, int(p.out_bits), int(p.out_min), lo, hi)


_IN_TYPES = {"ref8": (np.int8, np.uint8), "float": (np.int8, np.uint8), "ref16": (np.int16,)}


def fast_softmax(p: dict, x) -> np.ndarray | None:
    """The 8-bit / int16 SOFTMAX of ``softmax.softmax`` or ``optimized.misc.softmax`` (by the plan's
    keys), or None when not covered."""
    t = prepared(p, "softmax", _build)
    x = np.asarray(x)
    if t is None or x.dtype not in _IN_TYPES[t[0]] or x.ndim == 0 or x.size == 0:
        return None
    depth = x.shape[-1]
    x2 = np.ascontiguousarray(x).reshape(-1, depth)
    out = np.empty(x2.shape, np.dtype(p.dtype))
    if t[0] == "ref8":
        if depth >= 4096:  # the Q12 sum could pass 2^31
            return None
        ok = _ref8(x2, *t[1:], out)
    elif t[0] == "ref16":
        ok = _ref16(x2, t[1], t[2], out)
    else:
        ok = _opt_float(x2, *t[1:], out)
    return out.reshape(x.shape) if ok else None
