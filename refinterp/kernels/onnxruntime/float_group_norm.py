"""GroupNormalization variant ``ort_float``: ONNX Runtime 1.32 on float32.  ORT's CPU EP has no
GroupNormalization kernel; it inlines ONNX's function body (opsets 18 and 21 alike) and runs each of
its ops, so this kernel follows that body with ORT's ReduceMean.

Numeric contract, X (N, C, ...) viewed as rows of K = (C / G) * prod(spatial) values, row r starting
at element r K of a 16-byte-aligned buffer:

    mean  = f32(eigen_sum(row, head = (4 - r K mod 4) mod 4) / K)       ORT's ReduceMean (float_reduce)
    msq   = f32(eigen_sum(f32(x * x) row, same head) / K)
    var   = f32(msq - f32(mean * mean))                                 E[x^2] - E[x]^2, not two-pass
    std   = sqrtf(f32(var + f32(epsilon)))
    y     = f32(f32(scale[c] * f32(f32(x - mean) / std)) + bias[c])

(opsets 18-20 take per-group scale / bias; the loader repeats them per channel, the same products.)
Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_gru_norm.py); the two-pass generic
kernel differs.  Other dtypes and stash types run the generic kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import ModelError
from .common import float32_node_or_delegate
from .float_reduce import _kr_sums
from ..registry import Delegate, kernel

_F = np.float32


@dataclass(frozen=True)
class OrtGroupNormPlan:
    groups: int
    epsilon: float
    where: str
    generic: Any
    executed_by: str = "ORT's inlined GroupNormalization function (Eigen ReduceMean rows, E[x^2] - E[x]^2)"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    if not ok or int(node.attrs.get("stash_type", 1)) != 1:
        return d
    return OrtGroupNormPlan(int(node.attrs.get("num_groups", 0)), float(node.attrs.get("epsilon", 1e-5)),
                            f"node '{node.name}' (GroupNormalization)", d)


def _row_means(rows: np.ndarray) -> np.ndarray:
    sums = np.empty(rows.shape[0], _F)
    _kr_sums(rows, sums)
    return (sums / _F(rows.shape[1])).astype(_F)


@kernel("GroupNormalization", "ort_float", prepare=_prepare)
def ort_group_norm(plan, x, scale, bias):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, scale, bias)
    x = np.asarray(x)
    scale, bias = np.asarray(scale), np.asarray(bias)
    if x.dtype != _F or scale.dtype != _F or bias.dtype != _F or x.ndim < 2 or x.size == 0:
        return plan.generic.kernel.run(plan.generic.plan, x, scale, bias)
    n, c = x.shape[:2]
    g = plan.groups
    if g <= 0 or c % g or scale.size != c or bias.size != c:
        raise ModelError(f"{plan.where}: {c} channels, num_groups {g}, {scale.size} scales and "
                         f"{bias.size} biases do not fit")
    rows = np.ascontiguousarray(x.reshape(n * g, -1))
    mean = _row_means(rows)
    msq = _row_means((rows * rows).astype(_F))
    var = (msq - (mean * mean).astype(_F)).astype(_F)
    std = np.sqrt((var + _F(plan.epsilon)).astype(_F)).astype(_F)
    norm = ((rows - mean[:, None]).astype(_F) / std[:, None]).astype(_F).reshape(n, c, -1)
    y = ((scale.reshape(1, c, 1) * norm).astype(_F) + bias.reshape(1, c, 1)).astype(_F)
    return y.reshape(x.shape)
