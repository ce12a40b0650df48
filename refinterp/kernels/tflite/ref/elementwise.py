"""TFLite integer binary element-wise ops: ADD, SUB, MUL, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM.

Multipliers are computed in LiteRT's precision and order (``add.cc``, ``sub.cc``, ``mul.cc``,
``squared_difference.cc``); broadcasting follows NumPy rules (LiteRT's 6-D slow broadcast gives the
same element pairs).  All intermediate values are int32-valued (checked bounds in comments).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.settings import fast_kernels
from refinterp.quant.fixedpoint import (quantize_multiplier, quantize_multiplier_greater_than_one,
                                quantize_multiplier_smaller_than_one_exp, rdbp, wrap_int32)
from ..common import (activation_range, check_dtype, checked_log2, impl, mbqm, qparams, qrange, real_multiplier,
                      rounding, where)
from .elementwise_fast import fast_add_sub
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

_F = np.float32
_I64 = np.int64
_FAST = fast_kernels()


# ``impl`` values: int16 ADD / SUB pot_if_possible (LiteRT) | general_int16 (TFLM); MUL multiplier
# float32_multiplier (LiteRT mul.cc) | float64_multiplier (TFLM mul_common.cc).
ADD_IMPLS = ("pot_if_possible", "general_int16")
MUL_IMPLS = ("float32_multiplier", "float64_multiplier")


@dataclass(frozen=True)
class AddSubPlan:
    sub: bool
    clamp: tuple[int, int]
    dtype: str
    pot: bool = False  # int16 power-of-two scales: rounding shifts only
    shift1: int = 0
    shift2: int = 0
    left_shift: int = 0  # 20 (8-bit) | 15 (int16)
    z1: int = 0
    z2: int = 0
    zo: int = 0
    m1: int = 0
    e1: int = 0
    m2: int = 0
    e2: int = 0
    mo: int = 0
    eo: int = 0
    rounding: str = ""
    neon_int16: bool = False  # tflite_opt: the NEON int16 ADD path


@dataclass(frozen=True)
class MulPlan:
    z1: int
    z2: int
    zo: int
    m: int
    shift: int
    clamp: tuple[int, int]
    rounding: str
    dtype: str
    vector_width: int | None = None  # tflite_opt: the NEON lanes of the vectorised MUL


@dataclass(frozen=True)
class SqDiffPlan:
    z1: int
    z2: int
    zo: int
    m1: int
    e1: int
    m2: int
    e2: int
    mo: int
    eo: int
    rounding: str
    dtype: str


@dataclass(frozen=True)
class DtypePlan:
    dtype: str


def _binary_io(node, ctx, allowed):
    dt = check_dtype(ctx.inputs[0], node, allowed)
    if ctx.inputs[1].dtype != dt or ctx.outputs[0].dtype != dt:
        raise UnsupportedOpError(f"{where(node)}: mixed dtypes {ctx.inputs[0].dtype}, {ctx.inputs[1].dtype} "
                                 f"-> {ctx.outputs[0].dtype} are not supported")
    s1, z1 = qparams(ctx.inputs[0], node, "first input")
    s2, z2 = qparams(ctx.inputs[1], node, "second input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    return dt, s1, z1, s2, z2, so, zo


def _smaller_than_one(node, d: float, what: str) -> tuple[int, int]:
    try:
        return quantize_multiplier_smaller_than_one_exp(d)
    except ValueError:
        raise UnsupportedOpError(f"{where(node)}: {what} multiplier {d!r} is not in (0, 1) "
                                 f"(LiteRT aborts in Prepare)") from None


# --- ADD / SUB --------------------------------------------------------------------------------

def prepare_add_sub(is_sub: bool):
    def prepare(node, ctx):
        """8-bit and general int16: inputs shifted left by 20 (int16: 15) and rescaled to
        2*max(s1,s2); the sum rescaled to the output.  int16 with power-of-two scales and
        ``pot_scale_int16``: pure rounding shifts and a saturating int16 add/sub."""
        dt, s1, z1, s2, z2, so, zo = _binary_io(node, ctx, ("int8", "uint8", "int16"))
        lo, hi = activation_range(node.attrs.get("activation"), so, zo, dt, node)
        if dt == "int16":
            if z1 or z2 or zo:
                raise UnsupportedOpError(f"{where(node)}: int16 needs zero points of 0")
            pots = [checked_log2(s) for s in (s1, s2, so)]
            # impl "general_int16" (TFLM): the power-of-two path does not exist there.
            pot_path = impl(ctx, ADD_IMPLS, "pot_if_possible") == "pot_if_possible"
            if pot_path and node.attrs.get("pot_scale_int16", True) and all(p for p, _ in pots):
                sh1, sh2 = pots[0][1] - pots[2][1], pots[1][1] - pots[2][1]
                if not (sh1 == 0 or sh2 == 0) or sh1 > 0 or sh2 > 0:
                    raise UnsupportedOpError(f"{where(node)}: power-of-two int16 scales need one input "
                                             f"with the output scale and the other smaller")
                return AddSubPlan(is_sub, (lo, hi), dt, pot=True, shift1=sh1, shift2=sh2)
        ls = 15 if dt == "int16" else 20
        twice_max = float(_F(2) * max(s1, s2))  # float32, exact
        r1 = float(s1) / twice_max
        r2 = float(s2) / twice_max
        ro = twice_max / float(_F(_F(1 << ls) * so))
        M1, e1 = _smaller_than_one(node, r1, "input 1")
        M2, e2 = _smaller_than_one(node, r2, "input 2")
        if is_sub and ro > 1:
            Mo, eo = quantize_multiplier_greater_than_one(ro)
        else:
            Mo, eo = _smaller_than_one(node, ro, "output")
        return AddSubPlan(is_sub, (lo, hi), dt, left_shift=ls, z1=z1, z2=z2, zo=zo, m1=M1, e1=e1, m2=M2, e2=e2,
                          mo=Mo, eo=eo, rounding=rounding(ctx).value)
    return prepare


def run_add_sub(p, a, b):
    y = fast_add_sub(p, a, b) if _FAST else None
    if y is not None:
        return y
    a = a.astype(_I64)
    b = b.astype(_I64)
    lo, hi = p.clamp
    if p.pot:
        # int16 F0 fixed point: one operand is already on the output scale.
        if p.shift1 == 0:
            x, y = a, rdbp(b, -p.shift2)
        else:
            x, y = rdbp(a, -p.shift1), b
        s = x - y if p.sub else x + y  # saturating int16 add / sub
        return np.clip(np.clip(s, -32768, 32767), lo, hi).astype(p.dtype)
    r = p.rounding
    ls = p.left_shift
    # |(q - z) << 20| < 2^28 for 8-bit, |q << 15| < 2^31 for int16: int32-valued.
    A = mbqm((a - p.z1) << ls, p.m1, p.e1, r)
    B = mbqm((b - p.z2) << ls, p.m2, p.e2, r)
    s = wrap_int32(A - B if p.sub else A + B)
    out = mbqm(s, p.mo, p.eo, r) + p.zo
    return np.clip(out, lo, hi).astype(p.dtype)


# --- MUL --------------------------------------------------------------------------------------

def _mul_real_multiplier(ctx, s1, s2, so) -> float:
    """impl ``float32_multiplier`` (LiteRT ``mul.cc``): float32(float32(s1*s2)/so) widened to double;
    impl ``float64_multiplier`` (TFLM ``mul_common.cc``): double(s1)*double(s2)/double(so).
    The two differ in the last bits of M, enough for rare +-1 outputs (mostly int16)."""
    return real_multiplier((s1, s2), (so,), impl(ctx, MUL_IMPLS, "float32_multiplier") == "float64_multiplier")


def prepare_mul(node, ctx):
    """``mul.cc``: real multiplier (see ``_mul_real_multiplier``) -> QuantizeMultiplier;
    out = clamp(MBQM((a-z1)*(b-z2)) + zo) (int16 products of zero-point-free values < 2^30)."""
    dt, s1, z1, s2, z2, so, zo = _binary_io(node, ctx, ("int8", "uint8", "int16"))
    lo, hi = activation_range(node.attrs.get("activation"), so, zo, dt, node)
    M, s = quantize_multiplier(_mul_real_multiplier(ctx, s1, s2, so))
    return MulPlan(z1, z2, zo, M, s, (lo, hi), rounding(ctx).value, dt)


def run_mul(p, a, b):
    prod = wrap_int32((a.astype(_I64) - p.z1) * (b.astype(_I64) - p.z2))
    out = mbqm(prod, p.m, p.shift, p.rounding) + p.zo
    lo, hi = p.clamp
    return np.clip(out, lo, hi).astype(p.dtype)


# --- SQUARED_DIFFERENCE -----------------------------------------------------------------------

def _prepare_sqdiff(node, ctx):
    """``squared_difference.cc`` int8: left shift 7, inputs rescaled to 2*max(s1,s2), the squared
    difference (< 2^30) rescaled by (2*max)^2 / (2^14 * so)."""
    dt, s1, z1, s2, z2, so, zo = _binary_io(node, ctx, ("int8",))
    twice_max = float(_F(2) * max(s1, s2))
    M1, e1 = _smaller_than_one(node, float(s1) / twice_max, "input 1")
    M2, e2 = _smaller_than_one(node, float(s2) / twice_max, "input 2")
    ro = (twice_max * twice_max) / float(_F(_F(1 << 14) * so))
    Mo, eo = _smaller_than_one(node, ro, "output")
    return SqDiffPlan(z1, z2, zo, M1, e1, M2, e2, Mo, eo, rounding(ctx).value, dt)


def _run_sqdiff(p, a, b):
    r = p.rounding
    A = mbqm((a.astype(_I64) - p.z1) << 7, p.m1, p.e1, r)
    B = mbqm((b.astype(_I64) - p.z2) << 7, p.m2, p.e2, r)
    d = A - B
    out = mbqm(wrap_int32(d * d), p.mo, p.eo, r) + p.zo
    lo, hi = qrange(p.dtype)
    return np.clip(out, lo, hi).astype(p.dtype)


# --- MAXIMUM / MINIMUM ------------------------------------------------------------------------

def _prepare_maxmin(node, ctx):
    """Raw stored-integer max/min; LiteRT ignores the quantization parameters."""
    return DtypePlan(ctx.outputs[0].dtype)


def _run_max(p, a, b):
    return np.maximum(a, b).astype(p.dtype)


def _run_min(p, a, b):
    return np.minimum(a, b).astype(p.dtype)


kernel("Add", "tflite_ref", prepare=prepare_add_sub(False), impls=ADD_IMPLS)(run_add_sub)
kernel("Sub", "tflite_ref", prepare=prepare_add_sub(True), impls=ADD_IMPLS)(run_add_sub)
kernel("Mul", "tflite_ref", prepare=prepare_mul, impls=MUL_IMPLS)(run_mul)
kernel("SquaredDifference", "tflite_ref", prepare=_prepare_sqdiff)(_run_sqdiff)
kernel("Max", "tflite_ref", prepare=_prepare_maxmin)(_run_max)
kernel("Min", "tflite_ref", prepare=_prepare_maxmin)(_run_min)
