"""LiteRT optimized int16 LOGISTIC / TANH (variant ``tflite_opt``).

``tflite/kernels/activations.cc`` (SigmoidEval / TanhEval, kGenericOptimized): when the int16 input
scale is a power of two with input_left_shift = 12 + log2(sx) equal to 0 (LOGISTIC) or 0 / 1 (TANH),
no input multiplier is computed and ``optimized_ops::Logistic/Tanh`` (``optimized_ops.h``) run
gemmlowp in int16 fixed point:

    x3  = input raw as FixedPoint<int16, 3>   (TANH with left shift 1: SaturatingRoundingMultiplyByPOT<1>)
    out = gemmlowp::logistic(x3) / gemmlowp::tanh(x3) raw, FixedPoint<int16, 0>

(the SSE4 vector blocks and the scalar tail compute the same values).  Every other case (8-bit
tables, non-power-of-two int16 scales) is the reference kernel.
"""
from __future__ import annotations

import numpy as np

from ..quant import gemmlowp16
from ._qtflite import checked_log2, qparams
from . import qactivation
from .registry import kernel

VARIANT = "tflite_opt"


def _prepare(is_tanh: bool):
    ref_prepare = qactivation._prepare_sigmoid_tanh(is_tanh)

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
        return {**plan, "table": y, "impl": "gemmlowp_int16", "input_left_shift": lsh}
    return prepare


kernel("Sigmoid", VARIANT, prepare=_prepare(False))(qactivation._sigmoid_tanh)
kernel("Tanh", VARIANT, prepare=_prepare(True))(qactivation._sigmoid_tanh)
