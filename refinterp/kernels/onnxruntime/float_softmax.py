"""Softmax variant ``ort_float``: ONNX Runtime CPU float32 Softmax as MLAS computes it on x86-64 with
AVX-512F (``MlasComputeSoftmax``: onnxruntime/core/mlas/lib/compute.cpp, the exp constants
``MlasExpConstants``; x86_64/SoftmaxKernelAvx512F.S ``MlasComputeSumExpF32KernelAvx512F``).

Numeric contract, per row of D values along the softmax axis (float32 throughout, every
``fma`` a single rounding):

* ``x' = max(x + (-max(x)), -103.9720840454)`` (the AVX-512F kernel loads LowerRange, not the
  narrower LowerRangeSumExp of the generic kernel);
* ``b = fma(x', 1/ln2, 1.5 * 2^23)``, ``m = b - 1.5 * 2^23`` (round to nearest integer);
  ``r = fma(m, -ln2_hi, x')``, ``r = fma(m, -ln2_lo, r)``;
* ``p = poly_0``, then ``p = fma(p, r, c)`` for c in poly_1..poly_4, 1, 1 (Horner, 6 steps);
  ``e = p * 2^m`` (vscalefps: one rounding);
* the sum: 16 float32 lanes, element i added to lane i mod 16 in index order (blocks of 48 then
  16, masked tail); then lanes (i + 8) + i for i < 8, then ((a0+a1)+(a2+a3)) + ((a4+a5)+(a6+a7));
* ``y = e * f32(1 / sum)``; LogSoftmax (MlasComputeLogSoftmax): ``y = (x + (-max)) - logf(sum)``.

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_softmax.py).  Quantized
Softmax nodes run the ``ort`` kernel; other formats / dtypes the ``float`` kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from .common import is_quantized
from .float_exp import _BIAS, _LOG2HI, _LOG2LO, _LOG2R, _LOWER, _POLY, exp_core
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
_F = np.float32
@numba.njit(cache=True)
def _rows(x, out, lower, bias, log2r, log2hi, log2lo, poly, log):  # pragma: no cover - compiled
    n_rows, d = x.shape
    lanes = np.empty(16, np.float32)
    for r in range(n_rows):
        row = x[r]
        mx = row[0]
        for i in range(1, d):
            if row[i] > mx:
                mx = row[i]
        neg = -mx
        for j in range(16):
            lanes[j] = np.float32(0.0)
        for i in range(d):
            v = np.float32(row[i] + neg)
            if v < lower:
                v = lower
            e = exp_core(v, bias, log2r, log2hi, log2lo, poly)
            out[r, i] = e
            lanes[i % 16] = np.float32(lanes[i % 16] + e)
        a0 = np.float32(lanes[8] + lanes[0])
        a1 = np.float32(lanes[9] + lanes[1])
        a2 = np.float32(lanes[10] + lanes[2])
        a3 = np.float32(lanes[11] + lanes[3])
        a4 = np.float32(lanes[12] + lanes[4])
        a5 = np.float32(lanes[13] + lanes[5])
        a6 = np.float32(lanes[14] + lanes[6])
        a7 = np.float32(lanes[15] + lanes[7])
        s = np.float32(np.float32(np.float32(a0 + a1) + np.float32(a2 + a3))
                       + np.float32(np.float32(a4 + a5) + np.float32(a6 + a7)))
        if log:
            ls = np.float32(math.log(s))  # libm logf (std::log of a float)
            for i in range(d):
                out[r, i] = np.float32(np.float32(row[i] + neg) - ls)
            continue
        scale = np.float32(np.float32(1.0) / s)
        for i in range(d):
            out[r, i] = np.float32(out[r, i] * scale)


def mlas_softmax(x: np.ndarray, axis: int, log: bool = False) -> np.ndarray:
    """float32 softmax (``log``: log-softmax) of ``x`` along ``axis`` in MLAS's AVX-512F arithmetic
    (module docstring)."""
    xm = np.moveaxis(np.asarray(x, _F), axis, -1)
    shape = xm.shape
    rows = np.ascontiguousarray(xm.reshape(-1, shape[-1] if shape else 1))
    out = np.empty_like(rows)
    if rows.size:
        _rows(rows, out, _LOWER, _BIAS, _LOG2R, _LOG2HI, _LOG2LO, _POLY, log)
    return np.moveaxis(out.reshape(shape), -1, axis)


@dataclass(frozen=True)
class MlasSoftmaxPlan:
    axis: int
    log: bool = False
    executed_by: str = "MLAS AVX-512F softmax"


def _prepare(node, ctx):
    first_in = ctx.inputs[0] if ctx.inputs else None
    if node.op == "Softmax" and (is_quantized(first_in) or any(is_quantized(t) for t in ctx.outputs)):
        k = require("Softmax", "ort")
        return Delegate(k, k.prepare(node, ctx))
    fk = require(node.op, "float")
    plan = fk.prepare(node, ctx)
    if first_in is None or str(first_in.dtype) != "float32" or plan.beta != 1.0 or \
            (node.op == "LogSoftmax" and (is_quantized(first_in) or any(is_quantized(t) for t in ctx.outputs))):
        return Delegate(fk, plan)
    return MlasSoftmaxPlan(plan.axis, node.op == "LogSoftmax")


@kernel(("Softmax", "LogSoftmax"), VARIANT, prepare=_prepare)
def ort_float_softmax(plan, x):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.ndim == 0:
        return (np.zeros_like if plan.log else np.ones_like)(x, dtype=_F)
    return mlas_softmax(x, plan.axis % x.ndim, plan.log)
