"""MeanVarianceNormalization variant ``ort_float``: ONNX Runtime 1.32's CPU kernel on float32
(onnxruntime/core/providers/cpu/tensor/mean_variance_normalization.cc, Eigen arrays, no FMA).

ORT drops axes outside the rank, moves the normalized axes last (a transpose: data movement) and
treats the result as M sets of N contiguous values, set j starting at element j N of an aligned
buffer.  Numeric contract per set:

    mean = f32(eigen_sum(x, head = (4 - j N mod 4) mod 4) / N)     a Map column: aligned head
    d    = f32(x - mean)
    std  = sqrtf(f32(eigen_sum(f32(d * d), head = 0) / N))         an expression: packets from element 0
    y    = f32(d / std)                                            no epsilon (ONNX's function adds 1e-9)

(eigen_sum: float_reduce.eigen_redux.)  Measured on 6 shapes / axis sets (tests/conformance/
test_ort_float_gru_norm.py): 0 differing bits; a
one-pass E[x^2] - E[x]^2 (the generic kernel) or other heads differ.  Other dtypes run the generic
kernel.
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


@dataclass(frozen=True)
class OrtMvnPlan:
    axes: tuple
    generic: Any
    executed_by: str = "ORT MeanVarianceNormalization (Eigen SSE column sums, two-pass variance)"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    if not ok:
        return d
    axes = node.attrs.get("axes")
    return OrtMvnPlan(tuple(int(a) for a in (axes if axes is not None else (0, 2, 3))), d)


@numba.njit(cache=True)
def _sets(x, out):  # pragma: no cover - compiled
    m, n = x.shape
    sq = np.empty(n, np.float32)
    for j in range(m):
        mean = np.float32(eigen_redux(x[j], (4 - (j * n) % 4) % 4) / np.float32(n))
        for i in range(n):
            d = np.float32(x[j, i] - mean)
            out[j, i] = d
            sq[i] = np.float32(d * d)
        std = np.float32(np.sqrt(np.float32(eigen_redux(sq, 0) / np.float32(n))))
        for i in range(n):
            out[j, i] = np.float32(out[j, i] / std)


@kernel("MeanVarianceNormalization", "ort_float", prepare=_prepare)
def ort_mvn(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F or x.size == 0:
        return plan.generic.kernel.run(plan.generic.plan, x)
    r = x.ndim
    ax = sorted({a % r for a in plan.axes if -r <= a < r})  # ORT drops axes outside the rank
    perm = [a for a in range(r) if a not in ax] + ax
    xt = np.ascontiguousarray(np.transpose(x, perm))
    n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    flat = xt.reshape(-1, n)
    out = np.empty_like(flat)
    with np.errstate(divide="ignore", invalid="ignore"):
        _sets(flat, out)
    return np.ascontiguousarray(np.transpose(out.reshape(xt.shape), np.argsort(perm)))
