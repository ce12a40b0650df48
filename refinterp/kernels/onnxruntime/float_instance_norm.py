"""InstanceNormalization variant ``ort_float``: ONNX Runtime 1.32's CPU kernel on float32
(onnxruntime/core/providers/cpu/nn/instance_norm.cc, Eigen arrays, no FMA).

Numeric contract, per (n, c) row of S = prod(spatial) values starting at element offset o = (n C + c) S:

    mean  = f32(eigen_sum(row, head = (4 - o mod 4) mod 4) / S)      (Eigen's aligned SSE sum)
    sq    = eigen_sum(f32(f32(x - mean)^2), head = 0)                (squaredNorm of an expression:
                                                                      packets from its first element)
    inv   = f32(1 / sqrtf(f32(f32(sq / S) + epsilon)))
    a     = f32(inv * scale[c]);  b = f32(bias[c] - f32(mean * a))
    y     = f32(f32(x * a) + b)

(eigen_sum: float_reduce.eigen_redux).  Measured on 4 shapes with every head length: 0 differing
bits; a plain or sequential sum differs.  Other dtypes run the generic kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from .float_reduce import eigen_redux
from ..registry import Delegate, kernel

_F = np.float32


@numba.njit(cache=True)
def _rows(x, scale, bias, eps, c, out):  # pragma: no cover - compiled
    rows, s = x.shape
    sq = np.empty(s, np.float32)
    for r in range(rows):
        row = x[r]
        mean = np.float32(eigen_redux(row, (4 - (r * s) % 4) % 4) / np.float32(s))
        for i in range(s):
            d = np.float32(row[i] - mean)
            sq[i] = np.float32(d * d)
        var = np.float32(eigen_redux(sq, 0) / np.float32(s))
        inv = np.float32(np.float32(1.0) / np.float32(np.sqrt(np.float32(var + eps))))
        a = np.float32(inv * scale[r % c])
        b = np.float32(bias[r % c] - np.float32(mean * a))
        for i in range(s):
            out[r, i] = np.float32(np.float32(row[i] * a) + b)


@dataclass(frozen=True)
class OrtInstanceNormPlan:
    epsilon: float
    generic: Any
    executed_by: str = "ORT InstanceNormalization (Eigen SSE sums, no FMA)"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    return OrtInstanceNormPlan(float(_F(node.attrs.get("epsilon", 1e-5))), d) if ok else d


@kernel("InstanceNormalization", "ort_float", prepare=_prepare)
def ort_instance_norm(plan, x, scale, bias):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, scale, bias)
    x = np.asarray(x)
    if x.dtype != _F or x.ndim < 3 or x.size == 0 or np.asarray(scale).dtype != _F or np.asarray(bias).dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x, scale, bias)
    c = x.shape[1]
    rows = np.ascontiguousarray(x).reshape(x.shape[0] * c, -1)
    out = np.empty_like(rows)
    _rows(rows, np.ascontiguousarray(scale, _F).ravel(), np.ascontiguousarray(bias, _F).ravel(), _F(plan.epsilon),
          c, out)
    return out.reshape(x.shape)
