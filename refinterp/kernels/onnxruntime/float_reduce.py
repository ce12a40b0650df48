"""ONNX Runtime CPU's float32 ReduceSum / ReduceMean, variant ``ort_float`` (onnxruntime 1.32.0 x86-64;
core/providers/cpu/reduction/reduction_ops.cc with Eigen's SSE reductions; bit-exact:
tests/conformance/test_ort_float_layernorm.py).

ORT merges the axes into a kept / reduced pattern and takes a fast path for two of them:

* reduced axes at the end ("KR": rows of N contiguous elements, e.g. the last axis of a
  transformer's hidden states, or every axis): each row is summed by Eigen's vectorised
  reduction with 4-float SSE packets.  The row's first elements up to a 16-byte boundary
  (``a0 = (4 - (r * N) mod 4) mod 4`` for row r of a 16-byte-aligned buffer) are left out, the
  next ``4 * floor((N - a0) / 4)`` go through two packet accumulators (p0 += the even packets,
  p1 += the odd ones; then p0 = p0 + p1, plus one last packet when their count is odd), the packet
  is folded as (p0[0] + p0[2]) + (p0[1] + p0[3]), then the a0 leading and the remaining trailing
  elements are added one at a time; rows without a whole aligned packet are summed left to right;
* reduced axes at the front ("RK"): the kept vectors added one reduced index after another;
* a reduced block in the middle ("KRK", e.g. mean pooling over the tokens of (batch, tokens,
  hidden)): per leading index, ORT multiplies a row of R ones by the (R, N) block (math::MatMul,
  M = 1), i.e. MLAS's SgemmKernelM1Avx order over the whole R: groups of four values summed
  ((x0 + x1) + x2) + x3 and each group added to the accumulator, then a last pair, then a last
  single value (float_sgemm._m1_chunk).

ReduceMean divides the float32 sum by float32(N).  Every other pattern (alternating axes) and
other dtypes run the generic kernel: ORT's order there was not characterised.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import is_quantized
from .float_sgemm import _m1_chunk
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
OPS = ("ReduceSum", "ReduceMean")
_F = np.float32


@numba.njit(cache=True)
def eigen_redux(v, a0):  # pragma: no cover - compiled
    """Eigen's SSE sum of the 1-D float32 ``v`` whose first ``a0`` elements precede the first 16-byte
    boundary (module docstring: two packet accumulators, the fold, then head and tail in order)."""
    n = v.size
    a0 = min(a0, n)
    s1 = (n - a0) // 4 * 4
    s2 = (n - a0) // 8 * 8
    if s1 == 0:
        res = v[0]
        for i in range(1, n):
            res = np.float32(res + v[i])
        return res
    p0 = np.empty(4, np.float32)
    p1 = np.empty(4, np.float32)
    for j in range(4):
        p0[j] = v[a0 + j]
    if s1 > 4:
        for j in range(4):
            p1[j] = v[a0 + 4 + j]
        for i in range(a0 + 8, a0 + s2, 8):
            for j in range(4):
                p0[j] = np.float32(p0[j] + v[i + j])
                p1[j] = np.float32(p1[j] + v[i + 4 + j])
        for j in range(4):
            p0[j] = np.float32(p0[j] + p1[j])
        if s1 > s2:
            for j in range(4):
                p0[j] = np.float32(p0[j] + v[a0 + s2 + j])
    res = np.float32(np.float32(p0[0] + p0[2]) + np.float32(p0[1] + p0[3]))
    for i in range(a0):
        res = np.float32(res + v[i])
    for i in range(a0 + s1, n):
        res = np.float32(res + v[i])
    return res


@numba.njit(cache=True)
def _kr_sums(x, out):  # pragma: no cover - compiled
    rows, n = x.shape
    for r in range(rows):
        out[r] = eigen_redux(x[r], (4 - (r * n) % 4) % 4)


@numba.njit(cache=True)
def _rk_sums(x, out):  # pragma: no cover - compiled
    n, k = x.shape
    for j in range(k):
        out[j] = x[0, j]
    for i in range(1, n):
        for j in range(k):
            out[j] = np.float32(out[j] + x[i, j])


@dataclass(frozen=True)
class OrtReducePlan:
    mean: bool
    generic: Any  # (kernel, plan): axes and output shapes, and every other case
    executed_by: str = "ORT reduction order (Eigen SSE rows / sequential columns / M1 SGEMM middle blocks)"


def _prepare(node, ctx):
    fk = require(node.op, "float")
    fplan = fk.prepare(node, ctx)
    x = ctx.inputs[0] if ctx.inputs else None
    if x is None or str(x.dtype) != "float32" or is_quantized(x) or (ctx.outputs and is_quantized(ctx.outputs[0])):
        return Delegate(fk, fplan)
    return OrtReducePlan(node.op == "ReduceMean", (fk, fplan))


def _pattern(shape: tuple[int, ...], axes: set[int]) -> str:
    """The kept / reduced pattern ORT's fast paths see: leading size-1 axes dropped, runs merged
    (measured: a trailing kept axis of size 1 still makes the pattern KRK)."""
    lead = 0
    while lead < len(shape) and shape[lead] == 1:
        lead += 1
    kinds = "".join("R" if i in axes else "K" for i in range(lead, len(shape)))
    return "".join(c for i, c in enumerate(kinds) if i == 0 or c != kinds[i - 1])


@kernel(OPS, VARIANT, prepare=_prepare)
def ort_reduce(plan, x, axes=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, axes)
    fk, fplan = plan.generic
    x = np.asarray(x)
    ref_axes = fplan.axes if fplan.axes is not None else (None if axes is None else [int(a) for a in np.ravel(axes)])
    if x.dtype != _F or x.size == 0 or x.ndim == 0 or (not ref_axes and fplan.noop):
        return fk.run(fplan, x, axes)
    red = set(range(x.ndim)) if not ref_axes else {a % x.ndim for a in ref_axes}
    pat = _pattern(x.shape, red)
    n = int(np.prod([x.shape[a] for a in red]))
    if pat in ("KR", "R", ""):
        flat = np.ascontiguousarray(x.reshape(-1, n))
        sums = np.empty(flat.shape[0], _F)
        _kr_sums(flat, sums)
    elif pat == "RK":
        flat = np.ascontiguousarray(x.reshape(n, -1))
        sums = np.empty(flat.shape[1], _F)
        _rk_sums(flat, sums)
    elif pat == "KRK" and min(red) >= next(i for i, d in enumerate(x.shape) if d != 1):
        # (a reduced leading size-1 axis makes ORT take its general loop instead: not characterised)
        first = min(red)
        lead = int(np.prod(x.shape[:first]))
        blocks = np.ascontiguousarray(x.reshape(lead, n, -1))
        sums = np.empty((lead, blocks.shape[2]), _F)
        ones = np.ones(n, _F)
        for d in range(lead):
            _m1_chunk(ones, blocks[d], sums[d], 0, blocks.shape[2], 0, n, True)
    else:
        return fk.run(fplan, x, axes)
    if plan.mean:
        sums = (sums / _F(n)).astype(_F)
    shape = [1 if i in red else d for i, d in enumerate(x.shape)] if fplan.keepdims else \
        [d for i, d in enumerate(x.shape) if i not in red]
    return sums.reshape(shape)
