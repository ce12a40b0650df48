"""Branch-free scalar rescale forms for Numba element loops.

Each form takes an int32-valued ``v`` (int64) and constants fixed per plan, so a loop calling it
has no data-dependent branch (the ``if`` below are selects) and LLVM vectorises it:

* ``mbqm_double(v, M, left, right)``: ``RDBP(SRDHM(wrap32(v << left), M), right)`` (gemmlowp);
* ``mbqm_upward(v, M, left, right)``: ``(SRDHM(wrap32(v << left), M) + 2^(right-1)) >> right``;
* ``mbqm_single(v, M, total)``: ``(v * M + 2^(total-1)) >> total``, total = 31 - shift;
* ``vqrdmulh_rdbp(v, M, right)``: ``RDBP((v * M + 2^30) >> 31, right)`` (NEON int16 ADD output).

Contract: 0 <= M < 2^31 (so SRDHM's INT32_MIN * INT32_MIN saturation cannot occur),
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
    return rdbp((v * M + 1073741824) >> 31, right)


def forms(M: int, shift: int, rounding) -> tuple[int, int, int, int] | None:
    """(form code, M, a, b) for the loops: double/upward (M, left, right), single (M, total, 0)."""
    code = FORMS.get(Rounding.parse(rounding))
    M, shift = int(M), int(shift)
    if code is None or not (0 <= M < 2 ** 31) or not (-31 <= shift <= 30):
        return None
    if code == 2:
        return code, M, 31 - shift, 0
    return code, M, max(shift, 0), max(-shift, 0)
