"""Requantizers: int accumulator -> rescaled integer, one function per backend rounding.

Signature contract (all integer forms)::

    requantize(acc, M, shift, rounding) -> int64 array

* ``acc``: int64 array of accumulators.  DOUBLE / UPWARD / SINGLE require int32-valued ``acc``
  (as the C++ does: the accumulator *is* an int32; DOUBLE/UPWARD wrap ``acc * 2^max(shift,0)``
  to int32 like the C++ int32 multiply).  MBQM64 takes |acc| < 2^47.
* ``M``, ``shift``: Python ints (per-tensor) or int64 arrays that broadcast with NumPy rules
  against ``acc``.  **Per-channel** arrays have shape ``(C,)`` and so broadcast along the *last*
  axis of ``acc`` (the NHWC / [batch, out] channel axis); for another channel axis reshape them
  to ``(C, 1, ..., 1)`` first.  ``M`` in [0, 2^31), ``shift`` in [-31, 30] (MBQM64: [-31, 7]).
* Result: the rescaled value *before* the output zero point is added and before clamping; it is
  int32-valued for every form except when the C++ itself would overflow.

Rounding forms (names are the scheme's ``requant.rounding`` values):

========================  =====================================================================
``double``                TFLite/TFLM/CMSIS-NN default: ``RDBP(SRDHM(acc*2^l, M), r)``
                          (l = max(shift,0), r = max(-shift,0)); SRDHM ties up, RDBP ties away
``upward``                ruy x86 / NEON ``vrshl`` path: ``(SRDHM(acc*2^l, M) + 2^(r-1)) >> r``
``single``                ``(acc*M + 2^(30-shift)) >> (31-shift)``: one rounding, ties up
``mbqm64``                16x8 int64-bias path: 16-bit reduced multiplier, single rounding
``pot``                   pure power-of-two: ``RDBP(acc, -shift)`` / ``acc << shift``; M ignored
``float64_half_away``     ``round_half_away(double(acc) * double(scale))`` (FC REF since 2025)
``float32_half_even``     ``rint(float32(acc) * float32(scale))`` (XNNPACK fp32)
========================  =====================================================================
The two float forms take a real ``scale`` instead of (M, shift): use ``requantize_float``.
"""
from __future__ import annotations

from enum import Enum

import numpy as np

from .fixedpoint import rdbp, srdhm, wrap_int32


class Rounding(str, Enum):
    DOUBLE = "double"
    UPWARD = "upward"
    SINGLE = "single"
    MBQM64 = "mbqm64"
    POT = "pot"
    FLOAT64_HALF_AWAY = "float64_half_away"
    FLOAT32_HALF_EVEN = "float32_half_even"

    @classmethod
    def parse(cls, value: "str | Rounding") -> "Rounding":
        if isinstance(value, Rounding):
            return value
        try:
            return cls(str(value))
        except ValueError:
            raise ValueError(f"unknown rounding '{value}' (expected one of: "
                             f"{', '.join(r.value for r in cls)})") from None

    @property
    def is_float(self) -> bool:
        return self in (Rounding.FLOAT64_HALF_AWAY, Rounding.FLOAT32_HALF_EVEN)


INTEGER_ROUNDINGS = tuple(r.value for r in Rounding if not r.is_float)
FLOAT_ROUNDINGS = tuple(r.value for r in Rounding if r.is_float)


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def mbqm_double(acc, M, shift) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` (default build): RDBP(SRDHM(acc*2^l, M), r)."""
    acc, M, shift = _i64(acc), _i64(M), _i64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rdbp(srdhm(wrap_int32(acc << left), M), right)


def mbqm_upward(acc, M, shift) -> np.ndarray:
    """SRDHM then a half-up rounding right shift (ruy x86, NEON ``vrshl``).  Also NEON's
    ``vqrdmulh`` + ``vrshl`` (LiteRT's custom GEMV on ARM): vqrdmulh's (x*M + 2^30) >> 31 equals
    SRDHM for every operand pair but the saturating INT32_MIN * INT32_MIN."""
    acc, M, shift = _i64(acc), _i64(M), _i64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    y = srdhm(wrap_int32(acc << left), M)
    half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)
    return (y + half) >> right


def mbqm_single(acc, M, shift) -> np.ndarray:
    """``TFLITE_SINGLE_ROUNDING``: (acc*M + 2^(30-shift)) >> (31-shift); |acc*M| < 2^62."""
    acc, M, shift = _i64(acc), _i64(M), _i64(shift)
    total = 31 - shift
    return (acc * M + (np.int64(1) << (total - 1))) >> total


def mbqm64(acc, M, shift) -> np.ndarray:
    """int64 ``MultiplyByQuantizedMultiplier`` (16x8 conv/FC with int64 bias).

    Mr = (M + 2^15) >> 16 (0x7FFF when M >= 0x7FFF0000), t = 15 - shift,
    result = int32((acc*Mr + 2^(t-1)) >> t) with the C++ int64->int32 cast (wrap).
    Needs |acc| < 2^47 so that acc*Mr fits int64.
    """
    acc, M, shift = _i64(acc), _i64(M), _i64(shift)
    mr = np.where(M < 0x7FFF0000, (M + (1 << 15)) >> 16, 0x7FFF)
    t = 15 - shift
    return wrap_int32((acc * mr + (np.int64(1) << (t - 1))) >> t)


def pot_shift(acc, shift) -> np.ndarray:
    """Power-of-two rescale: ``acc << shift`` for shift >= 0, RDBP(acc, -shift) otherwise."""
    acc, shift = _i64(acc), _i64(shift)
    return np.where(shift >= 0, acc << np.maximum(shift, 0), rdbp(acc, np.maximum(-shift, 0)))


_INT_FORMS = {
    Rounding.DOUBLE: mbqm_double,
    Rounding.UPWARD: mbqm_upward,
    Rounding.SINGLE: mbqm_single,
    Rounding.MBQM64: mbqm64,
}


def requantize(acc, M, shift, rounding: "Rounding | str") -> np.ndarray:
    """Rescale int accumulators by M * 2^(shift-31) with the given integer rounding form."""
    r = Rounding.parse(rounding)
    if r is Rounding.POT:
        return pot_shift(acc, shift)
    fn = _INT_FORMS.get(r)
    if fn is None:
        raise ValueError(f"requantize: rounding '{r.value}' is a float form; use requantize_float")
    return fn(acc, M, shift)


def requantize_float(acc, scale, mode: "Rounding | str") -> np.ndarray:
    """Float requantization: ``scale`` is the real multiplier (per-tensor or per-channel array,
    same broadcasting as ``requantize``) computed by the caller in the backend's precision.

    ``float64_half_away``: round_half_away(float64(acc) * float64(scale)) (LiteRT FC REF; exact
    products of int32 and double are not needed: the C++ rounds the double product too).
    ``float32_half_even``: rint(float32(acc) * float32(scale)) in float32 (XNNPACK fp32).
    """
    from .fixedpoint import round_half_away

    r = Rounding.parse(mode)
    acc = np.asarray(acc)
    if r is Rounding.FLOAT64_HALF_AWAY:
        y = round_half_away(acc.astype(np.float64) * np.asarray(scale, dtype=np.float64))
    elif r is Rounding.FLOAT32_HALF_EVEN:
        y = np.rint(acc.astype(np.float32) * np.asarray(scale, dtype=np.float32))
    else:
        raise ValueError(f"requantize_float: rounding '{r.value}' is an integer form; use requantize")
    # Saturate to int64-safe range before the cast (the callers clamp to the output dtype).
    return np.clip(y, -(2.0 ** 62), 2.0 ** 62).astype(np.int64)
