"""TFLite integer activations (LiteRT ``activations.cc`` / ``elementwise.cc``, TFLM ``logistic``/``tanh``).

Every op here is a function of one stored integer, so ``prepare`` evaluates the exact integer
formula once over *every* input code (256 for 8-bit, 65536 for int16) and ``run`` is a table
lookup.  The formulas (and the float32/double precision of their multipliers) are the C++
ones; see the per-op docstrings.  Requantizations use the scheme's rounding (``requant.rounding``,
TFLite default: gemmlowp double rounding).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from refinterp.quant import gemmlowp, lut
from refinterp.quant.fixedpoint import quantize_multiplier, rdbp, round_half_away, srdhm16
from ..common import (check_dtype, checked_log2, float_contract, impl, lookup, mbqm, qparams, qrange,
                      quantize_bound, real_multiplier, rounding, where)
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant", "float_contract")  # the scheme settings these kernels read

_F = np.float32


def _codes(dtype: str) -> np.ndarray:
    lo, hi = qrange(dtype)
    return np.arange(lo, hi + 1, dtype=np.int64)


@dataclass(frozen=True)
class TablePlan:
    """An 8/16-bit unary op as a table: ``table[code - lo]`` for every input code."""

    table: np.ndarray  # int64 output codes
    lo: int
    dtype: str
    info: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # how it was made
    alt_table: np.ndarray | None = None  # tflite_opt HARD_SWISH: the NEON lanes' table

    def describe(self) -> dict[str, Any]:
        d = {"table": self.table, "lo": self.lo, "dtype": self.dtype, **self.info}
        if self.alt_table is not None:
            d["neon_table"] = self.alt_table
        return d


def _plan(table: np.ndarray, dtype: str, **info) -> TablePlan:
    return TablePlan(np.asarray(table, np.int64), qrange(dtype)[0], dtype, MappingProxyType(info))


def _run_table(plan: TablePlan, x: np.ndarray) -> np.ndarray:
    return lookup(plan.table, x, plan.lo, plan.dtype)


def _io(node, ctx, allowed=("int8", "uint8", "int16")):
    dtype = check_dtype(ctx.inputs[0], node, allowed)
    if ctx.outputs[0].dtype != dtype:
        raise UnsupportedOpError(f"{where(node)}: input {dtype} and output {ctx.outputs[0].dtype} differ")
    sx, zx = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    return dtype, sx, zx, so, zo


def _need_zero_zp(node, dtype, *zps):
    if dtype == "int16" and any(z != 0 for z in zps):
        raise UnsupportedOpError(f"{where(node)}: int16 needs zero points of 0 (LiteRT Prepare fails)")


# ``impl`` values: RELU6 requantize (LiteRT) | input_domain (TFLM); LOGISTIC / TANH / int16 RSQRT
# lut (LiteRT) | fixed_point (TFLM).
RELU6_IMPLS = ("requantize", "input_domain")
TABLE_IMPLS = ("lut", "fixed_point")


# --- RELU family ------------------------------------------------------------------------------

def _prepare_relux(act_min: float, act_max: float | None, int16_ok: bool = True):
    def prepare(node, ctx):
        """``QuantizedReluX``: M,s = QuantizeMultiplier(float32(sx / so));
        out = clamp(zo + MBQM(q - zx), max(qmin, Q(act_min)), min(qmax, Q(act_max)))."""
        dtype, sx, zx, so, zo = _io(node, ctx, ("int8", "uint8", "int16") if int16_ok else ("int8", "uint8"))
        _need_zero_zp(node, dtype, zx, zo)
        if act_max == 6.0 and impl(ctx, RELU6_IMPLS, "requantize") == "input_domain":
            # TFLM RELU6: clamp the raw input codes to [zx, zx + round(6/sx)]; output params ignored.
            qlo, qhi = qrange(dtype)
            six = min(max(quantize_bound(6.0, sx, zx), qlo), qhi)
            return _plan(np.clip(_codes(dtype), zx, six), dtype, impl="input_domain", clamp=(zx, six))
        M, s = quantize_multiplier(float(_F(sx / so)))
        qlo, qhi = qrange(dtype)
        lo = max(qlo, quantize_bound(act_min, so, zo))
        hi = qhi if act_max is None else min(qhi, quantize_bound(act_max, so, zo))
        r = rounding(ctx)
        y = np.clip(zo + mbqm(_codes(dtype) - zx, M, s, r), lo, hi)
        return _plan(y, dtype, multiplier=M, shift=s, clamp=(lo, hi), rounding=r.value)
    return prepare


@kernel("Relu", "tflite_ref", prepare=_prepare_relux(0.0, None))
@kernel("Relu6", "tflite_ref", prepare=_prepare_relux(0.0, 6.0), impls=RELU6_IMPLS)
@kernel("ReluN1To1", "tflite_ref", prepare=_prepare_relux(-1.0, 1.0, int16_ok=False))
def _relux(plan, x):
    return _run_table(plan, x)


# --- LEAKY_RELU -------------------------------------------------------------------------------

# ``impl`` of LEAKY_RELU: ``abs_negate`` (LiteRT 2.3: float32 multipliers; a negative alpha multiplies
# by |M| and negates the result) | ``signed`` (tflite-runtime 2.14 on aarch64: the negative multiplier
# itself, so ties of the negative branch round the other way) | ``float64`` (TFLite Micro, measured on
# int16 SEANet layers: abs_negate with both multipliers derived in double, sx / so and sx * alpha / so;
# the float32 quotient moves a tie by one code on about 1 element in 5000)
LEAKY_IMPLS = ("abs_negate", "signed", "float64")


def prepare_leaky(node, ctx):
    """``QuantizeLeakyRelu``: identity (float32(sx/so)) and alpha (float32(float32(sx*alpha)/so))
    multipliers; a negative alpha multiplies by |M| and negates the result (``impl: signed``: by M)."""
    dtype, sx, zx, so, zo = _io(node, ctx)
    _need_zero_zp(node, dtype, zx, zo)
    alpha = _F(node.attrs.get("alpha", 0.01))
    how = impl(ctx, LEAKY_IMPLS, "abs_negate")
    Ma, sa = quantize_multiplier(real_multiplier((sx, alpha), (so,), how == "float64"))
    Mi, si = quantize_multiplier(real_multiplier((sx,), (so,), how == "float64"))
    r = rounding(ctx)
    v = _codes(dtype) - zx
    neg = -1 if Ma < 0 else 1
    if how == "signed":
        neg, Ma_used = 1, Ma
    else:
        Ma_used = abs(Ma)
    y = zo + np.where(v >= 0, mbqm(v, Mi, si, r), neg * mbqm(v, Ma_used, sa, r))
    lo, hi = qrange(dtype)
    return _plan(np.clip(y, lo, hi), dtype, multiplier_identity=Mi, shift_identity=si,
                 multiplier_alpha=Ma, shift_alpha=sa, rounding=r.value)


@kernel("LeakyRelu", "tflite_ref", prepare=prepare_leaky, impls=LEAKY_IMPLS)
def leaky(plan, x):
    return _run_table(plan, x)


# --- HARD_SWISH -------------------------------------------------------------------------------

def _m16(m: int) -> int:
    """``DownScaleInt32ToInt16Multiplier``: rounding >> 16, saturating at 32767."""
    return 32767 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16


def _sat16(v):
    return np.clip(v, -32768, 32767)


def prepare_hard_swish(node, ctx):
    """``reference_ops::HardSwish`` (8-bit): int16 fixed point, hires input scale sx/128, the
    "reluish" factor relu6(x+3)/6 in Q15; non-rounding (truncating) final doubling high mul."""
    dtype, sx, zx, so, zo = _io(node, ctx, ("int8", "uint8"))
    hires = _F(_F(1.0 / 128.0) * sx)
    Mo, eo = quantize_multiplier(float(_F(hires / so)))
    Mr, er = quantize_multiplier(float(_F(hires / _F(3.0 / 32768.0))))
    if eo > 0:
        raise UnsupportedOpError(f"{where(node)}: output multiplier exponent {eo} > 0 (LiteRT Prepare fails)")
    mo16, mr16 = _m16(Mo), _m16(Mr)
    v = _codes(dtype) - zx
    h = v * 128  # |v| <= 255: fits int16
    pre_out = srdhm16(h, mo16)
    rel = h
    if er > 0:
        rel = _sat16(rel * (1 << (er - 1)))
    rel = srdhm16(rel, mr16)
    if er > 0:
        rel = _sat16(rel * 2)
    if er < 0:
        rel = rdbp(rel, -er)
    rel = (rel + (1 << 15)) >> 1
    prod = rel * pre_out
    pre_shift = np.where(prod >= 0, prod >> 15, -((-prod) >> 15))  # C '/' by 2^15, no saturation case
    pre_shift = np.where((rel == -32768) & (pre_out == -32768), 32767, pre_shift)
    out = rdbp(pre_shift, -eo) + zo
    out = ((out + 32768) & 0xFFFF) - 32768  # the C++ adds the zero point in an int16 variable
    lo, hi = qrange(dtype)
    return _plan(np.clip(out, lo, hi), dtype, output_multiplier16=mo16, output_exponent=eo,
                 reluish_multiplier16=mr16, reluish_exponent=er)


@kernel("HardSwish", "tflite_ref", prepare=prepare_hard_swish)
def hard_swish(plan, x):
    return _run_table(plan, x)


# --- LOGISTIC / TANH --------------------------------------------------------------------------

def _fixed_point_input(sx: np.float32) -> tuple[int, int, int]:
    """TFLM Logistic/Tanh int8 prepare: frexp(double(sx) * 2^27) -> (M, left shift, radius)."""
    q, lsh = math.frexp(float(sx) * float(1 << 27))
    M = int(round_half_away(q * float(1 << 31)))
    if M >= (1 << 31):  # static_cast<int32_t>(2^31) on x86 (cvttsd2si): INT32_MIN
        M = -(1 << 31)
    radius = int(math.floor(15.0 * float(1 << 27) / math.ldexp(1.0, lsh)))
    return M, lsh, radius


def prepare_sigmoid_tanh(is_tanh: bool):
    def prepare(node, ctx):
        """``impl: lut`` = LiteRT REF/OPT (``LUTPopulate<int8_t>`` with libm expf/tanhf);
        ``impl: fixed_point`` = TFLM (gemmlowp logistic/tanh on a Q4.27 input)."""
        dtype, sx, zx, so, zo = _io(node, ctx)
        if dtype == "int16":
            return _prepare_int16_sigmoid_tanh(node, is_tanh, sx, zx, so, zo)
        if not is_tanh and (dtype == "int8" and float(so) != 1.0 / 256):
            raise UnsupportedOpError(f"{where(node)}: LOGISTIC int8 needs output scale 1/256 (got {so})")
        how = impl(ctx, TABLE_IMPLS, "lut")
        if how == "lut":
            fn = lut.tanh_f32 if is_tanh else lut.logistic_f32
            return _plan(lut.lut_int8(sx, zx, so, zo, fn, dtype), dtype, impl=how)
        if dtype != "int8":
            raise UnsupportedOpError(f"{where(node)}: impl fixed_point supports int8 only")
        if not is_tanh and zo != -128:
            raise UnsupportedOpError(f"{where(node)}: TFLM LOGISTIC int8 needs output zero point -128")
        M, lsh, radius = _fixed_point_input(sx)
        v = _codes(dtype) - zx
        q4 = mbqm(np.clip(v, -radius + 1, radius - 1), M, lsh, rounding(ctx))
        if is_tanh:
            y = np.clip(rdbp(gemmlowp.tanh(q4, 4), 24), -128, 127)
        else:
            y = np.clip(rdbp(gemmlowp.logistic(q4, 4), 23) - 128, -128, 127)
        y = np.where(v <= -radius, -128, np.where(v >= radius, 127, y))
        return _plan(y, dtype, impl=how, input_multiplier=M, input_left_shift=lsh, input_range_radius=radius)
    return prepare


def _prepare_int16_sigmoid_tanh(node, is_tanh: bool, sx, zx, so, zo):
    """``reference_integer_ops::Logistic/Tanh`` (int16; LiteRT REF and TFLM): the input is brought
    to the table scale 1/(3*4096) (power-of-two input scales: multiplier 3 << shift), then
    sigmoid_table_uint16 is interpolated with 9 (Tanh: 8) fractional bits in uint32 arithmetic;
    odd symmetry gives negative inputs."""
    _need_zero_zp(node, "int16", zx, zo)
    pot_out, log2_out = checked_log2(so)
    if not pot_out or log2_out != -15:
        raise UnsupportedOpError(f"{where(node)}: int16 {node.op} needs output scale 2^-15 (got {so})")
    pot, log2_in = checked_log2(sx)
    lsh = 12 + log2_in
    pot = pot and (lsh in (0, 1) if is_tanh else lsh == 0)
    if pot:
        mult, lsh = 3 << lsh, 0
    else:
        m = float(sx) * 4096.0 * 3.0
        lsh = 0
        while m <= 32767.0 / 2.0 and lsh <= 30:
            lsh += 1
            m *= 2.0
        mult = int(m)
    return _plan(int16_sigmoid_tanh_table(mult, lsh, is_tanh), "int16", input_multiplier=mult, input_left_shift=lsh)


def int16_sigmoid_tanh_table(mult: int, lsh: int, is_tanh: bool) -> np.ndarray:
    """``reference_integer_ops::Logistic/Tanh`` (int16) for every input code -32768..32767, given
    its (input_multiplier, input_left_shift); a multiplier of 0 means 3 << shift (power-of-two
    inputs).  Int16 output codes (scale 2^-15), int64 array."""
    if mult == 0:
        mult, lsh = 3 << lsh, 0
    x = _codes("int16")
    rnd = (1 << (lsh - 1)) if lsh > 0 else 0
    v = (x * mult + rnd) >> lsh
    a = np.abs(v)
    table = lut.sigmoid_table_uint16()
    frac_bits = 8 if is_tanh else 9
    uh = a >> frac_bits
    idx = np.minimum(uh, 254)
    ua, ub = table[idx], table[idx + 1]
    interp = (ua << frac_bits) + (a & ((1 << frac_bits) - 1)) * (ub - ua)
    if is_tanh:
        r = np.where(uh >= 255, 0xFFFF << 8, interp)
        r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1) >> 8
    else:
        r = np.where(uh >= 255, 0x7FFF << 10, interp)
        r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1) >> 10
    y = ((r + 32768) & 0xFFFF) - 32768  # static_cast<int16_t>
    return y


@kernel("Sigmoid", "tflite_ref", prepare=prepare_sigmoid_tanh(False), impls=TABLE_IMPLS)
@kernel("Tanh", "tflite_ref", prepare=prepare_sigmoid_tanh(True), impls=TABLE_IMPLS)
def sigmoid_tanh(plan, x):
    return _run_table(plan, x)


# --- GELU -------------------------------------------------------------------------------------

def _prepare_gelu(node, ctx):
    """``GeluPrepare``: LUTPopulate (int8: 256 entries; int16: 513-entry interpolated table) of
    the erfc form or, with ``approximate``, the tanh form, in float32 with libm."""
    dtype, sx, zx, so, zo = _io(node, ctx)
    approx = node.attrs.get("approximate", "none") not in ("none", False, 0, None)
    fused = float_contract(ctx)
    fn = (lut.gelu_approx_f32_fma if fused else lut.gelu_approx_f32) if approx else lut.gelu_f32
    if dtype == "int16":
        table = lut.lut_int16(sx, zx, so, zo, fn, contract=fused)
        return _plan(lut.lut_lookup_int16(_codes(dtype), table), dtype, approximate=approx)
    return _plan(lut.lut_int8(sx, zx, so, zo, fn, dtype), dtype, approximate=approx)


@kernel("Gelu", "tflite_ref", prepare=_prepare_gelu)
def _gelu(plan, x):
    return _run_table(plan, x)


# --- RSQRT ------------------------------------------------------------------------------------

def _prepare_rsqrt(node, ctx):
    """int8: M,s = QuantizeMultiplier(1. / (sqrtf(sx) * so)); per value v = q - zx > 0:
    inv = MBQM(1, GetInvSqrtQuantizedMultiplierExp(v)) with 20 extra bits, then MBQM(inv, M, s-20)
    (v == 0 -> qmax).  int16 (LiteRT): 513-entry LUT of 1/sqrtf(x) (x <= 0 -> 32767 * so); int16 with
    ``impl: fixed_point`` (TFLM): the int8 integer formula over the int16 range."""
    dtype, sx, zx, so, zo = _io(node, ctx, ("int8", "int16"))
    codes = _codes(dtype)
    lo, hi = qrange(dtype)
    if dtype == "int16":
        _need_zero_zp(node, dtype, zx, zo)
    # impl fixed_point (TFLM): the integer Newton-Raphson path for int16 too.
    if dtype == "int16" and impl(ctx, TABLE_IMPLS, "lut") == "lut":
        edge = _F(_F(32767) * so)

        def fn(x):
            return edge if x <= 0 else _F(_F(1.0) / lut.sqrtf(x))
        table = lut.lut_int16(sx, zx, so, zo, fn, contract=float_contract(ctx))
        y = lut.lut_lookup_int16(codes, table)
        return _plan(y, dtype, valid_from=zx)
    M, s = quantize_multiplier(1.0 / float(_F(lut.sqrtf(sx) * so)))
    r = rounding(ctx)
    v = np.maximum(codes - zx, 0)
    inv_m, inv_s = gemmlowp.inv_sqrt_multiplier_exp(v, -1)
    data = mbqm(np.ones_like(v), inv_m, inv_s + 20, r)
    y = np.clip(mbqm(data, M, s - 20, r) + zo, lo, hi)
    y = np.where(v == 0, hi, y)
    return _plan(y, dtype, multiplier=M, shift=s, valid_from=zx)


@kernel("Rsqrt", "tflite_ref", prepare=_prepare_rsqrt, impls=TABLE_IMPLS)
def _rsqrt(plan, x):
    if x.size and int(x.min()) < plan.info["valid_from"]:
        # LiteRT fails the node the same way ("Rsqrt is only defined for positive values").
        raise InputError(f"RSQRT input code {int(x.min())} is below the zero point {plan.info['valid_from']} "
                         f"(negative real value)")
    return _run_table(plan, x)


# --- ELU (int8) -------------------------------------------------------------------------------

# ``impl`` of int8 ELU: ``expm1`` (LiteRT's LUTPopulate with std::expm1) | ``exp_minus_one`` (TFLite
# Micro's PopulateLookupTable with std::exp(x) - 1.0f); both round half away, clamp, 256 entries |
# ``none`` (LiteRT's reference resolver registers no ELU: the model fails to load; refused)
ELU_IMPLS = ("expm1", "exp_minus_one", "none")


def prepare_elu(node, ctx):
    dtype, sx, zx, so, zo = _io(node, ctx, ("int8",))
    how = impl(ctx, ELU_IMPLS, "expm1")
    if how == "none":
        raise UnsupportedOpError(f"{where(node)}: this runtime has no ELU kernel (LiteRT's reference resolver "
                                 f"fails to load the model)")
    fn = lut.elu_expm1_f32 if how == "expm1" else lut.elu_exp_minus_one_f32
    return _plan(lut.lut_int8(sx, zx, so, zo, fn, dtype), dtype, impl=how)


@kernel("Elu", "tflite_ref", prepare=prepare_elu, impls=ELU_IMPLS)
def elu(plan, x):
    return _run_table(plan, x)
