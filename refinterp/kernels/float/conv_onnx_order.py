"""Conv variant ``onnx_ref_float``: a float Conv summed in onnx.reference's order (the ``onnx-reference``
scheme), so that its outputs equal ReferenceEvaluator's bit for bit on the same machine.

onnx.reference (onnx 1.23, ops/op_conv.py) forms one matrix of columns for the whole batch: rows in
(input channel, kernel position row-major) order, one column per (image, output position), zero
padding; a dilated kernel is first expanded to its dilated extent with zeros.  It then multiplies
W as (group, C_out / group, K) by the columns as (group, K, N) with one NumPy matmul (C-contiguous
float32 operands: the same BLAS calls), reorders to (N, C_out, *out) and adds the bias in one
float32 addition.  This kernel builds the same operands and makes the same call, at the BLAS thread
count the process has outside refinterp (OpenBLAS's SGEMM kernel, hence its order, depends on it:
``settings.blas_as_outside``); the generic
``float`` kernel sums in another order (SqueezeNet's equal 1e10 logits differ by one ulp).
NCHW float32 only; quantized nodes run the ``onnx_ref`` integer kernels.
"""
from __future__ import annotations

import numpy as np

from refinterp.settings import blas_as_outside
from ..registry import Delegate, kernel, require
from ..spatial import im2col, ints, resolve_window
from .conv import prepare_node


def _prepare(node, ctx):
    quantized = any(t is not None and t.quant is not None and t.dtype != "float32"
                    for t in list(ctx.inputs[:1]) + list(ctx.outputs[:1]))
    if quantized:
        k = require(node.op, "onnx_ref")
        return Delegate(k, k.prepare(node, ctx))
    plan = prepare_node(node, ctx, depthwise=node.op == "DepthwiseConv")
    if plan.layout != "NCHW" or plan.weight_layout != "OIHW" or node.attrs.get("activation"):
        k = require(node.op, "float")
        return Delegate(k, k.prepare(node, ctx))
    return plan


def _dilated(w: np.ndarray, dil) -> np.ndarray:
    if all(d == 1 for d in dil):
        return w
    ks = w.shape[2:]
    out = np.zeros(w.shape[:2] + tuple((k - 1) * d + 1 for k, d in zip(ks, dil)), w.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dil)] = w
    return out


@kernel(("Conv", "DepthwiseConv"), "onnx_ref_float", prepare=_prepare)
def conv_onnx_order(plan, x, w, b=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x, w, b)
    x = np.asarray(x)
    w = np.asarray(w)
    if x.dtype != np.float32 or w.dtype != np.float32:
        return require("Conv", "float").run(plan, x, w, b)
    nsp = x.ndim - 2
    group = plan.group or x.shape[1]
    dil = ints(plan.dilations, nsp, 1)
    wd = _dilated(w, dil)
    win = resolve_window(x.shape[2:], wd.shape[2:], ints(plan.strides, nsp, 1), [1] * nsp, plan.pads,
                         plan.auto_pad, where=plan.name)
    n = x.shape[0]
    ksize = int(np.prod(win.kernel))
    # rows (channel, tap), columns (image, position): (C * ksize, N * P), C-contiguous
    cols = np.concatenate([im2col(x[i], win) for i in range(n)], axis=1)
    kflat = wd.shape[1] * ksize
    with blas_as_outside():  # the reference calls BLAS at the process's thread count
        mul = np.ascontiguousarray(wd).reshape(group, wd.shape[0] // group, kflat) @ cols.reshape(group, kflat, -1)
    mul = mul.reshape((group, wd.shape[0] // group, n) + tuple(win.out))
    y = mul.transpose((2, 0, 1) + tuple(range(3, mul.ndim))).reshape((n, wd.shape[0]) + tuple(win.out))
    if b is not None:
        b = np.asarray(b, np.float32)
        y = y + b if b.size == 1 else y + b.reshape((1, -1) + (1,) * nsp)
    return y.astype(np.float32)
