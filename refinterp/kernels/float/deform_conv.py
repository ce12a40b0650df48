"""ONNX DeformConv (opset 19; deformable convolution, DCN v1 / v2 with ``mask``), 2-D, float.

For output cell (i, j) and kernel tap (ki, kj) the input is sampled at
``(i * stride_h - pad_top + ki * dil_h + dy, j * stride_w - pad_left + kj * dil_w + dx)``, where
(dy, dx) = offset[n, ((g * kH + ki) * kW + kj) * 2 + (0, 1), i, j] for the tap's offset group g,
by bilinear interpolation with zeros outside the image, times mask[n, (g * kH + ki) * kW + kj, i, j]
(1 without a mask); then an ordinary (grouped) convolution of those samples with W, plus B.
Computed in float64, rounded once to the input's type.
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..registry import attr_plan, kernel


def _bilinear(img: np.ndarray, ph: np.ndarray, pw: np.ndarray) -> np.ndarray:
    """img [N, Cg, H, W]; ph, pw [N, oH, oW] -> [N, Cg, oH, oW] (zeros outside)."""
    n, _, h, w = img.shape
    h0, w0 = np.floor(ph), np.floor(pw)
    out = 0.0
    bidx = np.arange(n)[:, None, None]
    for dh in (0, 1):
        for dw in (0, 1):
            hh, ww = h0 + dh, w0 + dw
            wt = (1 - np.abs(ph - hh)) * (1 - np.abs(pw - ww))
            ok = (hh >= 0) & (hh < h) & (ww >= 0) & (ww < w)
            hi, wi = np.clip(hh, 0, h - 1).astype(np.int64), np.clip(ww, 0, w - 1).astype(np.int64)
            vals = img[bidx, :, hi, wi]  # [N, oH, oW, Cg]
            out = out + np.moveaxis(vals, -1, 1) * (wt * ok)[:, None]
    return out


@kernel("DeformConv", "float", prepare=attr_plan)
def deform_conv(plan, x, w, offset, b=None, mask=None):
    if x.ndim != 4:
        raise InputError(f"{plan.where}: only 2-D DeformConv is supported (input rank {x.ndim})")
    n, ic, ih, iw = x.shape
    oc, icg, kh, kw = w.shape
    group, og = int(plan.attr("group", 1) or 1), int(plan.attr("offset_group", 1) or 1)
    sh, sw = [int(v) for v in (plan.attr("strides") or [1, 1])]
    dh, dw = [int(v) for v in (plan.attr("dilations") or [1, 1])]
    pt, pl = [int(v) for v in (plan.attr("pads") or [0, 0, 0, 0])][:2]
    oh, ow = offset.shape[2:]
    if ic != icg * group or oc % group or ic % og or offset.shape[1] != og * kh * kw * 2:
        raise InputError(f"{plan.where}: shapes X {list(x.shape)}, W {list(w.shape)}, offset "
                         f"{list(offset.shape)} do not fit group {group} / offset_group {og}")
    xf = x.astype(np.float64)
    off = offset.astype(np.float64).reshape(n, og, kh, kw, 2, oh, ow)
    m = np.ones((n, og, kh, kw, oh, ow)) if mask is None else mask.astype(np.float64).reshape(n, og, kh, kw, oh, ow)
    base_h = (np.arange(oh) * sh - pt)[:, None]
    base_w = (np.arange(ow) * sw - pl)[None, :]
    cpg = ic // og
    cols = np.zeros((n, ic, kh * kw, oh, ow))
    for g in range(og):
        chans = slice(g * cpg, (g + 1) * cpg)
        for ki in range(kh):
            for kj in range(kw):
                ph = base_h + ki * dh + off[:, g, ki, kj, 0]
                pw = base_w + kj * dw + off[:, g, ki, kj, 1]
                cols[:, chans, ki * kw + kj] = _bilinear(xf[:, chans], ph, pw) * m[:, g, ki, kj][:, None]
    wf = w.astype(np.float64).reshape(group, oc // group, icg, kh * kw)
    cols = cols.reshape(n, group, icg, kh * kw, oh, ow)
    y = np.einsum("goik,ngikhw->ngohw", wf, cols).reshape(n, oc, oh, ow)
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
    return y.astype(x.dtype)
