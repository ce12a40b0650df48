"""Fast ONNX QuantizeLinear (per tensor) / DequantizeLinear (per tensor or per axis), float32 <->
8-bit, bit-exact with refinterp/kernels/float/quantize.py (the NumPy path; None when a case is not
covered).

* QuantizeLinear: ``v = f32(x / scale)`` (float32 division, as NumPy's float32 / float32),
  RNE, ``+ zp``, clamp, NaN -> the int32 conversion's -2^31 (then clamped).  RNE by the float32
  magic-number add on ``clamp(v, -2^22, 2^22)``: values beyond +-2^22 saturate any 8-bit target
  either way, so the clamp changes no result.
* DequantizeLinear: ``f32(f32(q) - f32(zp)) * scale`` in float32 (NumPy: float32 array minus an
  8-bit zero point stays float32), per tensor or per axis (1-D scale / zero point).
"""
from __future__ import annotations

import numba
import numpy as np

_MAGIC = np.float32(12582912.0)  # 1.5 * 2^23
_BIG = np.float32(4194304.0)  # 2^22
_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@numba.njit(cache=True)
def _quantize(x, s, zp, lo, hi, out):  # pragma: no cover - compiled
    """Branch-free (selects only, so it vectorizes); zp, lo, hi int32 with lo >= -2^31 + 2^16 + zp,
    so NaN (the int32 conversion's -2^31, plus zp) always clamps to lo."""
    for i in range(x.size):
        v = x[i] / s
        nan = v != v
        v = np.float32(0.0) if nan else v
        v = _BIG if v > _BIG else v
        v = -_BIG if v < -_BIG else v
        r = np.int32((v + _MAGIC) - _MAGIC) + zp
        r = lo if r < lo else r
        r = hi if r > hi else r
        out[i] = lo if nan else r


@numba.njit(cache=True)
def _dequantize(x, zp, s, out):  # pragma: no cover - compiled
    for i in range(x.size):
        out[i] = (np.float32(x[i]) - zp) * s


@numba.njit(cache=True)
def _dequantize_axis(x, zp, s, out):  # pragma: no cover - compiled
    """x, out (outer, C, inner); zp, s float32 (C,)."""
    o_n, c_n, i_n = x.shape
    for o in range(o_n):
        for c in range(c_n):
            z, sc = zp[c], s[c]
            xr, orow = x[o, c], out[o, c]
            for i in range(i_n):
                orow[i] = (np.float32(xr[i]) - z) * sc


def _scalar(v, kinds: str):
    v = np.asarray(v)
    if v.size != 1 or v.dtype.kind not in kinds:
        return None
    return v.reshape(-1)[0]


def fast_quantize(plan, x, scale, zp) -> np.ndarray | None:
    dt, lo, hi = plan.target
    s = _scalar(scale, "f")
    if (plan.precision is not None or plan.block or x.dtype != np.float32 or s is None
            or s.dtype != np.float32 or _RANGES.get(np.dtype(dt).name) != (lo, hi)):
        return None
    z = 0 if zp is None else _scalar(zp, "iu")
    if z is None:
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, dt)
    _quantize(x.reshape(-1), s, np.int32(z), np.int32(lo), np.int32(hi), out.reshape(-1))
    return out


def fast_dequantize(plan, x, scale, zp) -> np.ndarray | None:
    """Per-tensor, or per-axis (one float32 scale and 8-bit zero point per index of ``axis``)."""
    scale = np.asarray(scale)
    if (plan.block or x.dtype.name not in _RANGES or scale.dtype != np.float32 or x.ndim == 0
            or plan.out not in (None, np.dtype(np.float32))):
        return None
    zpa = None if zp is None else np.asarray(zp)
    if zpa is not None and (zpa.dtype.name not in _RANGES or zpa.size != scale.size):
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape, np.float32)
    if scale.size == 1:
        z = np.float32(0 if zpa is None else zpa.reshape(-1)[0])
        _dequantize(x.reshape(-1), z, scale.reshape(-1)[0], out.reshape(-1))
        return out
    axis = plan.axis % x.ndim
    if scale.ndim != 1 or x.shape[axis] != scale.size:
        return None
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    shape3 = (outer, scale.size, x.size // max(1, outer * scale.size))
    z = np.zeros(scale.size, np.float32) if zpa is None else zpa.reshape(-1).astype(np.float32)
    _dequantize_axis(x.reshape(shape3), z, scale, out.reshape(shape3))
    return out
