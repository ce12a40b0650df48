"""The fixed-point primitives in Numba, each equal to its NumPy form in ``fixedpoint.py`` /
``requant.py`` (tests/unit/test_quant_fixedpoint_nb.py checks them against each other on edge values).

Scalar, ``inline="always"`` functions for Numba element loops.  Most are branch-free forms that
take an int32-valued ``v`` (int64) and constants fixed per plan, so a loop calling them
has no data-dependent branch (the ``if`` below are selects) and LLVM vectorises it:

* ``wrap32(v)``: two's-complement int32 wrap (``fixedpoint.wrap_int32``);
* ``srdhm(a, b)``: SaturatingRoundingDoublingHighMul for any int32 operands (``fixedpoint.srdhm``);
  ``srdhm_pos(a, M)`` the same for M >= 0 (no saturation case);
* ``rdbp(q, right)``: RoundingDivideByPOT (``fixedpoint.rdbp``);
* ``vqrdmulh(a, M)``: NEON's rounding doubling high half, ties up (``fixedpoint.vqrdmulh``);

Each form takes an int32-valued ``v`` (int64) and constants fixed per plan, so a loop calling it
has no data-dependent branch (the ``if`` below are selects) and LLVM vectorises it:

* ``mbqm_double(v, M, left, right)``: ``RDBP(SRDHM(wrap32(v << left), M), right)`` (gemmlowp);
* ``mbqm_upward(v, M, left, right)``: ``(SRDHM(wrap32(v << left), M) + 2^(right-1)) >> right``;
* ``mbqm_single(v, M, total)``: ``(v * M + 2^(total-1)) >> total``, total = 31 - shift;
* ``vqrdmulh_rdbp(v, M, right)``: ``RDBP((v * M + 2^30) >> 31, right)`` (NEON int16 ADD output).

* ``mbqm_pot(a, m, cp, cn, total)``: ``double`` / ``upward`` in one shift with ``pot_consts``.

Contract of the rescale forms: 0 <= M < 2^31 (so SRDHM's INT32_MIN * INT32_MIN saturation cannot occur),
0 <= left <= 31, 0 <= right <= 31, 1 <= total <= 62; every product < 2^62 in magnitude.
``forms(M, shift, rounding)`` returns the constants in that order, or None for other roundings.
"""
from __future__ import annotations

import numba
import numpy as np

from .requant import Rounding

FORMS = {Rounding.DOUBLE: 0, Rounding.UPWARD: 1, Rounding.SINGLE: 2}


@numba.njit(cache=True, inline="always")
def wrap32(v):  # pragma: no cover - compiled
    """Two's-complement wrap of an int64 to int32 (the shift keeps the low 32 bits, sign-extended)."""
    return (v << 32) >> 32


@numba.njit(cache=True, inline="always")
def srdhm_pos(a, M):  # pragma: no cover - compiled
    """SRDHM for int32 ``a`` and M >= 0: trunc((a*M + nudge) / 2^31) with nudge 2^30 (a*M >= 0) or
    1 - 2^30 equals floor((a*M + 2^30) / 2^31) in both cases (for a*M < 0: ceil(n / 2^31) =
    floor((n + 2^31 - 1) / 2^31) with n = a*M + 1 - 2^30)."""
    return (a * M + 1073741824) >> 31


@numba.njit(cache=True, inline="always")
def srdhm(a, b):  # pragma: no cover - compiled
    """SRDHM for any int32-valued operands: INT32_MAX for INT32_MIN * INT32_MIN, else
    floor((a*b + 2^30) / 2^31) (equal to gemmlowp's truncating form, see ``srdhm_pos``)."""
    if a == -2147483648 and b == -2147483648:
        return np.int64(2147483647)
    return (a * b + 1073741824) >> 31


@numba.njit(cache=True, inline="always")
def vqrdmulh(a, M):  # pragma: no cover - compiled
    """NEON vqrdmulh on int32 lanes, 0 <= M < 2^31: (a*M + 2^30) >> 31 (ties toward +inf)."""
    return (a * M + 1073741824) >> 31


@numba.njit(cache=True, inline="always")
def rdbp(q, right):  # pragma: no cover - compiled
    """gemmlowp RoundingDivideByPOT (ties away from zero), 0 <= right <= 62:
    floor((q + 2^(right-1) - [q < 0]) / 2^right) for right > 0, q itself for right == 0."""
    half = (np.int64(1) << right) >> 1
    return (q + half + ((q >> 63) & -(half != 0))) >> right


@numba.njit(cache=True, inline="always")
def mbqm_double(v, M, left, right):  # pragma: no cover - compiled
    return rdbp(srdhm_pos(wrap32(v << left), M), right)


@numba.njit(cache=True, inline="always")
def mbqm_upward(v, M, left, right):  # pragma: no cover - compiled
    return (srdhm_pos(wrap32(v << left), M) + ((np.int64(1) << right) >> 1)) >> right


@numba.njit(cache=True, inline="always")
def mbqm_single(v, M, total):  # pragma: no cover - compiled
    return (v * M + (np.int64(1) << (total - 1))) >> total


@numba.njit(cache=True, inline="always")
def vqrdmulh_rdbp(v, M, right):  # pragma: no cover - compiled
    return rdbp(vqrdmulh(v, M), right)


def pot_consts(M, shift, upward):
    """Per-channel (cp, cn, total shift) int64 arrays for ``mbqm_pot`` from ``M``
    (0 <= M < 2^31), ``shift`` (>= -31) and ``upward`` (bool): with e = max(-shift, 0) and
    h = 2^(e-1) (e > 0; else 0): cp = 2^30 + h * 2^31, cn = 2^31 if (double and e > 0) else 0,
    total = 31 + e."""
    e = np.maximum(-np.asarray(shift, np.int64), 0)
    h = np.where(e > 0, np.left_shift(np.int64(1), np.maximum(e - 1, 0)), 0)
    cn = np.where((e > 0) & ~np.asarray(upward, bool), np.int64(1) << 31, 0)
    return ((1 << 30) + h * (1 << 31)).astype(np.int64), cn.astype(np.int64), (31 + e).astype(np.int64)


@numba.njit(cache=True, inline="always")
def mbqm_pot(a, m, cp, cn, total):  # pragma: no cover - compiled
    """``double`` / ``upward`` MultiplyByQuantizedMultiplier of an int32-valued ``a`` (already the
    int32 wrap of ``v << left``) with 0 <= m < 2^31, right shift e <= 31, ``pot_consts``.

    SRDHM is q = floor((a*m + 2^30) / 2^31) (INT32_MIN * INT32_MIN cannot occur as m >= 0); the
    rounding right shift is floor((q + h') / 2^e) with h' = h - 1 for q < 0 in ``double`` (ties
    away from zero), h' = h in ``upward``.  Nested floors give one shift,
    floor((a*m + 2^30 + h'*2^31) / 2^(31+e)), and q < 0 iff a*m < -2^30.  |a*m| < 2^62 and
    h*2^31 <= 2^61: the int64 sum cannot overflow; the result fits int32.  Branch-free: one
    vpmuldq, add, masked sub and vpsravq per 8 lanes."""
    ab = np.int64(a) * np.int64(m)
    return (ab + cp - (cn & ((ab + 1073741824) >> 63))) >> total


def forms(M: int, shift: int, rounding) -> tuple[int, int, int, int] | None:
    """(form code, M, a, b) for the loops: double/upward (M, left, right), single (M, total, 0)."""
    code = FORMS.get(Rounding.parse(rounding))
    M, shift = int(M), int(shift)
    if code is None or not (0 <= M < 2 ** 31) or not (-31 <= shift <= 30):
        return None
    if code == 2:
        return code, M, 31 - shift, 0
    return code, M, max(shift, 0), max(-shift, 0)
