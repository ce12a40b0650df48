"""ONNX Runtime CPU's float32 layer norms, variant ``ort_float`` (onnxruntime 1.32.0 x86-64, bit-exact:
tests/conformance/test_ort_float_layernorm.py, test_ort_float_activation.py).

LayerNormalization (onnx opset 17+; also what ORT's LayerNormFusion makes), per row of the ``n``
normalized elements (the axes from ``axis`` on), every operation rounded once to float32 unless said:

    n < 8:   Welford:  for k = 1..n:  d = x[k] - mean;  mean = mean + d / k;  m2 = m2 + d * (x[k] - mean)
             den  = sqrt(m2 / n + epsilon);  inv = 1 / den
             y[h] = ((x[h] - mean) / den) * scale[h]  (+ bias[h])
    n >= 8:  mean = f32(sum of x in float64 / n)          (the order of the float64 sum is not seen:
                                                          every order tried gives the same mean)
             d[h] = x[h] - mean
             q    = 8 lanes, lane j += d[h] * d[h] as one FMA for h = 8i + j over the full blocks of
                    8, lanes folded (j, j + 4), (j, j + 2), (0, 1); then the rest of the row, in
                    order: the first 4 * floor(rest / 4) as q = q + f32(d * d), the last (< 4) as
                    q = fma(d, d, q)
             den  = sqrt(q / n + epsilon);  inv = 1 / den
             y[h] = fma(f32(d[h] * inv), scale[h], bias[h] or 0)

Outputs: y, mean and inv (shape x.shape[:axis] + 1s) when asked.  Evidence: 100 shapes (n = 1..40,
63-65, 100, 127, 768, 1000, 1024; 2-D to 4-D, axis 0 to -2, with and without bias, scale (1, n)),
every output bit-exact; the n >= 8 lanes were found by the tail sizes (1-3 FMA, 4-7 a plain block of
4 first).  Scale / bias with other shapes (ORT's broadcasting path, in float64) and other dtypes run
the generic kernel.

com.microsoft.SkipSimplifiedLayerNormalization (RMS norm after a residual add;
contrib_ops/cpu/skip_layer_norm.cc, compiled without FMA contraction)::

    v[h] = (x[h] + skip[h]) + bias[h]                       (bias optional; skip broadcasts over rows)
    msq  = 0;  for h in order:  msq = msq + f32(v[h] * v[h])
    d    = sqrt(f32(msq / f32(n)) + epsilon)
    y[h] = f32(v[h] / d) * gamma[h]

Outputs: y, an unused mean (zeros), 1 / d, and v (the input + skip + bias sum).

com.microsoft.SkipLayerNormalization (what ORT's SkipLayerNormFusion makes of a residual Add before a
LayerNormalization): v = (x + skip) + bias, then the Welford form above for *every* row length (also
n >= 8); outputs y, mean, inv and v.  Evidence: 32 forms (n = 1 .. 1024, with and without beta and
bias), every output bit-exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import is_quantized
from .float_sgemm import _fma32
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
OP = "com.microsoft.SkipSimplifiedLayerNormalization"
_F = np.float32


@numba.njit(cache=True)
def _rms_seq_row(v, r, gamma, eps, y):  # pragma: no cover - compiled
    """Row ``r`` by sequential float32 sums of squares (no FMA) into ``y``; returns the root d."""
    n = v.shape[1]
    msq = np.float32(0.0)
    for h in range(n):
        msq = np.float32(msq + np.float32(v[r, h] * v[r, h]))
    d = np.float32(np.sqrt(np.float32(np.float32(msq / np.float32(n)) + eps)))
    for h in range(n):
        y[r, h] = np.float32(np.float32(v[r, h] / d) * gamma[h])
    return d


@numba.njit(cache=True)
def _rms_rows(v, gamma, eps, y, inv):  # pragma: no cover - compiled
    for r in range(v.shape[0]):
        inv[r] = np.float32(np.float32(1.0) / _rms_seq_row(v, r, gamma, eps, y))


SKIP_OP = "com.microsoft.SkipLayerNormalization"


@dataclass(frozen=True)
class OrtSkipPlan:
    epsilon: float
    fallback: Any  # (kernel, plan) of the generic float kernel
    executed_by: str


_SKIP_EXECUTED_BY = {OP: "ORT SkipSimplifiedLayerNorm order (sequential float32 sums)",
                     SKIP_OP: "ORT SkipLayerNormalization order (float32 Welford)"}


def _prepare_skip(node, ctx):
    first = ctx.inputs[0] if ctx.inputs else None
    tensors = [t for t in list(ctx.inputs) + list(ctx.outputs) if t is not None]
    fk = require(node.op, "float")
    if first is None or str(first.dtype) != "float32" or any(is_quantized(t) for t in tensors):
        return Delegate(fk, fk.prepare(node, ctx))
    return OrtSkipPlan(float(node.attrs.get("epsilon", 1e-12)), (fk, fk.prepare(node, ctx)),
                       _SKIP_EXECUTED_BY[node.op])


@kernel(OP, VARIANT, prepare=_prepare_skip)
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


@numba.njit(cache=True)
def _welford_row(x, r, scale, bias, has_bias, eps, y):  # pragma: no cover - compiled
    """Row ``r`` by the Welford form (module docstring) into ``y``; returns (mean, den)."""
    n = x.shape[1]
    mean = np.float32(0.0)
    m2 = np.float32(0.0)
    for k in range(n):
        xv = x[r, k]
        dl = np.float32(xv - mean)
        mean = np.float32(mean + np.float32(dl / np.float32(k + 1)))
        m2 = np.float32(m2 + np.float32(dl * np.float32(xv - mean)))
    den = np.float32(np.sqrt(np.float32(np.float32(m2 / np.float32(n)) + eps)))
    for h in range(n):
        v = np.float32(np.float32(np.float32(x[r, h] - mean) / den) * scale[h])
        y[r, h] = np.float32(v + bias[h]) if has_bias else v
    return mean, den


@numba.njit(cache=True)
def _sumsq_lanes(x, r, shift, lanes):  # pragma: no cover - compiled
    """Sum over row ``r`` of (x - shift)^2 in ORT's order (module docstring: 8 FMA lanes, folded,
    then the rest: a plain block of 4, then FMAs)."""
    n = x.shape[1]
    lanes[:] = np.float32(0.0)
    nb = n - n % 8
    for h0 in range(0, nb, 8):
        for j in range(8):
            d = np.float32(x[r, h0 + j] - shift)
            lanes[j] = _fma32(d, d, lanes[j])
    for j in range(4):
        lanes[j] = np.float32(lanes[j] + lanes[j + 4])
    for j in range(2):
        lanes[j] = np.float32(lanes[j] + lanes[j + 2])
    q = np.float32(lanes[0] + lanes[1])
    k4 = nb + 4 * ((n - nb) // 4)
    for h in range(nb, n):
        d = np.float32(x[r, h] - shift)
        q = np.float32(q + np.float32(d * d)) if h < k4 else _fma32(d, d, q)
    return q


@numba.njit(cache=True)
def _ln_rows(x, scale, bias, has_bias, eps, y, mean_out, inv_out):  # pragma: no cover - compiled
    rows, n = x.shape
    f0 = np.float32(0.0)
    lanes = np.zeros(8, np.float32)
    for r in range(rows):
        if n < 8:
            mean, den = _welford_row(x, r, scale, bias, has_bias, eps, y)
        else:
            acc = 0.0
            for h in range(n):
                acc += np.float64(x[r, h])
            mean = np.float32(acc / n)
            q = _sumsq_lanes(x, r, mean, lanes)
            den = np.float32(np.sqrt(np.float32(np.float32(q / np.float32(n)) + eps)))
            inv = np.float32(np.float32(1.0) / den)
            for h in range(n):
                dr = np.float32(np.float32(x[r, h] - mean) * inv)
                y[r, h] = _fma32(dr, scale[h], bias[h] if has_bias else f0)
        mean_out[r] = mean
        inv_out[r] = np.float32(np.float32(1.0) / den)


@dataclass(frozen=True)
class OrtNormPlan:
    axis: int
    epsilon: float
    n_outputs: int
    fallback: Any  # (kernel, plan) of the generic float kernel
    executed_by: str


_EXECUTED_BY = {
    "LayerNormalization": "ORT LayerNormalization order (Welford below 8, float64 mean and 8 FMA lanes above)",
    "RMSNormalization": "ORT SimplifiedLayerNorm order (sequential below 16 elements, 8 FMA lanes above)",
    "SimplifiedLayerNormalization": "ORT SimplifiedLayerNorm order (sequential below 16 elements, 8 FMA lanes above)",
}


def _prepare_norm(node, ctx):
    """LayerNormalization and the RMS forms: float32, unquantized, float32 statistics (stash_type 1)."""
    first = ctx.inputs[0] if ctx.inputs else None
    tensors = [t for t in list(ctx.inputs) + list(ctx.outputs) if t is not None]
    fk = require(node.op, "float")
    fplan = fk.prepare(node, ctx)
    if first is None or str(first.dtype) != "float32" or any(is_quantized(t) for t in tensors) or \
            int(node.attrs.get("stash_type", 1)) != 1:
        return Delegate(fk, fplan)
    return OrtNormPlan(int(node.attrs.get("axis", -1)), float(node.attrs.get("epsilon", 1e-5)), len(node.outputs),
                       (fk, fplan), _EXECUTED_BY[node.op])


def _rows(plan: OrtNormPlan, x: np.ndarray, *params):
    """(x as contiguous rows of the normalized elements, axis), or None where ORT's broadcasting path
    (or another dtype) applies: every parameter must hold one value per normalized element."""
    axis = plan.axis % x.ndim if x.ndim else 0
    n = int(np.prod(x.shape[axis:])) if x.ndim else 0
    if x.dtype != _F or x.ndim == 0 or n == 0 or any(p is not None and np.size(p) != n for p in params):
        return None
    return np.ascontiguousarray(x.reshape(-1, n)), axis


@kernel("LayerNormalization", VARIANT, prepare=_prepare_norm)
def ort_layer_norm(plan, x, scale, bias=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, scale, bias)
    x = np.asarray(x)
    rows = _rows(plan, x, scale, bias)
    if rows is None:
        fk, fplan = plan.fallback
        return fk.run(fplan, x, scale, bias)
    flat, axis = rows
    y = np.empty_like(flat)
    mean = np.empty(flat.shape[0], _F)
    inv = np.empty(flat.shape[0], _F)
    b = np.ascontiguousarray(bias, _F).reshape(-1) if bias is not None else np.zeros(1, _F)
    _ln_rows(flat, np.ascontiguousarray(scale, _F).reshape(-1), b, bias is not None, _F(plan.epsilon), y, mean, inv)
    if plan.n_outputs == 1:
        return y.reshape(x.shape)
    stat = x.shape[:axis] + (1,) * (x.ndim - axis)
    return y.reshape(x.shape), mean.reshape(stat), inv.reshape(stat)


@numba.njit(cache=True)
def _welford_rows(x, scale, bias, has_bias, eps, y, mean_out, inv_out):  # pragma: no cover - compiled
    for r in range(x.shape[0]):
        mean, den = _welford_row(x, r, scale, bias, has_bias, eps, y)
        mean_out[r] = mean
        inv_out[r] = np.float32(np.float32(1.0) / den)


@kernel(SKIP_OP, VARIANT, prepare=_prepare_skip)
def ort_skip_layer_norm(plan, x, skip, gamma, beta=None, bias=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, skip, gamma, beta, bias)
    x = np.asarray(x)
    n = x.shape[-1] if x.ndim else 0
    sizes_ok = np.size(gamma) == n and all(t is None or np.size(t) == n for t in (beta, bias))
    if x.dtype != _F or n == 0 or not sizes_ok:
        fk, fplan = plan.fallback
        return fk.run(fplan, x, skip, gamma, beta, bias)
    v = (x + np.asarray(skip, _F)).astype(_F)
    if bias is not None:
        v = (v + np.asarray(bias, _F).reshape(-1)).astype(_F)
    flat = np.ascontiguousarray(v.reshape(-1, n))
    y = np.empty_like(flat)
    mean = np.empty(flat.shape[0], _F)
    inv = np.empty(flat.shape[0], _F)
    b = np.ascontiguousarray(beta, _F).reshape(-1) if beta is not None else np.zeros(1, _F)
    _welford_rows(flat, np.ascontiguousarray(gamma, _F).reshape(-1), b, beta is not None, _F(plan.epsilon),
                  y, mean, inv)
    stat = v.shape[:-1] + (1,)
    return y.reshape(v.shape), mean.reshape(stat), inv.reshape(stat), v


@numba.njit(cache=True)
def _rms_lanes_rows(x, scale, eps, y, inv_out):  # pragma: no cover - compiled
    rows, n = x.shape
    lanes = np.zeros(8, np.float32)
    for r in range(rows):
        if n < 16:
            den = _rms_seq_row(x, r, scale, eps, y)
        else:
            q = _sumsq_lanes(x, r, np.float32(0.0), lanes)
            den = np.float32(np.sqrt(np.float32(np.float32(q / np.float32(n)) + eps)))
            inv = np.float32(np.float32(1.0) / den)
            for h in range(n):
                y[r, h] = _fma32(np.float32(x[r, h] * inv), scale[h], np.float32(0.0))
        inv_out[r] = np.float32(np.float32(1.0) / den)


RMS_OPS = ("RMSNormalization", "SimplifiedLayerNormalization")


@kernel(RMS_OPS, VARIANT, prepare=_prepare_norm)
def ort_rms_norm(plan, x, scale):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, scale)
    x = np.asarray(x)
    rows = _rows(plan, x, scale)
    if rows is None:
        fk, fplan = plan.fallback
        return fk.run(fplan, x, scale)
    flat, axis = rows
    y = np.empty_like(flat)
    inv = np.empty(flat.shape[0], _F)
    _rms_lanes_rows(flat, np.ascontiguousarray(scale, _F).reshape(-1), _F(plan.epsilon), y, inv)
    if plan.n_outputs == 1:
        return y.reshape(x.shape)
    return y.reshape(x.shape), inv.reshape(x.shape[:axis] + (1,) * (x.ndim - axis))
