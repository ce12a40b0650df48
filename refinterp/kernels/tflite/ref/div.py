"""TFLite integer DIV (int8 / uint8; variant ``tflite_ref``), ``reference_ops::DivElementwise`` (the
optimized resolver and TFLite Micro run the same code)::

    M, e = QuantizeMultiplier(s1 / (s2 * so))        float32 arithmetic (``impl: float64``: double)
    v1, v2 = a - z1, b - z2 ; v2 < 0: both negated     v2 == 0: LiteRT fails the run (InputError here)
    inv, over = GetReciprocal(v2, 31)                  Q0.31 of 1 / v2 (gemmlowp one_over_one_plus_x)
    h  = CountLeadingSignBits(v1)                      v1 normalised to the top of int32
    q  = MBQM_GreaterThanOne(v1, inv, h)               SRDHM(v1 << h, inv)
    out = clamp(zo + MBQM_SmallerThanOneExp(q, M, e - over - h))

Both multiplications follow the scheme's rounding (double: SRDHM then RoundingDivideByPOT).
|v1|, |v2| <= 255: every intermediate fits int32.  A dividend of 0 or -1 (normalised by 31 bits) with
a large divisor gives a final shift of 32 or more: gemmlowp's RoundingDivideByPOT then shifts by the
exponent modulo 32 (x86 ``sar``) with a mask truncated to int32, so such quotients come out as
``zo + 1`` (0 / v2) or saturated (-1 / v2): reproduced (measured on all three runtimes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError
from refinterp.quant.fixedpoint import quantize_multiplier, srdhm, wrap_int32
from refinterp.quant.gemmlowp import clz32, get_reciprocal
from ..common import activation_range, impl, mbqm, real_multiplier, rounding, where
from .elementwise import MulPlan, _binary_io
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

DIV_IMPLS = ("float32", "float64")  # how the real multiplier is formed


@dataclass(frozen=True)
class DivPlan(MulPlan):
    """MUL's fields (zero points, the real multiplier s1 / (s2 so) as (m, shift), clamp, rounding) and
    the node, named when a divisor equals its zero point."""
    where: str = ""


def prepare_div(node, ctx) -> DivPlan:
    dt, s1, z1, s2, z2, so, zo = _binary_io(node, ctx, ("int8", "uint8"))
    M, e = quantize_multiplier(real_multiplier((s1,), (s2, so), impl(ctx, DIV_IMPLS, "float32") == "float64"))
    lo, hi = activation_range(node.attrs.get("activation"), so, zo, dt, node)
    return DivPlan(z1, z2, zo, M, e, (lo, hi), rounding(ctx).value, dt, where=where(node))


def _rdbp_x86(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT on int32 for any exponent >= 0, as compiled for x86: the mask
    (1ll << e) - 1 truncated to int32, the shift count taken modulo 32."""
    x = np.asarray(x, np.int64)
    e = np.asarray(e, np.int64)
    mask = wrap_int32((np.int64(1) << np.minimum(e, 62)) - 1)
    rem = wrap_int32(x & mask)
    thr = (mask >> 1) + (x < 0)
    return (x >> (e & 31)) + (rem > thr)


def _clrsb(v: np.ndarray) -> np.ndarray:
    """CountLeadingSignBits of int32 values (0 -> 31)."""
    return clz32(np.where(v < 0, -v - 1, v)) - 1


@kernel("Div", "tflite_ref", prepare=prepare_div, impls=DIV_IMPLS)
def run_div(p: DivPlan, a, b):
    v1 = np.asarray(a).astype(np.int64) - p.z1
    v2 = np.asarray(b).astype(np.int64) - p.z2
    v1, v2 = np.broadcast_arrays(v1, v2)
    if np.any(v2 == 0):
        raise InputError(f"{p.where}: a divisor equals its zero point (LiteRT fails the run)")
    neg = v2 < 0
    v1, v2 = np.where(neg, -v1, v1), np.where(neg, -v2, v2)
    inv, over = get_reciprocal(v2, 31)
    h = _clrsb(v1)
    q = mbqm(v1, inv, h, p.rounding)  # per-element multiplier and shift (the requant forms broadcast)
    total = p.shift - over - h
    if p.rounding == "double":
        out = _rdbp_x86(srdhm(q, p.m), -total)
    else:
        out = mbqm(q, p.m, total, p.rounding)
    lo, hi = p.clamp
    return np.clip(out + p.zo, lo, hi).astype(p.dtype)
