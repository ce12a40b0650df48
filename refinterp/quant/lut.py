"""Lookup-table builders of TFLite (``LUTPopulate`` in ``kernels/internal/common.h``).

Tables are built once per node at prepare time with the *C library* float functions (glibc
``expf``/``tanhf``/``erfcf``/``sqrtf`` via ctypes): NumPy's SIMD float32 transcendental
functions can differ from libm by 1 ulp, which flips table entries at rounding ties.
Every float expression is evaluated in the same precision and order as the C++ (float32 with a
rounding after each operation; ``double`` where the C++ uses double).

* ``lut_int8``: 256 entries, ``table[v - qmin]`` is the output for input code ``v``.
* ``lut_int16``: 513 entries for ``lut_lookup_int16`` (9-bit index + 7-bit linear interpolation).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
from typing import Callable

import numpy as np

from .fixedpoint import round_half_away
from .fma import fma_f32

_f32 = np.float32


def _load_libm():
    name = ctypes.util.find_library("m") or "libm.so.6"
    lib = ctypes.CDLL(name)
    for fn in ("expf", "expm1f", "tanhf", "erfcf", "sqrtf", "logf"):
        f = getattr(lib, fn)
        f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
    for fn in ("exp",):
        f = getattr(lib, fn)
        f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
    return lib


_LIBM = _load_libm()


def expf(x) -> np.float32:
    return _f32(_LIBM.expf(float(x)))


def expm1f(x) -> np.float32:
    return _f32(_LIBM.expm1f(float(x)))


def elu_expm1_f32(x) -> np.float32:
    """LiteRT's ELU transform: ``value < 0 ? std::expm1(value) : value`` (float)."""
    x = _f32(x)
    return expm1f(x) if x < 0 else x


def elu_exp_minus_one_f32(x) -> np.float32:
    """TFLite Micro's ELU transform: ``value < 0 ? std::exp(value) - 1.0f : value``."""
    x = _f32(x)
    return _f32(expf(x) - _f32(1.0)) if x < 0 else x


def tanhf(x) -> np.float32:
    return _f32(_LIBM.tanhf(float(x)))


def erfcf(x) -> np.float32:
    return _f32(_LIBM.erfcf(float(x)))


def sqrtf(x) -> np.float32:
    return _f32(_LIBM.sqrtf(float(x)))


def logf(x) -> np.float32:
    return _f32(_LIBM.logf(float(x)))


def exp_double(x) -> float:
    return float(_LIBM.exp(float(x)))


# --- float32 transforms exactly as written in the LiteRT kernels ------------------------------

def logistic_f32(x) -> np.float32:
    """``1.0f / (1.0f + std::exp(-value))``."""
    return _f32(_f32(1.0) / _f32(_f32(1.0) + expf(-_f32(x))))


def tanh_f32(x) -> np.float32:
    return tanhf(_f32(x))


_M_SQRT1_2 = 0.70710678118654752440
_SQRT_2_OVER_PI = _f32((2.0 / math.sqrt(math.pi)) * _M_SQRT1_2)  # constexpr float from doubles


def gelu_f32(x) -> np.float32:
    """``0.5f * in * erfcf(in * (float)(-M_SQRT1_2))``."""
    x = _f32(x)
    return _f32(_f32(_f32(0.5) * x) * erfcf(_f32(x * _f32(-_M_SQRT1_2))))


def gelu_approx_f32(x) -> np.float32:
    """``0.5f * in * (1.f + tanhf(kSqrt2dPi * (in + 0.044715f * in * in * in)))``."""
    x = _f32(x)
    cube = _f32(_f32(_f32(_f32(0.044715) * x) * x) * x)
    inner = _f32(_SQRT_2_OVER_PI * _f32(x + cube))
    return _f32(_f32(_f32(0.5) * x) * _f32(_f32(1.0) + tanhf(inner)))


def fma(a, b, c, ftype=np.float32):
    """``a * b + c`` with one rounding to ``ftype`` (round to nearest, ties to even): the fused
    multiply-add a compiler contracts ``x * y + z`` into on aarch64 (``quant/fma.py``)."""
    if ftype is np.float64:
        from fractions import Fraction

        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        return np.float64(float(exact))  # int / int true division: correctly rounded
    return np.float32(fma_f32(a, b, c))


def gelu_approx_f32_fma(x) -> np.float32:
    """``gelu_approx_f32`` as the aarch64 build evaluates it: ``in + (0.044715f * in * in) * in`` fused."""
    x = _f32(x)
    inner = _f32(_SQRT_2_OVER_PI * fma(_f32(_f32(_f32(0.044715) * x) * x), x, x))
    return _f32(_f32(_f32(0.5) * x) * _f32(_f32(1.0) + tanhf(inner)))


# --- table builders ---------------------------------------------------------------------------

def lut_int8(in_scale: float, in_zp: int, out_scale: float, out_zp: int,
             fn: Callable[[np.float32], np.float32], dtype: str = "int8") -> np.ndarray:
    """``LUTPopulateInt8``: table[v - qmin] = clamp(int32(roundf(fn(s_in*(v-z_in)) * (1/s_out))
    + (float)z_out)) for every code v of ``dtype`` (int8 / uint8)."""
    info = np.iinfo(dtype)
    inv = _f32(_f32(1.0) / _f32(out_scale))
    s_in = _f32(in_scale)
    out = np.empty(info.max - info.min + 1, np.int64)
    for k, v in enumerate(range(info.min, info.max + 1)):
        deq = _f32(s_in * _f32(v - in_zp))
        t = _f32(fn(deq))
        r = _f32(round_half_away(_f32(t * inv)))
        q = _f32(r + _f32(out_zp))
        qi = int(q) if np.isfinite(q) and abs(q) < 2.0 ** 31 else -(1 << 31)  # x86 cvttss2si
        out[k] = min(max(qi, info.min), info.max)
    return out


def lut_int16(in_scale: float, in_zp: int, out_scale: float, out_zp: int,
              fn: Callable[[float], float], double: bool = False, contract: bool = False) -> np.ndarray:
    """``LUTPopulateInt16<FloatT>``: 513-entry table over the full int16 input range, entries
    biased so that linear interpolation halves the midpoint error.  ``double`` selects
    FloatT = double (softmax int16) instead of float.  ``contract``: the aarch64 build, whose
    compiler fuses ``input_min + i * step`` and ``val_next * inv + round(val * inv)`` into FMAs."""
    F = np.float64 if double else np.float32

    def rnd(v):
        return F(round_half_away(F(v)))

    s_in, s_out = F(in_scale), F(out_scale)
    in_min = F(s_in * F(-32768 - in_zp))
    in_max = F(s_in * F(32767 - in_zp))
    out_min = F(s_out * F(-32768 - out_zp))
    out_max = F(s_out * F(32767 - out_zp))
    steps = 512
    step = F(F(in_max - in_min) / F(steps))
    half_step = F(step / F(2))
    inv = F(F(65536) / F(out_max - out_min))
    tmin, tmax = F(-32768), F(32767)
    lut = np.empty(steps + 1, np.int64)

    def mul_add(a, b, c):
        return fma(a, b, c, F) if contract else F(F(F(a) * F(b)) + F(c))

    for i in range(steps):
        x0 = mul_add(F(i), step, in_min)
        val = F(fn(x0))
        val_mid = F(fn(F(x0 + half_step)))
        val_next = F(fn(mul_add(F(i + 1), step, in_min)))
        sample = rnd(val * inv)
        mid_interp = rnd(F(mul_add(val_next, inv, rnd(val * inv)) / F(2)))
        mid_val = rnd(val_mid * inv)
        bias = rnd(F(F(mid_interp - mid_val) / F(2)))
        lut[i] = int(min(max(F(sample - bias), tmin), tmax))
    lut[steps] = int(min(max(rnd(F(fn(in_max)) * inv), tmin), tmax))
    return lut


def sigmoid_table_uint16() -> np.ndarray:
    """The 256-entry sigmoid(i/24) table in 0.16 format used by LiteRT / TFLM int16
    LOGISTIC and TANH (``reference_integer_ops``), generated: entry i (i < 255) is
    round(s(i) - (interpolated midpoint - s(i + 1/2)) / 2) with s(t) = 65536 * sigmoid(t/24),
    i.e. the sample biased by half the linear-interpolation error at the midpoint (ties away);
    the last entry is the full-scale 65535 (inputs at or beyond it saturate in the kernels)."""
    i = np.arange(256, dtype=np.float64)

    def s(t):
        return 65536.0 / (1.0 + np.exp(-t / 24.0))

    v = s(i)
    corr = ((s(i + 1) + v) / 2 - s(i + 0.5)) / 2
    out = round_half_away(v - corr).astype(np.int64)
    out[255] = 65535
    return np.minimum(out, 65535)


def lut_lookup_int16(values, lut: np.ndarray) -> np.ndarray:
    """``LUTLookup(int16)``: base = lut[256 + (v >> 7)], slope to the next entry, 7-bit
    fraction interpolated with ``(slope * (v & 127) + 64) >> 7``; result cast to int16 (wraps)."""
    v = np.asarray(values, dtype=np.int64)
    idx = 256 + (v >> 7)
    off = v & 0x7F
    base = lut[idx]
    slope = lut[idx + 1] - base
    r = base + ((slope * off + 64) >> 7)
    return ((r + 32768) & 0xFFFF) - 32768
