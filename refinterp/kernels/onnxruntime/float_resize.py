"""Resize variant ``ort_float``: ONNX Runtime CPU's float32 bilinear upsampling
(onnxruntime/core/providers/cpu/tensor/upsample.cc SetupUpsampleBilinear + upsample.h
UpsampleBilinear; coordinate functions of upsamplebase.h), for mode ``linear`` on a 2-D input or a
4-D NCHW one (outer scales 1).  Everything in float32, no fused multiply-add::

    scale   = the scales input, or f32(out) / f32(in) from sizes;  out = trunc(f32(scale * in))
    src     = half_pixel: (o + 0.5) / scale - 0.5;  asymmetric: o / scale;  align_corners:
              o * (in - 1) / (out - 1) (0 if out == 1);  pytorch_half_pixel: as half_pixel if out > 1
              else 0;  tf_half_pixel_for_nn: (o + 0.5) / scale;  src = o when scale == 1
    s       = clamp(src, 0, in - 1);  i1 = min(trunc(s), in - 1);  i2 = min(i1 + 1, in - 1)
    d1 = |s - i1|,  d2 = |s - i2|   (both 0.5 when i1 == i2)
    y = ((dx2 dy2) X11 + (dx1 dy2) X21) + (dx2 dy1) X12) + (dx1 dy1) X22   (left to right, each
        product and sum rounded)

A linear Resize that ORT_ENABLE_ALL's NchwcTransformer rewrites (marked ``_ort_nchwc`` by the
``ort_nchwc16`` / ``ort_nchwc8`` pass, refinterp/passes/ort_nchwc.py) runs MLAS's NCHWc kernel
instead (onnxruntime/contrib_ops/cpu/nchwc_ops.cc NchwcUpsample::ComputeInterpolation and
mlas/lib/snchwc.cpp MlasNchwcUpsampleLinear), integer scales only, float32, no fused multiply-add::

    src     = o when the scale is 1;  half_pixel: max(0, (o + 0.5) / scale - 0.5);  asymmetric:
              o / scale;  align_corners: o * (in - 1) / (out - 1)
    i0 = trunc(src),  i1 = min(i0 + 1, in - 1),  f = src - i0,  g = 1 - f   (no clamp of src)
    y = ((g_y g_x) X00 + (g_y f_x) X01) + ((f_y g_x) X10 + (f_y f_x) X11)

Other modes, ranks, layouts, antialias, tf_crop_and_resize, half_pixel_symmetric and quantized
nodes run the generic kernels (``float`` / ``ort``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.passes.ort_nchwc import MARK
from .common import is_quantized
from ..registry import Delegate, kernel, require

F32 = np.float32
_CTMS = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn")


@dataclass(frozen=True)
class NchwcPlan:
    """A Resize ORT runs as com.microsoft.nchwc.Upsample (linear mode)."""
    ctm: str
    factors: tuple[int, int]  # integral height / width scale factors
    fallback: Any             # Delegate to ORT's ordinary float Resize (an input that is not 4-D float32)


def _prepare(node, ctx):
    quantized = any(is_quantized(t) for t in ctx.inputs[:1]) or any(is_quantized(t) for t in ctx.outputs)
    fk = require("Resize", "ort" if quantized else "float")
    fplan = fk.prepare(node, ctx)
    if node.attr(MARK) and not quantized and fplan.mode == "linear":
        x = ctx.inputs[0]
        scales, sizes = ctx.const(2), ctx.const(3)
        if sizes is not None and np.size(sizes):
            f = [int(s) // int(d) for s, d in zip(np.asarray(sizes).ravel(), x.shape)]
        else:
            f = [int(v) for v in np.asarray(scales, F32).ravel()]
        return NchwcPlan(fplan.ctm, (f[2], f[3]), Delegate(fk, fplan))
    x = ctx.inputs[0] if ctx.inputs else None
    ok = (not quantized and x is not None and x.dtype == "float32" and fplan.mode == "linear"
          and fplan.ctm in _CTMS and not fplan.antialias and fplan.axes is None and fplan.layout == "NCHW"
          and fplan.keep_aspect_ratio_policy == "stretch")
    return fplan if ok else Delegate(fk, fplan)


def _coords(ctm: str, n_in: int, n_out: int, scale: np.float32):
    o = np.arange(n_out, dtype=F32)
    if scale == F32(1):
        src = o
    elif ctm == "asymmetric":
        src = (o / scale).astype(F32)
    elif ctm == "tf_half_pixel_for_nn":
        src = ((o + F32(0.5)) / scale).astype(F32)
    elif ctm == "align_corners":
        src = (np.zeros(n_out, F32) if n_out == 1 else
               ((o * F32(n_in - 1)).astype(F32) / F32(n_out - 1)).astype(F32))
    elif ctm == "pytorch_half_pixel" and n_out <= 1:
        src = np.zeros(n_out, F32)
    else:  # half_pixel, pytorch_half_pixel
        src = (((o + F32(0.5)) / scale).astype(F32) - F32(0.5)).astype(F32)
    s = np.clip(src, F32(0), F32(n_in - 1)).astype(F32)
    i1 = np.minimum(s.astype(np.int64), n_in - 1)
    i2 = np.minimum(i1 + 1, n_in - 1)
    d1 = np.abs(s - i1.astype(F32)).astype(F32)
    d2 = np.abs(s - i2.astype(F32)).astype(F32)
    same = i1 == i2
    d1[same] = F32(0.5)
    d2[same] = F32(0.5)
    return i1, i2, d1, d2


def _scales(x, scales, sizes):
    """(height scale, width scale, output height, output width) as ORT forms them, or None."""
    dims = x.shape
    if sizes is not None and np.size(sizes):
        sz = [int(v) for v in np.asarray(sizes).ravel()]
        if len(sz) != x.ndim:
            return None
        sc = [F32(F32(o) / F32(i)) if i else F32(1) for o, i in zip(sz, dims)]
    elif scales is not None and np.size(scales):
        sc = [F32(v) for v in np.asarray(scales, F32).ravel()]
        if len(sc) != x.ndim:
            return None
        sz = [int(F32(s * F32(i))) for s, i in zip(sc, dims)]
    else:
        return None
    if x.ndim == 4 and (sc[0] != F32(1) or sc[1] != F32(1) or sz[0] != dims[0] or sz[1] != dims[1]):
        return None
    return sc[-2], sc[-1], sz[-2], sz[-1]


def _nchwc_coords(ctm: str, n_in: int, factor: int):
    """(i0, i1, f, g) of NchwcUpsample::ComputeInterpolation + MlasNchwcExtractInterpolation."""
    n_out = n_in * factor
    o = np.arange(n_out, dtype=F32)
    if factor == 1:
        src = o
    elif ctm == "align_corners":
        src = ((o * F32(n_in - 1)).astype(F32) / F32(n_out - 1)).astype(F32)
    elif ctm == "half_pixel":
        src = np.maximum(F32(0), (((o + F32(0.5)) / F32(factor)).astype(F32) - F32(0.5)).astype(F32))
    else:  # asymmetric
        src = (o / F32(factor)).astype(F32)
    i0 = src.astype(np.int64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    f = (src - i0.astype(F32)).astype(F32)
    return i0, i1, f, (F32(1) - f).astype(F32)


def _nchwc_upsample(plan: NchwcPlan, x: np.ndarray) -> np.ndarray:
    h, w = x.shape[-2:]
    y0, y1, fy, gy = _nchwc_coords(plan.ctm, h, plan.factors[0])
    x0, x1, fx, gx = _nchwc_coords(plan.ctm, w, plan.factors[1])
    a = x.astype(F32, copy=False)
    w00 = (gy[:, None] * gx[None, :]).astype(F32)
    w01 = (gy[:, None] * fx[None, :]).astype(F32)
    w10 = (fy[:, None] * gx[None, :]).astype(F32)
    w11 = (fy[:, None] * fx[None, :]).astype(F32)
    r0 = ((w00 * a[..., y0[:, None], x0[None, :]]).astype(F32)
          + (w01 * a[..., y0[:, None], x1[None, :]]).astype(F32)).astype(F32)
    r1 = ((w10 * a[..., y1[:, None], x0[None, :]]).astype(F32)
          + (w11 * a[..., y1[:, None], x1[None, :]]).astype(F32)).astype(F32)
    return (r0 + r1).astype(F32)


@kernel("Resize", "ort_float", prepare=_prepare)
def ort_resize(plan, x, roi=None, scales=None, sizes=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x, roi, scales, sizes)
    if isinstance(plan, NchwcPlan):
        x = np.asarray(x)
        if x.ndim == 4 and x.dtype == F32:
            return _nchwc_upsample(plan, x)
        return ort_resize(plan.fallback.plan, x, roi, scales, sizes)
    x = np.asarray(x)
    geo = _scales(x, scales, sizes) if x.ndim in (2, 4) and x.dtype == F32 else None
    if geo is None:
        return require("Resize", "float").run(plan, x, roi, scales, sizes)
    sh, sw, oh, ow = geo
    h, w = x.shape[-2:]
    y1, y2, dy1, dy2 = _coords(plan.ctm, h, oh, sh)
    x1, x2, dx1, dx2 = _coords(plan.ctm, w, ow, sw)
    a = x.astype(F32, copy=False)
    X11, X21 = a[..., y1[:, None], x1[None, :]], a[..., y1[:, None], x2[None, :]]
    X12, X22 = a[..., y2[:, None], x1[None, :]], a[..., y2[:, None], x2[None, :]]
    w11 = (dx2[None, :] * dy2[:, None]).astype(F32)
    w21 = (dx1[None, :] * dy2[:, None]).astype(F32)
    w12 = (dx2[None, :] * dy1[:, None]).astype(F32)
    w22 = (dx1[None, :] * dy1[:, None]).astype(F32)
    y = ((w11 * X11).astype(F32) + (w21 * X21).astype(F32)).astype(F32)
    y = (y + (w12 * X12).astype(F32)).astype(F32)
    return (y + (w22 * X22).astype(F32)).astype(F32)
