"""LiteRT optimized int16 LOGISTIC / TANH and 8-bit HARD_SWISH (variant ``tflite_opt``).

``tflite/kernels/activations.cc`` (SigmoidEval / TanhEval, kGenericOptimized): when the int16 input
scale is a power of two with input_left_shift = 12 + log2(sx) equal to 0 (LOGISTIC) or 0 / 1 (TANH),
no input multiplier is computed and ``optimized_ops::Logistic/Tanh`` (``optimized_ops.h``) run
gemmlowp in int16 fixed point:

    x3  = input raw as FixedPoint<int16, 3>   (TANH with left shift 1: SaturatingRoundingMultiplyByPOT<1>)
    out = gemmlowp::logistic(x3) / gemmlowp::tanh(x3) raw, FixedPoint<int16, 0>

(the SSE4 vector blocks and the scalar tail compute the same values).  Every other case (8-bit
tables, non-power-of-two int16 scales) is the reference kernel.

HARD_SWISH (``optimized_ops::HardSwish``): the NEON loop exists only for a real ``__ARM_NEON``
build, so on x86 (``impl: reference``, the default) it is the reference kernel.  ``impl: neon``
(ARM builds; documented, not run) models the NEON lanes, which are the first 8*floor(n/8) elements
of the flattened tensor; they differ from the reference in three roundings:

    reluish right shift: vrshlq_s16, half up       (reference: RoundingDivideByPOT, half away)
    reluish * input:     vqdmulhq_s16, floor       (reference: truncation toward zero)
    output shift:        vrshlq_s16, half up       (reference: RoundingDivideByPOT)
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from refinterp.quant import gemmlowp16
from refinterp.quant.fixedpoint import srdhm16
from ..common import checked_log2, impl, qparams, qrange
from ..ref import activation as ref_activation
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_opt"


HARD_SWISH_IMPLS = ("reference", "neon")  # x86 build (reference kernel) | the NEON table


def prepare_node(is_tanh: bool):
    ref_prepare = ref_activation.prepare_sigmoid_tanh(is_tanh)

    def prepare(node, ctx):
        plan = ref_prepare(node, ctx)  # validates types, zero points and the output scale
        if ctx.inputs[0].dtype != "int16":
            return plan
        sx, _ = qparams(ctx.inputs[0], node, "input")
        pot, log2 = checked_log2(sx)
        lsh = 12 + log2
        if not (pot and (lsh in (0, 1) if is_tanh else lsh == 0)):
            return plan
        x = np.arange(-32768, 32768, dtype=np.int64)
        if lsh:
            x = gemmlowp16.sat_mul_pot(x, 1)
        y = gemmlowp16.tanh(x, 3) if is_tanh else gemmlowp16.logistic(x, 3)
        return replace(plan, table=np.asarray(y, np.int64),
                       info=MappingProxyType({**plan.info, "impl": "gemmlowp_int16", "input_left_shift": lsh}))
    return prepare


kernel("Sigmoid", VARIANT, prepare=prepare_node(False), impls=ref_activation.TABLE_IMPLS)(ref_activation.sigmoid_tanh)
kernel("Tanh", VARIANT, prepare=prepare_node(True), impls=ref_activation.TABLE_IMPLS)(ref_activation.sigmoid_tanh)


# --- HARD_SWISH -------------------------------------------------------------------------------

def _half_up_shift(x, e: int):
    """``vrshlq_s16(x, -e)`` for e >= 0: (x + 2^(e-1)) >> e."""
    return x if e <= 0 else (x + (1 << (e - 1))) >> e


def _neon_hard_swish(plan: Mapping[str, Any], dtype: str) -> np.ndarray:
    lo, hi = qrange(dtype)
    v = np.arange(lo, hi + 1, dtype=np.int64) - plan["input_zero_point"]
    h = v * 128
    pre_out = srdhm16(h, plan["output_multiplier16"])
    er = plan["reluish_exponent"]
    rel = np.clip(h << max(0, er - 1), -32768, 32767)
    rel = srdhm16(rel, plan["reluish_multiplier16"])
    if er > 0:
        rel = np.clip(rel * 2, -32768, 32767)
    rel = _half_up_shift(rel, -min(0, er))
    rel = (rel + 32768) >> 1                                    # vrhaddq_s16(rel, 32767)
    prod = rel * pre_out
    pre_shift = np.where((rel == -32768) & (pre_out == -32768), 32767, prod >> 15)  # vqdmulhq_s16
    out = _half_up_shift(pre_shift, -plan["output_exponent"]) + plan["output_zero_point"]
    out = ((out + 32768) & 0xFFFF) - 32768                      # vaddq_s16 wraps
    return np.clip(out, lo, hi)


def _prepare_hard_swish(node, ctx):
    plan = ref_activation.prepare_hard_swish(node, ctx)
    if impl(ctx, HARD_SWISH_IMPLS, "reference") == "reference":
        return plan
    _, zx = qparams(ctx.inputs[0], node, "input")
    _, zo = qparams(ctx.outputs[0], node, "output")
    info = {**plan.info, "input_zero_point": zx, "output_zero_point": zo, "impl": "neon"}
    return replace(plan, info=MappingProxyType(info), alt_table=_neon_hard_swish(info, plan.dtype))


@kernel("HardSwish", VARIANT, prepare=_prepare_hard_swish, impls=HARD_SWISH_IMPLS)
def _hard_swish(plan, x):
    ref = ref_activation.hard_swish(plan, x)
    if plan.alt_table is None:
        return ref
    neon = plan.alt_table[x.astype(np.int64) - plan.lo].astype(plan.dtype)
    n = ref.size
    lanes = (np.arange(n) < 8 * (n // 8)).reshape(ref.shape)
    return np.where(lanes, neon, ref)
