"""ONNX Runtime contrib ops (domain com.microsoft) that ORT's transformer optimizer, quantizer and
exporters emit, with the semantics of ORT's CPU kernels (float32; equal to ORT to float rounding):

* ``FusedMatMul(A, B)``: alpha * op(A) @ op(B), op = transpose of the last two axes when transA /
  transB; transBatchA / transBatchB first move an operand's axis 0 behind its batch axes ([M, b.., K]
  read as [b.., M, K], ORT's matmul_helper.h; both operands of one rank >= 3);
* ``Gelu(X)`` = X * (1 + erf(X / sqrt 2)) / 2; ``BiasGelu(A, B)`` = Gelu(A + B);
  ``FastGelu(X, bias?)``: the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) of x + bias;
  ``QuickGelu(X)`` = X * sigmoid(alpha X) (alpha 1.702);
* ``SkipLayerNormalization(input, skip, gamma, beta?, bias?)``: s = input + skip (+ bias), then
  layer normalization over the last axis with epsilon; outputs (y, mean, inv_std_var, s);
  ``SkipSimplifiedLayerNormalization(input, skip, gamma, bias?)``: s as above, then RMS
  normalization y = s / sqrt(mean(s^2) + epsilon) * gamma; outputs (y, mean (unused: 0),
  inv_std_var, s).
"""
from __future__ import annotations

import math

import numpy as np

from refinterp.errors import InputError, ModelError, UnsupportedOpError
from ..float.elementwise import erf as float_erf
from .common import MS
from ..registry import AttrPlan, attr_plan, kernel

F32 = np.float32


def _attrs(node, ctx) -> AttrPlan:
    p = attr_plan(node, ctx)
    if node.op == MS + "FusedMatMul" and (int(p.attr("transBatchA", 0)) or int(p.attr("transBatchB", 0))):
        ranks = [None if t is None or t.shape is None else len(t.shape) for t in list(ctx.inputs)[:2]]
        if None not in ranks and (ranks[0] != ranks[1] or ranks[0] < 3):
            raise ModelError(f"{p.where}: transBatchA / transBatchB need two operands of one rank >= 3, "
                             f"got ranks {ranks}")
    return p


def trans_batch(x, flag):
    """``x`` [d0, b.., d_last] read as [b.., d0, d_last] when ``flag`` (transBatchA / transBatchB)."""
    x = np.asarray(x)
    if flag and x.ndim < 3:
        raise InputError(f"transBatchA / transBatchB need rank >= 3, got {list(x.shape)}")
    return np.moveaxis(x, 0, -2) if flag else x


def swap_last_two(x, flag):
    """``x`` with its last two axes swapped when ``flag`` (transA / transB); 1-D operands as they are."""
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@kernel(MS + "FusedMatMul", "float", prepare=_attrs)
def fused_matmul(p, a, b):
    a, b = trans_batch(a, int(p.attr("transBatchA", 0))), trans_batch(b, int(p.attr("transBatchB", 0)))
    y = np.matmul(swap_last_two(a, int(p.attr("transA", 0))), swap_last_two(b, int(p.attr("transB", 0))))
    alpha = float(p.attr("alpha", 1.0))
    return (y * F32(alpha) if alpha != 1.0 else y).astype(a.dtype, copy=False)


def _gelu(x):
    """x (1 + erf(x / sqrt 2)) / 2 in float64 (libm erf), rounded once to x's dtype."""
    x64 = np.asarray(x).astype(np.float64)
    return (0.5 * x64 * (1.0 + float_erf(x64 / math.sqrt(2.0)))).astype(np.asarray(x).dtype)


@kernel(MS + "Gelu", "float", prepare=_attrs)
def gelu(p, x):
    return _gelu(np.asarray(x))


@kernel(MS + "BiasGelu", "float", prepare=_attrs)
def bias_gelu(p, a, b):
    return _gelu((np.asarray(a) + np.asarray(b)).astype(np.asarray(a).dtype))


@kernel(MS + "FastGelu", "float", prepare=_attrs)
def fast_gelu(p, x, bias=None):
    v = np.asarray(x) if bias is None else np.asarray(x) + np.asarray(bias)
    v64 = v.astype(np.float64)
    y = 0.5 * v64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v64 + 0.044715 * v64 ** 3)))
    return y.astype(v.dtype)


@kernel(MS + "QuickGelu", "float", prepare=_attrs)
def quick_gelu(p, x):
    x = np.asarray(x)
    alpha = float(p.attr("alpha", 1.702))
    return (x / (1.0 + np.exp(-alpha * x.astype(np.float64)))).astype(x.dtype)


def _skip_sum(x, skip, bias):
    s = np.asarray(x, np.float32) + np.asarray(skip, np.float32)
    return s if bias is None else s + np.asarray(bias, np.float32)


@kernel(MS + "SkipLayerNormalization", "float", prepare=_attrs)
def skip_layer_norm(p, x, skip, gamma, beta=None, bias=None):
    s = _skip_sum(x, skip, bias)
    eps = float(p.attr("epsilon", 1e-12))
    s64 = s.astype(np.float64)
    mean = s64.mean(axis=-1, keepdims=True)
    var = (s64 * s64).mean(axis=-1, keepdims=True) - mean * mean
    inv = 1.0 / np.sqrt(var + eps)
    y = (s64 - mean) * inv * np.asarray(gamma, np.float64)
    if beta is not None:
        y = y + np.asarray(beta, np.float64)
    return y.astype(F32), mean.astype(F32), inv.astype(F32), s


@kernel(MS + "SkipSimplifiedLayerNormalization", "float", prepare=_attrs)
def skip_simplified_layer_norm(p, x, skip, gamma, bias=None):
    s = _skip_sum(x, skip, bias)
    eps = float(p.attr("epsilon", 1e-12))
    s64 = s.astype(np.float64)
    inv = 1.0 / np.sqrt((s64 * s64).mean(axis=-1, keepdims=True) + eps)
    y = s64 * inv * np.asarray(gamma, np.float64)
    return y.astype(F32), np.zeros_like(inv, F32), inv.astype(F32), s


# -- com.microsoft.DynamicQuantizeMatMul ------------------------------------------------------------
# Y = float32 (A quantized per tensor to uint8 as DynamicQuantizeLinear (ORT form)) x (B int8 / uint8
# with b_scale, b_zero_point per tensor or per column):
#   acc[m, n] = sum_k (qa[m, k] - za) (B[k, n] - zb[n])                (int32, exact)
#   Y[m, n]   = f32(acc) * f32(a_scale * b_scale[n]) (+ bias[n])        (float32)

def _prepare_dqmm(node, ctx) -> AttrPlan:
    p = _attrs(node, ctx)
    b = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    if b is None or b.dtype not in ("int8", "uint8"):
        raise UnsupportedOpError(f"{p.where}: B must be int8 or uint8")
    return p


@kernel(MS + "DynamicQuantizeMatMul", "float", prepare=_prepare_dqmm, raw_inputs=True)
def dynamic_quantize_matmul(p, a, b, b_scale, b_zp=None, bias=None):
    from .quantize import dql_ort

    qa, sa, za = dql_ort(None, np.asarray(a, F32))
    bi = np.asarray(b).astype(np.int64)
    zb = 0 if b_zp is None else np.asarray(b_zp).astype(np.int64)
    acc = np.matmul(qa.astype(np.int64) - int(za), bi - zb)
    scale = (F32(sa) * np.asarray(b_scale, F32)).astype(F32)
    y = (acc.astype(F32) * scale).astype(F32)
    if bias is not None:
        y = (y + np.asarray(bias, F32)).astype(F32)
    return y
