"""com.microsoft.SkipSimplifiedLayerNormalization (RMS norm after a residual add), variant
``ort_float``: ONNX Runtime CPU's float32 order (contrib_ops/cpu/skip_layer_norm.cc; compiled without
FMA contraction).

Per row of ``n`` elements, float32 throughout, each operation rounded once::

    v[h] = (x[h] + skip[h]) + bias[h]                       (bias optional; skip broadcasts over rows)
    msq  = 0;  for h in order:  msq = msq + f32(v[h] * v[h])
    d    = sqrt(f32(msq / f32(n)) + epsilon)
    y[h] = f32(v[h] / d) * gamma[h]

Outputs: y, an unused mean (zeros), 1 / d, and v (the input + skip + bias sum).  Bit-exact with
onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py).  Not used for
LayerNormalization / SkipLayerNormalization: onnxruntime 1.32 accumulates their mean in double and
forms their denominator in an order not characterised (its mean output equals a double-precision
sum divided by n; 1 / denominator stays 1-2 float32 ulp away from every double or float form tried).
Other dtypes, quantized tensors and gamma / bias shapes other than one value per element run the
generic kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import is_quantized
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
OP = "com.microsoft.SkipSimplifiedLayerNormalization"
_F = np.float32


@numba.njit(cache=True)
def _rms_rows(v, gamma, eps, y, inv):  # pragma: no cover - compiled
    rows, n = v.shape
    nf = np.float32(n)
    for r in range(rows):
        msq = np.float32(0.0)
        for h in range(n):
            msq = np.float32(msq + np.float32(v[r, h] * v[r, h]))
        d = np.float32(np.sqrt(np.float32(np.float32(msq / nf) + eps)))
        for h in range(n):
            y[r, h] = np.float32(np.float32(v[r, h] / d) * gamma[h])
        inv[r] = np.float32(np.float32(1.0) / d)


@dataclass(frozen=True)
class OrtSkipRmsPlan:
    epsilon: float
    fallback: Any  # (kernel, plan) of the generic float kernel
    executed_by: str = "ORT SkipSimplifiedLayerNorm order (sequential float32 sums)"


def _prepare(node, ctx):
    first = ctx.inputs[0] if ctx.inputs else None
    tensors = [t for t in list(ctx.inputs) + list(ctx.outputs) if t is not None]
    fk = require(OP, "float")
    if first is None or str(first.dtype) != "float32" or any(is_quantized(t) for t in tensors):
        return Delegate(fk, fk.prepare(node, ctx))
    return OrtSkipRmsPlan(float(node.attrs.get("epsilon", 1e-12)), (fk, fk.prepare(node, ctx)))


@kernel(OP, VARIANT, prepare=_prepare)
def ort_skip_simplified_layer_norm(plan, x, skip, gamma, bias=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, skip, gamma, bias)
    x = np.asarray(x)
    n = x.shape[-1] if x.ndim else 0
    if x.dtype != _F or n == 0 or np.size(gamma) != n or (bias is not None and np.size(bias) != n):
        fk, fplan = plan.fallback
        return fk.run(fplan, x, skip, gamma, bias)
    v = (x + np.asarray(skip, _F)).astype(_F)
    if bias is not None:
        v = (v + np.asarray(bias, _F)).astype(_F)
    flat = np.ascontiguousarray(v.reshape(-1, n))
    y = np.empty_like(flat)
    inv = np.empty(flat.shape[0], _F)
    _rms_rows(flat, np.ascontiguousarray(gamma, _F).reshape(-1), _F(plan.epsilon), y, inv)
    stat = x.shape[:-1] + (1,)
    return y.reshape(v.shape), np.zeros(stat, _F), inv.reshape(stat), v
