"""BatchNormalization variant ``ort_float``: ONNX Runtime CPU's float32 inference formula
(onnxruntime/core/providers/cpu/nn/batch_norm.h, Eigen arrays, no fused multiply-add)::

    inv_std   = f32(1 / f32(sqrt(f32(var + epsilon))))
    new_scale = f32(inv_std * scale)
    new_bias  = f32(bias - f32(mean * new_scale))
    y         = f32(f32(x * new_scale) + new_bias)

(the ONNX formula (x - mean) / sqrt(var + eps) * scale + bias rounds differently on about half the
values).  float32 inputs in inference mode only; training mode, other dtypes and quantized nodes
run the generic kernels.
"""
from __future__ import annotations

import numpy as np

from .common import is_quantized
from ..registry import Delegate, kernel, require

F32 = np.float32


def _prepare(node, ctx):
    fk = require("BatchNormalization", "float")
    fplan = fk.prepare(node, ctx)
    dtypes = {t.dtype for t in ctx.inputs if t is not None}
    if fplan.training_mode or dtypes != {"float32"} or any(is_quantized(t) for t in ctx.inputs):
        return Delegate(fk, fplan)
    return fplan


@kernel("BatchNormalization", "ort_float", prepare=_prepare)
def ort_batch_norm(plan, x, scale, bias, mean, var):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x, scale, bias, mean, var)
    x = np.asarray(x, F32)
    ax = x.ndim - 1 if plan.layout == "NHWC" else min(1, x.ndim - 1)
    shape = [1] * x.ndim
    shape[ax] = -1
    inv = (F32(1) / np.sqrt((np.asarray(var, F32) + F32(plan.epsilon)).astype(F32))).astype(F32)
    new_scale = (inv * np.asarray(scale, F32)).astype(F32)
    new_bias = (np.asarray(bias, F32) - (np.asarray(mean, F32) * new_scale).astype(F32)).astype(F32)
    return ((x * new_scale.reshape(shape)).astype(F32) + new_bias.reshape(shape)).astype(F32)
