"""Fast ONNX Runtime QLinearAdd (x86 FMA form, refinterp/quant/mlas.py ``qladd_x86``), bit-exact
with the NumPy path of refinterp/kernels/onnxruntime/elementwise.py (None when not covered: broadcasting,
non 8-bit codes, non-finite ratios).

Per element (codes already shifted by ``shift``, the int8_as_uint8 re-encoding):
``t = f32(f64(a) * f64(rA) + f64(f32(f64(b) * f64(rB) + f64(Fixed))))``: each product of a code
below 2^9 and a float32 is exact in float64 and each float64 sum is rounded once to float32, the
same operations as ``mlas.fma_f32``; then ``y = clamp(RNE(t), lo, hi) - shift``.  RNE of the
clamped value by the float32 magic-number add (|t| <= 2^22 after the clamp).
"""
from __future__ import annotations

import numba
import numpy as np

from ..prepared import prepared

_MAGIC = np.float32(12582912.0)  # 1.5 * 2^23
F32 = np.float32


@numba.njit(cache=True)
def _qladd(a, b, ra, rb, fixed, shift, flo, fhi, out):  # pragma: no cover - compiled
    for i in range(a.size):
        t1 = np.float32(np.float64(np.int32(b[i]) + shift) * rb + fixed)
        t = np.float32(np.float64(np.int32(a[i]) + shift) * ra + np.float64(t1))
        if t < flo:
            t = flo
        elif t > fhi:
            t = fhi
        out[i] = np.int32((t + _MAGIC) - _MAGIC) - shift


def _consts(p):
    """(ra, rb, fixed) of the FMA form, or () when a constant is not finite (the NumPy path)."""
    (sa, za), (sb, zb), (sc, zc) = p.a, p.b, p.c
    from refinterp.quant.mlas import fma_f32

    with np.errstate(all="ignore"):
        ra, rb = F32(sa) / F32(sc), F32(sb) / F32(sc)
        fixed = F32(F32(zc) - fma_f32(ra, F32(za), F32(rb * F32(zb))))
    if not (np.isfinite(ra) and np.isfinite(rb) and np.isfinite(fixed)):
        return ()
    return np.float64(ra), np.float64(rb), np.float64(fixed)


def fast_ort_add(p, a, b) -> np.ndarray | None:
    """QLinearAdd for same-shape 8-bit ``a`` and ``b`` under ``impl`` fma_x86."""
    a, b = np.asarray(a), np.asarray(b)
    if (p.impl != "fma_x86" or a.shape != b.shape or a.dtype.name not in ("int8", "uint8")
            or b.dtype.name not in ("int8", "uint8") or p.dtype not in ("int8", "uint8")
            or not (-256 <= p.lo <= p.hi <= 255)):
        return None
    c = prepared(p, "ort_add_consts", _consts)
    if not c:
        return None
    out = np.empty(a.shape, p.dtype)
    _qladd(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1), c[0], c[1], c[2],
           np.int32(p.shift), F32(p.lo), F32(p.hi), out.reshape(-1))
    return out
