"""Sin / Cos / Asin / Acos / Atan / Tan / Sinh / Cosh / Asinh / Acosh / Atanh variant ``ort_float``: ONNX
Runtime 1.32's CPU kernels on float32.  Sin, Cos, Asin, Acos and Atan are one Eigen array assignment ``Y = X.sin()``
(onnxruntime/core/providers/cpu/math/element_wise_ops.cc; Eigen's psincos_float in
GenericPacketMathFunctions.h, 4-float SSE packets, no FMA, no parallel-for); the other six run the
C library's float function on every element (tanf, sinhf, coshf, asinhf, acoshf, atanhf: measured,
0 of 10,003 values differ per op, while the float64 result rounded to float32 differs on 4-25%).

Which elements take which code: the output buffer is 64-byte aligned, so elements [0, 4 floor(N/4))
go through the packet code and the last N mod 4 through libm ``sinf`` / ``cosf``.

Packet code, per element (float32; a "madd" is a product and a sum rounded separately -- no FMA)::

    x  = |v|;  r = fl(fl(x * 2/pi) + 2^23 + 2^22)     (the rounding magic 12582912)
    q  = the low bits of r as an integer;  y = fl(r - 12582912)      nearest integer to x * 2/pi
    x  = madd(y, -1.5703125, x); madd(y, -4.83989715576171875e-4, x);
         madd(y, 1.62865035235881805e-7, x); madd(y, 5.56443155441677106e-11, x)
    |v| >= 25966 (Sin) / 18838 (Cos), finite: x, q from the Payne-Hanek reduction instead
         (192 bits of 2/pi, 2.62 fixed point, the remainder times pi/2 * 2^-62 in double)
    x2 = fl(x * x)
    cos poly c = 2.4372266e-5 then madd(c, x2, k) for k = -1.3886520e-3, 4.1666619e-2, -0.5, 1
    sin poly s = -1.9592341e-4 then madd(s, x2, k) for k = 8.3326874e-3, -0.16666662;
                 s = fl(s * x2); s = madd(s, x, x)
    Sin: (q even ? s : c) with sign bit(v) xor bit 1 of q;  Cos: (q even ? c : s) with sign bit 1 of q + 1

Asin (pasin_float): a = |v|; x = a <= 1/2 ? a : sqrtf(fl(1/2 - fl(1/2 * a))); x2 = fl(x * x);
p = 5.0883885e-2 then madd(p, x2, k) for k = 3.9513987e-2, 7.5502202e-2, 0.16664918, 1.0000001;
p = fl(p * x); a > 1/2: p = fl(pi/2 - fl(2 p)); the sign of v; |v| > 1: the NaN with every bit set.
Acos (pacos_float): x2 = fl(v * v); even = 2.3642320e-3, 2.7178435e-2, 8.8804089e-2, 1.5707964 and odd =
-1.1368644e-2, -4.8969544e-2, -0.21459121 by madd in x2; p = madd(odd, |v|, even);
r = fl(sqrtf(fl(1 - |v|)) * p); negative v: fl(pi - r).
Atan (generic_atan of the Eigen commit ORT pins, 1d8b82b0): a = |v|; x = a > 1 ? fl(1 / a) : a (a division:
Eigen's SSE reciprocal estimate is used with FMA only); x2 = fl(x * x); p = 0.112026982 then madd(p, x2, k)
for k = 0.729669571, 0.810995102; q = 1.00917108e-2 then madd(q, x2, k) for k = 0.283185601, 1, 0.810995102;
r = fl(x * fl(p / q)); a > 1: r = fl(pi/2 - r); the sign bit of v.  Tail: libm atanf.

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py); NumPy's sin /
cos differ on 5-18% of inputs, refinterp's generic Atan on about a third.  Other dtypes run the generic kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
_TWO_OVER_PI = np.array([
    0x00000028, 0x000028be, 0x0028be60, 0x28be60db, 0xbe60db93, 0x60db9391, 0xdb939105, 0x9391054a, 0x91054a7f,
    0x054a7f09, 0x4a7f09d5, 0x7f09d5f4, 0x09d5f47d, 0xd5f47d4d, 0xf47d4d37, 0x7d4d3770, 0x4d377036, 0x377036d8,
    0x7036d8a5, 0x36d8a566, 0xd8a5664f, 0xa5664f10, 0x664f10e4, 0x4f10e410, 0x10e41000, 0xe4100000], np.uint64)
_MASK32 = np.uint64(0xFFFFFFFF)


@numba.njit(cache=True)
def _reduce_huge(xf, table):  # pragma: no cover - compiled
    """Payne-Hanek: (remainder, quadrant) of finite xf >= 2^14 against 2/pi in 2.62-bit fixed point;
    every product below is exact in 64 bits (32 x 32 -> 64) or taken mod 2^32 / 2^64 as uint32 /
    uint64 arithmetic wraps."""
    m32 = np.uint64(0xFFFFFFFF)
    xi = np.uint64(np.array([xf], np.float32).view(np.uint32)[0])
    e = ((xi >> np.uint64(23)) - np.uint64(118)) & m32
    xi = (((xi & np.uint64(0x007FFFFF)) | np.uint64(0x00800000)) << (e & np.uint64(7))) & m32
    i = np.int64(e >> np.uint64(3))
    t1, t2, t3 = table[i - 1], table[i + 3], table[i + 7]
    p = xi * t3
    p = xi * t2 + (p >> np.uint64(32))
    p = (((xi * t1) & m32) << np.uint64(32)) + p
    q = (p + (np.uint64(1) << np.uint64(61))) >> np.uint64(62)
    p = p - (q << np.uint64(62))
    r = np.float32(np.float64(np.int64(p)) * 3.4061215800865545e-19)
    return r, np.int32(q)


@numba.njit(cache=True)
def _packet_sincos(v, sine, table):  # pragma: no cover - compiled
    """psincos_float on one element (module docstring), float32 out."""
    x = np.float32(abs(v))
    y = np.float32(x * np.float32(0.636619746685028076171875))
    yr = np.float32(y + np.float32(12582912.0))
    q = np.array([yr], np.float32).view(np.int32)[0]
    y = np.float32(yr - np.float32(12582912.0))
    x = np.float32(np.float32(y * np.float32(-1.5703125)) + x)
    x = np.float32(np.float32(y * np.float32(-0.000483989715576171875)) + x)
    x = np.float32(np.float32(y * np.float32(1.62865035235881805419921875e-07)) + x)
    x = np.float32(np.float32(y * np.float32(5.5644315544167710640977020375430583953857421875e-11)) + x)
    huge = np.float32(25966.0) if sine else np.float32(18838.0)
    ax = np.float32(abs(v))
    if ax >= huge and ax != np.inf:
        x, q = _reduce_huge(ax, table)
    vb = np.array([v], np.float32).view(np.int32)[0]
    if sine:
        sign = (vb ^ (q << 30)) & np.int32(-2147483648)
    else:
        sign = ((q + np.int32(1)) << 30) & np.int32(-2147483648)
    x2 = np.float32(x * x)
    c = np.float32(2.4372266125283204019069671630859375e-05)
    c = np.float32(np.float32(c * x2) + np.float32(-0.00138865201734006404876708984375))
    c = np.float32(np.float32(c * x2) + np.float32(0.041666619479656219482421875))
    c = np.float32(np.float32(c * x2) + np.float32(-0.5))
    c = np.float32(np.float32(c * x2) + np.float32(1.0))
    s = np.float32(-0.0001959234114083702898469196984621021329076029360294342041015625)
    s = np.float32(np.float32(s * x2) + np.float32(0.0083326873655616851693794799871284340042620897293090820312500000))
    s = np.float32(np.float32(s * x2) + np.float32(-0.1666666203982298255503735617821803316473960876464843750000000000))
    s = np.float32(s * x2)
    s = np.float32(np.float32(s * x) + x)
    even = (q & np.int32(1)) == 0
    r = (s if even else c) if sine else (c if even else s)
    rb = np.array([r], np.float32).view(np.int32)[0] ^ sign
    return np.array([rb], np.int32).view(np.float32)[0]


@numba.njit(cache=True)
def _sincos(x, out, hi, sine, table):  # pragma: no cover - compiled
    for i in range(x.size):
        if i < hi:
            out[i] = _packet_sincos(x[i], sine, table)
        elif sine:
            out[i] = math.sin(x[i])  # llvm.sin.f32: libm sinf
        else:
            out[i] = math.cos(x[i])  # libm cosf


_LIBM = ("Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")
_ARC = ("Asin", "Acos", "Atan")


def _madd(a, b, c):
    return ((a * b).astype(_F) + c).astype(_F)


def _packet_asin(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    large = a > _F(0.5)
    x = np.where(large, np.sqrt((_F(0.5) - (_F(0.5) * a).astype(_F)).astype(_F)), a).astype(_F)
    x2 = (x * x).astype(_F)
    p = _F(5.08838854730129241943359375e-2)
    for k in (3.95139865577220916748046875e-2, 7.550220191478729248046875e-2, 0.16664917767047882080078125,
              1.00000011920928955078125):
        p = _madd(p, x2, _F(k))
    p = (p * x).astype(_F)
    p = np.where(large, (_F(np.pi / 2) - (_F(2) * p).astype(_F)).astype(_F), p)
    bits = p.view(np.int32) ^ (v.view(np.int32) & np.int32(-2 ** 31))
    return np.where(a > _F(1), np.int32(-1), bits).astype(np.int32).view(_F)


def _packet_acos(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    x2 = (v * v).astype(_F)
    even = _madd(_F(2.36423197202384471893310546875e-3), x2, _F(2.717843465507030487060546875e-2))
    odd = _madd(_F(-1.1368644423782825469970703125e-2), x2, _F(-4.8969544470310211181640625e-2))
    even = _madd(even, x2, _F(8.8804088532924652099609375e-2))
    odd = _madd(odd, x2, _F(-0.214591205120086669921875))
    even = _madd(even, x2, _F(1.57079637050628662109375))
    r = (np.sqrt((_F(1) - a).astype(_F)) * _madd(odd, a, even)).astype(_F)
    return np.where(np.signbit(v), (_F(np.pi) - r).astype(_F), r).astype(_F)


def _packet_atan(v: np.ndarray) -> np.ndarray:
    a = np.abs(v)
    large = a > _F(1)
    x = np.where(large, (_F(1) / np.where(large, a, _F(1))).astype(_F), a).astype(_F)
    x2 = (x * x).astype(_F)
    p = _F(1.12026982009410858154296875e-01)
    for k in (7.296695709228515625e-01, 8.109951019287109375e-01):
        p = _madd(p, x2, _F(k))
    q = _F(1.00917108356952667236328125e-02)
    for k in (2.8318560123443603515625e-01, 1.0, 8.109951019287109375e-01):
        q = _madd(q, x2, _F(k))
    r = (x * (p / q).astype(_F)).astype(_F)
    r = np.where(large, (_F(np.pi / 2) - r).astype(_F), r).astype(_F)
    return (r.view(np.int32) ^ (v.view(np.int32) & np.int32(-2 ** 31))).view(_F)


@numba.njit(cache=True)
def _libm(x, out, code):  # pragma: no cover - compiled
    """The C library's float function on each element (llvm lowers math.* on float32 to tanf, ...)."""
    for i in range(x.size):
        v = x[i]
        if code == 8:
            out[i] = math.atan(v)
        elif code == 6:
            out[i] = math.asin(v)
        elif code == 7:
            out[i] = math.acos(v)
        elif code == 0:
            out[i] = math.tan(v)
        elif code == 1:
            out[i] = math.sinh(v)
        elif code == 2:
            out[i] = math.cosh(v)
        elif code == 3:
            out[i] = math.asinh(v)
        elif code == 4:
            out[i] = math.acosh(v)
        else:
            out[i] = math.atanh(v)


def ort_sincos(x: np.ndarray, sine: bool) -> np.ndarray:
    x = np.ascontiguousarray(x, _F)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    _sincos(flat, out, flat.size // 4 * 4, sine, _TWO_OVER_PI)
    return out.reshape(x.shape)


@dataclass(frozen=True)
class OrtTrigPlan:
    op: str
    generic: Any

    def describe(self) -> dict:
        how = "Eigen SSE packets, libm at the tail" if self.op in ("Sin", "Cos") + _ARC else "libm per element"
        return {"executed_by": f"ORT {self.op}: {how}"}


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    return OrtTrigPlan(node.op, d) if ok else d


@kernel(("Sin", "Cos") + _ARC + _LIBM, VARIANT, prepare=_prepare)
def ort_trig(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x)
    if plan.op in ("Sin", "Cos"):
        return ort_sincos(x, plan.op == "Sin")
    x = np.ascontiguousarray(x)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    with np.errstate(all="ignore"):
        if plan.op in _ARC:  # packets over 4 floor(N/4) elements of the aligned buffer, libm after
            hi = flat.size // 4 * 4
            out[:hi] = {"Asin": _packet_asin, "Acos": _packet_acos, "Atan": _packet_atan}[plan.op](flat[:hi])
            _libm(flat[hi:], out[hi:], 6 + _ARC.index(plan.op))
        else:
            _libm(flat, out, _LIBM.index(plan.op))
    return out.reshape(x.shape)
