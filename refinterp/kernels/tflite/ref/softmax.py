"""TFLite integer SOFTMAX over the last axis.

* 8-bit input (LiteRT BUILTIN_REF, TFLM): ``reference_ops::Softmax`` in gemmlowp fixed point.
  Prepare: real = min(double(beta) * double(sx) * 2^26, 2^31 - 1) -> QuantizeMultiplierGreaterThanOne
  (M, lsh); diff_min = -floor(31 * 2^26 / 2^lsh).  Per row: d = q - max(q); entries with
  d < diff_min output the type minimum; others: E = exp_on_negative_values(MBQM(d, M, lsh)) (Q5 in,
  Q0.31 out), sum of RDBP(E, 12) in Q12, reciprocal via ``GetReciprocal``, out =
  RDBP(SRDHM(recip, E), bits_over_unit + 31 - output_bits) + output type minimum.
* int16 (``SoftmaxInt16``): exp and 1/(1+x) 513-entry int16 tables (``LUTPopulate<int16>`` in double),
  d rescaled by QuantizeMultiplier(float32(sx*beta) / (10/65535)), sums in int32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import gemmlowp, lut
from refinterp.quant.fixedpoint import (quantize_multiplier, quantize_multiplier_greater_than_one,
                                rdbp, srdhm)
from refinterp.settings import fast_kernels
from ..common import check_dtype, float_contract, mbqm, qparams, qrange, rounding, where
from .softmax_fast import fast_softmax
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant", "float_contract")  # the scheme settings these kernels read

_I64 = np.int64
_FAST = fast_kernels()


@dataclass(frozen=True)
class SoftmaxPlan:
    int16: bool
    multiplier: int
    rounding: str
    dtype: str
    shift: int = 0  # int16
    exp_lut: np.ndarray | None = None  # int16
    inv_lut: np.ndarray | None = None  # int16
    left_shift: int = 0  # 8-bit: input_beta_multiplier's left shift
    diff_min: int = 0
    out_bits: int = 0
    out_min: int = 0


def prepare_node(node, ctx) -> SoftmaxPlan:
    dt = check_dtype(ctx.inputs[0], node, ("int8", "uint8", "int16"))
    odt = check_dtype(ctx.outputs[0], node, ("int8", "uint8", "int16"))
    axis = int(node.attrs.get("axis", -1))
    shape = ctx.inputs[0].shape
    if shape is not None and axis not in (-1, len(shape) - 1):
        raise UnsupportedOpError(f"{where(node)}: softmax over axis {axis} (TFLite uses the last axis)")
    sx, zx = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    beta = np.float32(node.attrs.get("beta", 1.0))
    r = rounding(ctx)
    if dt == "int16":
        if odt != "int16" or zx or zo:
            raise UnsupportedOpError(f"{where(node)}: int16 softmax needs int16 output and zero points 0")
        rng = 65535
        fused = float_contract(ctx)
        exp_lut = lut.lut_int16(10.0 / rng, 32767, 2.0 / rng, 0, lut.exp_double, double=True, contract=fused)
        inv_lut = lut.lut_int16(1.0 / rng, -32768, 2.0 / rng, 0, lambda v: 1.0 / (1.0 + v), double=True,
                                contract=fused)
        M, s = quantize_multiplier(float(np.float32(sx * beta)) / (10.0 / 65535.0))
        return SoftmaxPlan(True, M, r.value, odt, shift=s, exp_lut=exp_lut, inv_lut=inv_lut)
    real = min(float(beta) * float(sx) * float(1 << 26), float((1 << 31) - 1))
    M, lsh = quantize_multiplier_greater_than_one(real)
    diff_min = -int(np.floor(31.0 * float(1 << 26) / float(1 << lsh)))
    return SoftmaxPlan(False, M, r.value, odt, left_shift=lsh, diff_min=diff_min, out_bits=np.iinfo(odt).bits,
                       out_min=qrange(odt)[0])


def _run_8bit(p, x):
    q = x.astype(_I64)
    d = q - q.max(axis=-1, keepdims=True)
    valid = d >= p.diff_min
    z = mbqm(np.where(valid, d, 0), p.multiplier, p.left_shift, p.rounding)
    e = gemmlowp.exp_on_negative_values(z, 5)
    total = np.where(valid, rdbp(e, 12), 0).sum(axis=-1, keepdims=True)  # Q12, < 2^31 for depth < 2^12
    recip, over = gemmlowp.get_reciprocal(total, 12)
    exponent = over + 31 - p.out_bits
    lo, hi = qrange(p.dtype)
    y = np.clip(rdbp(srdhm(recip, e), exponent) + p.out_min, lo, hi)
    return np.where(valid, y, p.out_min).astype(p.dtype)


def _run_int16(p, x):
    q = x.astype(_I64)
    d = q - q.max(axis=-1, keepdims=True)
    scaled = mbqm(d, p.multiplier, p.shift, p.rounding) + 32767
    e = lut.lut_lookup_int16(np.clip(scaled, -32768, 32767), p.exp_lut)
    total = e.sum(axis=-1, keepdims=True)  # Q16.15, int32
    hp1 = gemmlowp.clz32(total)
    shifted = ((total << (hp1 - 1)) + (1 << 13)) >> 14
    sym = np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767)
    recip = lut.lut_lookup_int16(sym, p.inv_lut)
    rs = 31 - hp1
    y = (e * recip + (np.int64(1) << (rs - 1))) >> rs
    return np.clip(y, 0, 32767).astype(p.dtype)


@kernel("Softmax", "tflite_ref", prepare=prepare_node)
def softmax(plan, x):
    y = fast_softmax(plan, x) if _FAST else None
    if y is not None:
        return y
    return _run_int16(plan, x) if plan.int16 else _run_8bit(plan, x)


