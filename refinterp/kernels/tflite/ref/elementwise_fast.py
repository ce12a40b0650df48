"""Fast TFLite / XNNPACK integer ADD and SUB, bit-exact with the NumPy kernels they replace:
``elementwise.run_add_sub`` (LiteRT reference / TFLM, 8-bit and int16, general and power-of-two),
``optimized.elementwise.add`` (LiteRT optimized int16 NEON blocks) and ``xnnpack.elementwise._run_add``.

Reference forms (one loop per rounding form of the plan, every rescale inline and branch-free
so LLVM vectorises it; constants ``(M, left, right)`` / ``(M, total, 0)`` fixed per plan, see
``fixed_forms``): ``A = rescale((a - z1) << ls)``, ``B`` likewise, ``s = wrap32(A +- B)``,
``out = clamp(rescale(s) + zo, lo, hi)``; |(q - z) << ls| < 2^31 so every product is < 2^62.
8-bit plans also run that loop once over all 65536 (a, b) pairs and look the output up in that
table for calls of >= 32768 elements (smaller calls compute: the table is cold between nodes).
Optimized int16 ADD: the NEON formula on the first 16 * floor(n / 16) elements, the reference on
the rest.  Power-of-two int16: ``RDBP(a, r1) +- RDBP(b, r2)`` clamped to int16 and the activation.
XNNPACK: ``((bias + a*ma + b*mb) >> shift) + zo`` in int64 (|terms| < 2^31), clamped.
Anything else (other roundings, mixed dtypes, M outside [0, 2^31)) returns None.
"""
from __future__ import annotations

import numba
import numpy as np

from ...prepared import prepared
from refinterp.quant.fixedpoint_nb import forms, mbqm_double, mbqm_single, mbqm_upward, rdbp, srdhm_pos, vqrdmulh_rdbp, wrap32

_NEON_BLOCK = 16


@numba.njit(cache=True)
def _ref_double(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    """k* = (M, left, right) of each rescale; neg = -1 for SUB (B negated branch-free), 0 for ADD."""
    for i in range(a.size):
        A = mbqm_double((np.int64(a[i]) - z1) << ls, k1[0], k1[1], k1[2])
        B = mbqm_double((np.int64(b[i]) - z2) << ls, k2[0], k2[1], k2[2])
        s = wrap32(A + ((B ^ neg) - neg))
        out[i] = min(max(mbqm_double(s, ko[0], ko[1], ko[2]) + zo, lo), hi)


@numba.njit(cache=True)
def _ref_upward(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    for i in range(a.size):
        A = mbqm_upward((np.int64(a[i]) - z1) << ls, k1[0], k1[1], k1[2])
        B = mbqm_upward((np.int64(b[i]) - z2) << ls, k2[0], k2[1], k2[2])
        s = wrap32(A + ((B ^ neg) - neg))
        out[i] = min(max(mbqm_upward(s, ko[0], ko[1], ko[2]) + zo, lo), hi)


@numba.njit(cache=True)
def _ref_single(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    for i in range(a.size):
        A = mbqm_single((np.int64(a[i]) - z1) << ls, k1[0], k1[1])
        B = mbqm_single((np.int64(b[i]) - z2) << ls, k2[0], k2[1])
        s = wrap32(A + ((B ^ neg) - neg))
        out[i] = min(max(mbqm_single(s, ko[0], ko[1]) + zo, lo), hi)


@numba.njit(cache=True)
def _ref_double_r(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    """``_ref_double`` when every left shift is 0: the int32 wraps of the operands are identities
    (|(q - z) << ls| < 2^31, and s is wrapped already), so they are left out."""
    for i in range(a.size):
        A = rdbp(srdhm_pos((np.int64(a[i]) - z1) << ls, k1[0]), k1[2])
        B = rdbp(srdhm_pos((np.int64(b[i]) - z2) << ls, k2[0]), k2[2])
        s = wrap32(A + ((B ^ neg) - neg))
        out[i] = min(max(rdbp(srdhm_pos(s, ko[0]), ko[2]) + zo, lo), hi)


@numba.njit(cache=True)
def _ref_upward_r(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    """``_ref_upward`` when every left shift is 0 (see ``_ref_double_r``)."""
    for i in range(a.size):
        A = (srdhm_pos((np.int64(a[i]) - z1) << ls, k1[0]) + ((np.int64(1) << k1[2]) >> 1)) >> k1[2]
        B = (srdhm_pos((np.int64(b[i]) - z2) << ls, k2[0]) + ((np.int64(1) << k2[2]) >> 1)) >> k2[2]
        s = wrap32(A + ((B ^ neg) - neg))
        out[i] = min(max(((srdhm_pos(s, ko[0]) + ((np.int64(1) << ko[2]) >> 1)) >> ko[2]) + zo, lo), hi)


@numba.njit(cache=True)
def _neon(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    """NEON int16 ADD blocks: k* = (M, left, right) of vshlq_s32 (wrapping left / flooring right
    shift) then vqrdmulh; output vqrdmulh then RDBP(ko[2]); lo/hi within the int16 range."""
    for i in range(a.size):
        x = (wrap32((np.int64(a[i]) - z1) << k1[1]) >> k1[2]) * k1[0]
        y = (wrap32((np.int64(b[i]) - z2) << k2[1]) >> k2[2]) * k2[0]
        s = wrap32(((x + 1073741824) >> 31) + ((y + 1073741824) >> 31))
        out[i] = min(max(vqrdmulh_rdbp(s, ko[0], ko[2]) + zo, lo), hi)


@numba.njit(cache=True)
def _pot(a, b, z1, z2, ls, k1, k2, neg, ko, zo, lo, hi, out):  # pragma: no cover - compiled
    """Power-of-two int16: RDBP(a, k1[2]) +- RDBP(b, k2[2]) (one exponent is 0), saturated to
    int16 and clamped (lo/hi within the int16 range)."""
    for i in range(a.size):
        B = rdbp(np.int64(b[i]), k2[2])
        out[i] = min(max(rdbp(np.int64(a[i]), k1[2]) + ((B ^ neg) - neg), lo), hi)


@numba.njit(cache=True)
def _lut2(a, b, L, out):  # pragma: no cover - compiled
    """8-bit: out = L[(a & 0xFF) << 8 | (b & 0xFF)] (unsigned index: no wraparound branch)."""
    for i in range(a.size):
        out[i] = L[(np.uint64(np.uint8(a[i])) << np.uint64(8)) | np.uint64(np.uint8(b[i]))]


@numba.njit(cache=True)
def _xnn_loop(a, b, ma, mb, bias, shift, zo, lo, hi, out):  # pragma: no cover - compiled
    for i in range(a.size):
        acc = bias + np.int64(a[i]) * ma + np.int64(b[i]) * mb
        out[i] = min(max((acc >> shift) + zo, lo), hi)


_LOOPS = (_ref_double, _ref_upward, _ref_single)
_LOOPS_R = (_ref_double_r, _ref_upward_r, _ref_single)
_LUT_MIN = 32768  # smaller calls compute: the 64 KB table is mostly cold between nodes


def _ref_build(p: dict):
    """[(loop, args between the operands and ``out``, dtype), its pair table (built lazily),
    whether a pair table applies (8-bit)] for a reference ADD/SUB plan, or None."""
    dt = p.dtype
    if dt not in ("int8", "uint8", "int16"):
        return None
    lo, hi = (int(v) for v in p.clamp)
    neg = -1 if p.sub else 0
    if p.pot:
        s1, s2 = int(p.shift1), int(p.shift2)
        if dt != "int16" or s1 > 0 or s2 > 0 or s1 < -31 or s2 < -31:
            return None
        k1, k2 = (0, 0, -s1 if s1 else 0), (0, 0, -s2 if s1 == 0 else 0)
        return [(_pot, (0, 0, 0, k1, k2, neg, (0, 0, 0), 0, max(lo, -32768), min(hi, 32767)), np.dtype(dt)), None,
                False]
    info = np.iinfo(np.dtype(dt))
    span = max(max(abs(int(info.min) - int(z)), abs(int(info.max) - int(z))) for z in (p.z1, p.z2))
    if span << int(p.left_shift) >= 1 << 31:  # zero points far outside the range: NumPy path
        return None
    r = p.rounding
    fs = [forms(getattr(p, m), getattr(p, e), r) for m, e in (("m1", "e1"), ("m2", "e2"), ("mo", "eo"))]
    if any(f is None for f in fs):
        return None
    k1, k2, ko = (tuple(f[1:]) for f in fs)
    loops = _LOOPS_R if fs[0][0] != 2 and k1[1] == k2[1] == ko[1] == 0 else _LOOPS
    t = (loops[fs[0][0]], (int(p.z1), int(p.z2), int(p.left_shift), k1, k2, neg, ko, int(p.zo),
                           lo, hi), np.dtype(dt))
    return [t, None, dt != "int16"]  # the pair table is built on the first large call


def _pair_table(t):
    """An 8-bit loop ``t`` turned into its 65536-entry table over every (a, b) pair, indexed
    ``(a & 0xFF) << 8 | (b & 0xFF)`` (one gather per element instead of three rescales)."""
    loop, args, dt = t
    codes = np.arange(256, dtype=np.uint8).view(dt)
    L = np.empty(65536, dt)
    loop(np.repeat(codes, 256), np.tile(codes, 256), *args, L)
    return _lut2, (L,), dt


def _operands(a, b, dt):
    """(shape, flat contiguous a, flat contiguous b) of dtype ``dt`` broadcast together, or None."""
    if a.dtype != dt or b.dtype != dt:
        return None
    if a.shape != b.shape:
        a, b = np.broadcast_arrays(a, b)
    return a.shape, np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)


def _run(t, a, b, n0: int = 0, n1: int | None = None, out=None):
    loop, args, dt = t
    ops = _operands(np.asarray(a), np.asarray(b), dt)
    if ops is None:
        return None
    shape, a1, b1 = ops
    if out is None:
        out = np.empty(shape, dt)
    loop(a1[n0:n1], b1[n0:n1], *args, out.reshape(-1)[n0:n1])
    return out


def pair_lookup(a, b, table, out) -> None:
    """out[i] = table[(a[i] & 0xFF) << 8 | (b[i] & 0xFF)] over 1-D 8-bit arrays (a 65536-entry table)."""
    _lut2(a, b, table, out)


def fast_add_sub(p: dict, a, b) -> np.ndarray | None:
    """``elementwise.run_add_sub(p, a, b)`` or None when not covered."""
    ts = prepared(p, "add_ref", _ref_build)
    if ts is None:
        return None
    t = ts[0]
    if ts[2] and max(np.size(a), np.size(b)) >= _LUT_MIN:
        if ts[1] is None:
            ts[1] = _pair_table(t)
        t = ts[1]
    loop, args, dt = t
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == dt
            and b.dtype == dt and a.flags.c_contiguous and b.flags.c_contiguous):
        out = np.empty(a.shape, dt)  # the common case without broadcasting or copies
        loop(a.reshape(-1), b.reshape(-1), *args, out.reshape(-1))
        return out
    return _run(t, a, b)


def _neon_build(p: dict):
    """(reference loop, NEON block loop) of an optimized int16 ADD plan, or None."""
    if p.dtype != "int16" or p.pot or not (-31 <= p.eo <= 0) or not (0 <= p.mo < 2 ** 31):
        return None
    ref = prepared(p, "add_ref", _ref_build)
    if ref is None:
        return None
    ref = ref[0]
    ls = int(p.left_shift)
    ks = []
    for m, e in (("m1", "e1"), ("m2", "e2")):
        sh = ls + int(getattr(p, e))
        if not (0 <= getattr(p, m) < 2 ** 31) or not (-31 <= sh <= 31):
            return None
        ks.append((int(getattr(p, m)), max(sh, 0), max(-sh, 0)))
    lo, hi = (int(v) for v in p.clamp)
    args = (int(p.z1), int(p.z2), ls, ks[0], ks[1], 0, (int(p.mo), 0, -int(p.eo)), int(p.zo),
            max(lo, -32768), min(hi, 32767))
    return ref, (_neon, args, np.dtype("int16"))


def fast_opt_add(p: dict, a, b) -> np.ndarray | None:
    """``optimized.elementwise.add(p, a, b)`` (reference formula; NEON int16 blocks of 16 when the
    shapes are equal, the last size % 16 elements by the reference formula) or None."""
    if not p.neon_int16:
        return fast_add_sub(p, a, b)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size < _NEON_BLOCK:
        return fast_add_sub(p, a, b)
    t = prepared(p, "add_neon", _neon_build)
    if t is None:
        return None
    ref, neon = t
    n = _NEON_BLOCK * (a.size // _NEON_BLOCK)
    out = _run(neon, a, b, 0, n)
    return None if out is None else _run(ref, a, b, n, None, out)


def _xnn_build(p: dict):
    dt = np.dtype(p.dtype)
    shift = int(p.shift)
    if dt not in (np.int8, np.uint8) or not (0 <= shift <= 62):
        return None
    lo, hi = (int(v) for v in p.clamp)
    return _xnn_loop, (int(p.a_multiplier), int(p.b_multiplier), int(p.bias), shift, int(p.zo), lo, hi), dt


def fast_xnn_add(p: dict, a, b) -> np.ndarray | None:
    """``xnnpack.elementwise._run_add(p, a, b)`` or None when not covered."""
    t = prepared(p, "add_xnn", _xnn_build)
    return None if t is None else _run(t, a, b)
