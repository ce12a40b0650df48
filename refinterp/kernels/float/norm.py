"""Float normalizations: BatchNormalization, LayerNormalization, InstanceNormalization,
LpNormalization, LRN (ONNX formula) and L2Normalization (TFLite).

Statistics are computed in float32 (float64 for float64 inputs; LayerNormalization follows
``stash_type``: 1 = float32, else the input's dtype); float16 inputs are rounded once at the end.
The channel axis is 1 for ``layout`` NCHW (ONNX default) and -1 for NHWC.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ..spatial import compute_dtype, out_dtype
from ..registry import kernel


def _channel_axis(plan, x) -> int:
    layout = plan.layout if isinstance(plan, BatchNormPlan) else plan.attr("layout")
    return x.ndim - 1 if layout == "NHWC" else min(1, x.ndim - 1)


def _per_channel(v, cdt, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return np.asarray(v, dtype=cdt).reshape(shape)


@dataclass(frozen=True)
class BatchNormPlan:
    epsilon: float
    momentum: float
    training_mode: int
    layout: str  # NCHW | NHWC


def _prepare_bn(node, ctx) -> BatchNormPlan:
    a = node.attrs
    return BatchNormPlan(float(a.get("epsilon", 1e-5)), float(a.get("momentum", 0.9)),
                         int(a.get("training_mode", 0)), a.get("layout") or "NCHW")


@kernel("BatchNormalization", "float", prepare=_prepare_bn)
def batch_normalization(plan, x, scale, bias, mean, var):
    """y = (x - mean) / sqrt(var + eps) * scale + bias.

    training_mode=1: mean/var are the batch statistics (population variance over every axis but
    the channel one) and the outputs add running_mean/var = stored * momentum + batch * (1 - momentum).
    """
    cdt = compute_dtype(x)
    ax = _channel_axis(plan, x)
    xc = x.astype(cdt, copy=False)
    pc = (lambda v: _per_channel(v, cdt, x.ndim, ax))
    eps = cdt.type(plan.epsilon)
    if plan.training_mode:
        red = tuple(i for i in range(x.ndim) if i != ax)
        bmean = xc.mean(axis=red)
        bvar = xc.var(axis=red)
        y = (xc - pc(bmean)) / np.sqrt(pc(bvar) + eps) * pc(scale) + pc(bias)
        m = cdt.type(plan.momentum)
        rm = np.asarray(mean, cdt) * m + bmean * (1 - m)
        rv = np.asarray(var, cdt) * m + bvar * (1 - m)
        od = out_dtype(x)
        return y.astype(od), rm.astype(np.asarray(mean).dtype), rv.astype(np.asarray(var).dtype)
    y = (xc - pc(mean)) / np.sqrt(pc(var) + eps) * pc(scale) + pc(bias)
    return y.astype(out_dtype(x), copy=False)


@dataclass(frozen=True)
class LayerNormPlan:
    axis: int
    epsilon: float
    stash_type: int  # 1: statistics in float32
    n_outputs: int


def _prepare_ln(node, ctx) -> LayerNormPlan:
    a = node.attrs
    return LayerNormPlan(int(a.get("axis", -1)), float(a.get("epsilon", 1e-5)), int(a.get("stash_type", 1)),
                         len(node.outputs))


def _stash_dtype(stash_type: int, x: np.ndarray) -> np.dtype:
    """The statistics' type: float32 for stash_type 1 (float64 inputs keep float64), else the input's
    compute type."""
    return np.dtype(np.float32) if stash_type == 1 and x.dtype != np.float64 else compute_dtype(x)


@kernel("LayerNormalization", "float", prepare=_prepare_ln)
def layer_normalization(plan, x, scale, bias=None):
    """Normalize over axes [axis, rank); outputs Y and, when asked, Mean and InvStdDev
    (shape x.shape[:axis] + 1s, in the stash type)."""
    axis = plan.axis % x.ndim
    cdt = _stash_dtype(plan.stash_type, x)
    if plan.stash_type != 1 and x.dtype == np.float16:
        cdt = np.dtype(np.float16)
    xc = x.astype(cdt, copy=False)
    red = tuple(range(axis, x.ndim))
    mean = xc.mean(axis=red, keepdims=True)
    d = xc - mean
    var = (d * d).mean(axis=red, keepdims=True)
    inv = (1 / np.sqrt(var + cdt.type(plan.epsilon))).astype(cdt)
    y = d * inv * np.asarray(scale, cdt)
    if bias is not None:
        y = y + np.asarray(bias, cdt)
    y = y.astype(out_dtype(x), copy=False)
    if plan.n_outputs > 1:
        return y, mean, inv
    return y


@kernel(("RMSNormalization", "SimplifiedLayerNormalization"), "float", prepare=_prepare_ln)
def rms_normalization(plan, x, scale):
    """x / sqrt(mean(x^2 over [axis, rank)) + epsilon) * scale, statistics in the stash type
    (SimplifiedLayerNormalization: ONNX Runtime's op of the same maths, what its
    SimplifiedLayerNormFusion makes; its optional second output, 1 / the root, is also given)."""
    axis = plan.axis % x.ndim
    cdt = _stash_dtype(plan.stash_type, x)
    xc = x.astype(cdt, copy=False)
    ms = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    root = np.sqrt(ms + cdt.type(plan.epsilon))
    y = (xc / root * np.asarray(scale, cdt)).astype(out_dtype(x), copy=False)
    return (y, (1 / root).astype(cdt)) if plan.n_outputs > 1 else y


@kernel("GroupNormalization", "float")
def group_normalization(plan, x, scale, bias):
    """(N, C, ...) split into ``num_groups`` groups of C / G channels; each group normalized over its
    channels and spatial axes (statistics in float32 for stash_type 1), then per-channel scale / bias."""
    g = int(plan.attr("num_groups"))
    n, c = x.shape[:2]
    if g <= 0 or c % g:
        raise ModelError(f"{plan.where}: {c} channels not divisible into {g} groups")
    cdt = _stash_dtype(int(plan.attr("stash_type", 1)), x)
    xg = x.astype(cdt).reshape(n, g, -1)
    mean = xg.mean(axis=2, keepdims=True)
    d = xg - mean
    var = (d * d).mean(axis=2, keepdims=True)
    y = (d / np.sqrt(var + cdt.type(float(plan.attr("epsilon", 1e-5))))).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = y * np.asarray(scale, cdt).reshape(shape) + np.asarray(bias, cdt).reshape(shape)
    return y.astype(out_dtype(x), copy=False)


@kernel("InstanceNormalization", "float")
def instance_normalization(plan, x, scale, bias):
    """Per (n, c): (x - mean) / sqrt(var + eps) * scale[c] + bias[c] over the spatial axes."""
    cdt = compute_dtype(x)
    ax = _channel_axis(plan, x)
    xc = x.astype(cdt, copy=False)
    red = tuple(i for i in range(1, x.ndim) if i != ax)
    mean = xc.mean(axis=red, keepdims=True)
    var = ((xc - mean) ** 2).mean(axis=red, keepdims=True)
    eps = cdt.type(float(plan.attr("epsilon", 1e-5)))
    y = (xc - mean) / np.sqrt(var + eps) * _per_channel(scale, cdt, x.ndim, ax) \
        + _per_channel(bias, cdt, x.ndim, ax)
    return y.astype(out_dtype(x), copy=False)


@kernel("LpNormalization", "float")
def lp_normalization(plan, x):
    """x / ||x||_p along ``axis`` (p = 1 or 2, no epsilon); a zero vector stays 0 (ONNX's own test data)."""
    cdt = compute_dtype(x)
    axis = int(plan.attr("axis", -1))
    p = int(plan.attr("p", 2))
    xc = x.astype(cdt, copy=False)
    if p == 1:
        norm = np.abs(xc).sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt((xc * xc).sum(axis=axis, keepdims=True))
    return (xc / np.where(norm == 0, cdt.type(1), norm)).astype(out_dtype(x), copy=False)


@kernel("LRN", "float")
def lrn(plan, x):
    """ONNX LRN: y = x / (bias + alpha/size * sum_{c' in [c - (size-1)//2, c + ceil((size-1)/2)]} x^2)^beta."""
    cdt = compute_dtype(x)
    size = int(plan.attr("size"))
    alpha = float(plan.attr("alpha", 1e-4))
    beta = float(plan.attr("beta", 0.75))
    bias = float(plan.attr("bias", 1.0))
    ax = _channel_axis(plan, x)
    xc = np.moveaxis(x.astype(cdt, copy=False), ax, -1)
    sq = xc * xc
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    c = xc.shape[-1]
    padded = np.pad(sq, [(0, 0)] * (sq.ndim - 1) + [(lo, hi)])
    ssum = np.zeros_like(sq)
    for k in range(lo + hi + 1):
        ssum += padded[..., k:k + c]
    y = xc / (cdt.type(bias) + cdt.type(alpha / size) * ssum) ** cdt.type(beta)
    return np.moveaxis(y, -1, ax).astype(out_dtype(x), copy=False)


@kernel("L2Normalization", "float")
def l2_normalization(plan, x):
    """TFLite L2_NORMALIZATION float: y = x / max(sqrt(sum x^2), 1e-6) along the last axis
    (reference_ops / optimized_ops: epsilon applies to the norm, not to the squared sum)."""
    cdt = compute_dtype(x)
    axis = int(plan.attr("axis", -1))
    eps = cdt.type(float(plan.attr("epsilon", 1e-6)))
    xc = x.astype(cdt, copy=False)
    norm = np.maximum(np.sqrt((xc * xc).sum(axis=axis, keepdims=True)), eps)
    return (xc / norm).astype(out_dtype(x), copy=False)
