"""PyTorch quantized average pooling (variants ``fbgemm`` and ``qnnpack``): AveragePool (2-D,
NCHW, ceil_mode 0) and GlobalAveragePool (= adaptive_avg_pool2d to 1x1).  Torch keeps the input's
quantization parameters on the output; other output parameters are accepted and used as written.

Numeric contracts (torch 2.13.0; tests/conformance/test_torch_quant_ops.py):
    acc = sum over the in-bounds window cells of (x - zx)    exact int32
    div = kernel area (count_include_pad) or in-bounds cell count
* fbgemm AveragePool / GlobalAveragePool: m = f32(f32(xs / ys) / div);
  y = clamp(RNE(fma(acc, f32(1 / f32(1 / m)), zy)))   (quantize_val with scale 1/m: zero point in float)
* qnnpack AveragePool: QNNPACK's q8avgpool (24-bit fixed point, ties away) is kept as the
  ``qnnpack`` kernel, but torch 2.13 runs NCHW avg_pool2d through the ATen kernel on the qnnpack
  engine too, so qnnpack.yaml selects the fbgemm kernel for AveragePool.
* qnnpack GlobalAveragePool (PyTorch QNNPACK global average pooling, fp32 requantization):
  y = clamp(RNE(f32(acc * f32(xs / f32(ys * N)))) + zy)  (zero point after rounding).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from refinterp.errors import UnsupportedOpError
from refinterp.quant import torchq
from ..onnxruntime.common import ort_kernel
from ..tflite.common import qparams, qrange, where

F32 = np.float32


@dataclass(frozen=True)
class TorchPoolPlan:
    xs: float
    zx: int
    ys: float
    zy: int
    lo: int
    hi: int
    dtype: str
    k: tuple  # kernel_shape
    s: tuple  # strides
    pads: tuple  # (top, left, bottom, right)
    incl: int  # count_include_pad
    node: Any


def _prepare(node, ctx) -> TorchPoolPlan:
    xs, zx = qparams(ctx.inputs[0], node, "X")
    ys, zy = qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    if (node.attrs.get("layout") or "NCHW") != "NCHW" or int(node.attrs.get("ceil_mode", 0)):
        raise UnsupportedOpError(f"{where(node)}: only NCHW, ceil_mode 0 pooling is modelled for torch engines")
    return TorchPoolPlan(xs, zx, ys, zy, lo, hi, ctx.outputs[0].dtype, tuple(node.attrs.get("kernel_shape") or ()),
                         tuple(node.attrs.get("strides") or (1, 1)), tuple(node.attrs.get("pads") or (0, 0, 0, 0)),
                         int(node.attrs.get("count_include_pad", 0)), node)


def _window_sums(p, x):
    kh, kw = p.k
    t, l, b, r = p.pads
    v = np.pad(np.asarray(x).astype(np.int64) - p.zx, ((0, 0), (0, 0), (t, b), (l, r)))
    ones = np.pad(np.ones(np.asarray(x).shape[2:], np.int64), ((t, b), (l, r)))
    sh, sw = p.s
    acc = sliding_window_view(v, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw].sum(axis=(-1, -2))
    cnt = sliding_window_view(ones, (kh, kw))[::sh, ::sw].sum(axis=(-1, -2))
    div = np.full(cnt.shape, kh * kw, np.int64) if p.incl else cnt
    return acc, div


def _fbgemm(p, acc, div):
    m = (F32(F32(p.xs) / F32(p.ys)) / np.asarray(div).astype(F32)).astype(F32)
    mult = torchq.inv_scale(torchq.inv_scale(m))
    v = torchq.fma_f32(np.asarray(acc).astype(F32), mult, np.float64(p.zy))
    return np.clip(np.rint(v), p.lo, p.hi).astype(np.int64)


@ort_kernel("AveragePool", "fbgemm", _prepare)
def fbgemm_avgpool(p, x):
    acc, div = _window_sums(p, x)
    return _fbgemm(p, acc, div).astype(p.dtype)


@ort_kernel("AveragePool", "qnnpack", _prepare)
def qnnpack_avgpool(p, x):
    acc, div = _window_sums(p, x)
    out = np.empty(acc.shape, np.int64)
    for d in np.unique(div):  # one (multiplier, shift) per divisor value: at most a few
        mult, shift = torchq.qnnpack_avgpool_params(p.xs, p.ys, int(d))
        sel = np.broadcast_to(div == d, acc.shape)
        out[sel] = torchq.qnnpack_avgpool(acc[sel], mult, shift, p.zy, p.lo, p.hi)
    return out.astype(p.dtype)


def _gap_acc(p, x):
    x = np.asarray(x).astype(np.int64)
    n = int(np.prod(x.shape[2:]))
    return x.sum(axis=tuple(range(2, x.ndim)), keepdims=True) - p.zx * n, n


@ort_kernel("GlobalAveragePool", "fbgemm", _prepare)
def fbgemm_gap(p, x):
    acc, n = _gap_acc(p, x)
    return _fbgemm(p, acc, n).astype(p.dtype)


@ort_kernel("GlobalAveragePool", "qnnpack", _prepare)
def qnnpack_gap(p, x):
    acc, n = _gap_acc(p, x)
    scale = F32(F32(p.xs) / F32(F32(p.ys) * F32(n)))
    v = (acc.astype(F32) * scale).astype(F32)
    return np.clip(np.rint(v).astype(np.int64) + p.zy, p.lo, p.hi).astype(p.dtype)
