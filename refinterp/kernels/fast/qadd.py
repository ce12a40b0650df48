"""Fused TFLite 8-bit / general-int16 ADD and SUB in Numba, bit-exact with ``qelementwise``'s
``_run_add_sub`` (non power-of-two path).

Per element (int64 arithmetic; every intermediate int32-valued as in the NumPy form):
``A = mbqm((a - z1) << ls, m1, e1)``, ``B = mbqm((b - z2) << ls, m2, e2)``,
``s = wrap32(A +- B)``, ``out = clamp(mbqm(s, mo, eo) + zo, lo, hi)`` with the plan's rounding
(``double``, ``upward`` or ``single``; anything else -> None, the NumPy path runs).
Operands are broadcast with NumPy rules first.
"""
from __future__ import annotations

import numba
import numpy as np

from ...quant.requant import Rounding
from .requant import _CODES, _rescale, _wrap32


@numba.njit(cache=True)
def _add_sub(a, b, z1, z2, ls, m1, e1, m2, e2, mo, eo, zo, lo, hi, sub, code, out):  # pragma: no cover
    for i in range(a.size):
        A = _rescale((np.int64(a[i]) - z1) << ls, m1, e1, np.float32(0), 0.0, code)
        B = _rescale((np.int64(b[i]) - z2) << ls, m2, e2, np.float32(0), 0.0, code)
        s = _wrap32(A - B if sub else A + B)
        out[i] = min(max(_rescale(s, mo, eo, np.float32(0), 0.0, code) + zo, lo), hi)


def fast_add_sub(p: dict, a, b) -> np.ndarray | None:
    """``qelementwise._run_add_sub(p, a, b)`` or None when not covered."""
    if p.get("pot"):
        return None
    code = _CODES.get(Rounding.parse(p["rounding"]))
    if code is None or code > 2:
        return None
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray(b)
    out = np.empty(a.shape, np.dtype(p["dtype"]))
    lo, hi = p["clamp"]
    _add_sub(a.reshape(-1), b.reshape(-1), int(p["z1"]), int(p["z2"]), int(p["left_shift"]), int(p["m1"]),
             int(p["e1"]), int(p["m2"]), int(p["e2"]), int(p["mo"]), int(p["eo"]), int(p["zo"]), int(lo), int(hi),
             bool(p["sub"]), code, out.reshape(-1))
    return out
