"""Float Resize (ONNX semantics, every mode / coordinate transform / nearest_mode, antialias).

Resize is separable: each resized axis is done in turn as a gather of ``n`` neighbours per output
position and a weighted sum.  Source coordinates are computed in float64 as onnx.reference does;
data is combined in float32 (float64 for float64 input).

TFLite (``layout`` NHWC, nearest mode, sizes-driven): source indices follow LiteRT
``reference_ops::ResizeNearestNeighbor`` bit for bit, in float32:
``v = float32(o + offset) * float32(in / out)`` (align_corners: ``(in-1)/(out-1)``), offset 0.5 for
``tf_half_pixel_for_nn`` else 0; index = round-half-away(v) for align_corners else floor(v),
then ``min(in-1)`` and ``max(0)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ..spatial import compute_dtype, out_dtype
from ..registry import kernel

_CTMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_crop_and_resize", "tf_half_pixel_for_nn")


@dataclass(frozen=True)
class ResizePlan:
    name: str
    mode: str
    ctm: str
    nearest_mode: str
    cubic_a: float
    exclude_outside: bool
    extrapolation_value: float
    axes: tuple[int, ...] | None
    keep_aspect_ratio_policy: str
    antialias: bool
    layout: str


def _prepare(node, ctx) -> ResizePlan:
    a = node.attrs
    mode = str(a.get("mode", "nearest"))
    ctm = str(a.get("coordinate_transformation_mode", "half_pixel"))
    if mode not in ("nearest", "linear", "cubic"):
        raise ModelError(f"node '{node.name}': unknown Resize mode '{mode}'")
    if ctm not in _CTMS:
        raise ModelError(f"node '{node.name}': unknown coordinate_transformation_mode '{ctm}'")
    axes = a.get("axes")
    return ResizePlan(node.name, mode, ctm, str(a.get("nearest_mode", "round_prefer_floor")),
                      float(a.get("cubic_coeff_a", -0.75)), bool(a.get("exclude_outside", 0)),
                      float(a.get("extrapolation_value", 0.0)),
                      None if axes is None else tuple(int(v) for v in np.asarray(axes).ravel()),
                      str(a.get("keep_aspect_ratio_policy", "stretch")), bool(a.get("antialias", 0)),
                      a.get("layout") or "NCHW")


def _nonempty(v):
    return None if v is None or np.asarray(v).size == 0 else np.asarray(v)


def _axes(plan: ResizePlan, rank: int, n: int) -> list[int]:
    if plan.axes is not None:
        return [a % rank for a in plan.axes]
    if n == rank:
        return list(range(rank))
    if n == rank - 2:  # spatial-only sizes/scales (e.g. TFLite's [new_h, new_w])
        return list(range(1, rank - 1)) if plan.layout == "NHWC" else list(range(2, rank))
    raise ModelError(f"node '{plan.name}': {n} scales/sizes for a rank-{rank} input")


def _geometry(plan: ResizePlan, shape, scales, sizes):
    """Per resized axis: (axis, scale as float64, output size)."""
    rank = len(shape)
    if sizes is not None:
        sizes = [int(s) for s in sizes.ravel()]
        axes = _axes(plan, rank, len(sizes))
        sc = [sizes[i] / shape[a] for i, a in enumerate(axes)]
        if plan.keep_aspect_ratio_policy in ("not_larger", "not_smaller"):
            s = min(sc) if plan.keep_aspect_ratio_policy == "not_larger" else max(sc)
            sc = [s] * len(axes)
            sizes = [int(s * shape[a] + 0.5) for a in axes]
        elif plan.keep_aspect_ratio_policy != "stretch":
            raise ModelError(f"node '{plan.name}': unknown keep_aspect_ratio_policy "
                             f"'{plan.keep_aspect_ratio_policy}'")
        return [(a, sc[i], sizes[i]) for i, a in enumerate(axes)], True
    if scales is None:
        raise ModelError(f"node '{plan.name}': Resize needs scales or sizes")
    scales = [float(s) for s in scales.astype(np.float64).ravel()]
    axes = _axes(plan, rank, len(scales))
    return [(a, scales[i], int(np.floor(scales[i] * shape[a]))) for i, a in enumerate(axes)], False


def _source_coords(plan: ResizePlan, n_in: int, n_out: int, scale: float, roi_lo: float, roi_hi: float):
    """Source coordinate of each output index (float64) and the tf_crop_and_resize outside mask."""
    y = np.arange(n_out, dtype=np.float64)
    out_f = scale * n_in
    ctm = plan.ctm
    outside = None
    if ctm == "align_corners":
        x = np.zeros(n_out) if out_f == 1 else y * (n_in - 1) / (out_f - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if out_f == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = (n_in / 2) * (1 - n_out / out_f)
        x = offset + (y + 0.5) / scale - 0.5
    else:  # tf_crop_and_resize; roi_lo/roi_hi are NumPy scalars of the roi's dtype
        span = roi_hi - roi_lo
        if out_f == 1:
            x = np.full(n_out, np.float64(span * (n_in - 1) / 2))
        else:
            x = y * np.float64(span) * (n_in - 1) / (out_f - 1)
        x = x + np.float64(roi_lo * (n_in - 1))
        outside = (x < 0) | (x > n_in - 1)
    return x, outside


def _round_half_up(v: np.ndarray) -> np.ndarray:
    """Ties toward +inf, exact (no ``floor(v + 0.5)`` rounding error); = half-away for v >= 0."""
    f = np.floor(v)
    return f + ((v - f) >= 0.5)


def _round_half_down(v: np.ndarray) -> np.ndarray:
    f = np.floor(v)
    return f + ((v - f) > 0.5)


def _nearest_index(plan: ResizePlan, x: np.ndarray) -> np.ndarray:
    m = plan.nearest_mode
    if m == "round_prefer_floor":
        idx = _round_half_down(x)
    elif m == "round_prefer_ceil":
        idx = _round_half_up(x)
    elif m == "floor":
        idx = np.floor(x)
    elif m == "ceil":
        idx = np.ceil(x)
    else:
        raise ModelError(f"node '{plan.name}': unknown nearest_mode '{m}'")
    return idx.astype(np.int64)


def _tflite_nearest_index(plan: ResizePlan, n_in: int, n_out: int) -> np.ndarray:
    f32 = np.float32
    align = plan.ctm == "align_corners"
    if align and n_out > 1:
        scale = f32(n_in - 1) / f32(n_out - 1)
    else:
        scale = f32(n_in) / f32(n_out)
    half = plan.ctm == "tf_half_pixel_for_nn"
    v = (np.arange(n_out, dtype=f32) + f32(0.5 if half else 0.0)) * scale
    idx = _round_half_up(v) if align else np.floor(v)
    idx = np.minimum(idx.astype(np.int64), n_in - 1)
    return np.maximum(idx, 0) if half else idx


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    d = np.abs(d)
    d2, d3 = d * d, d * d * d
    near = (a + 2) * d3 - (a + 3) * d2 + 1
    far = a * d3 - 5 * a * d2 + 8 * a * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _weights(plan: ResizePlan, x: np.ndarray, scale: float, n_in: int):
    """Neighbour indices (unclamped) and weights, both (n_out, taps)."""
    support = 1.0 if plan.mode == "linear" else 2.0
    s = min(scale, 1.0) if plan.antialias else 1.0
    first = int(np.floor(-support / s)) + 1  # offset of the first tap, as onnx.reference
    half_taps = 1 - first
    taps = 2 * half_taps
    base = np.floor(x).astype(np.int64)
    # x exactly integral: the window leans left (onnx.reference tie rule); weights at the edges are 0.
    start = np.where(x == base, base - half_taps, base - half_taps + 1)
    idx = start[:, None] + np.arange(taps)[None, :]
    d = (idx - x[:, None]) * s
    w = np.clip(1 - np.abs(d), 0, 1) if plan.mode == "linear" else _cubic(d, plan.cubic_a)
    if plan.antialias:
        w = w / w.sum(axis=1, keepdims=True)
    if plan.exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    return idx, w


@kernel("Resize", "float", prepare=_prepare)
def resize(plan: ResizePlan, x, roi=None, scales=None, sizes=None):
    cdt = compute_dtype(x)
    roi, scales, sizes = _nonempty(roi), _nonempty(scales), _nonempty(sizes)
    geo, from_sizes = _geometry(plan, x.shape, scales, sizes)
    rank = x.ndim
    if roi is not None:
        # roi keeps its own float dtype: lo*(in-1) and (hi-lo) are formed in it (as onnx.reference
        # and TF CropAndResize, both float32 for a float32 roi); the rest of the coordinate in float64.
        roi = roi.ravel() if roi.dtype.kind == "f" else roi.ravel().astype(np.float32)
        k = roi.size // 2
        axes_r = [g[0] for g in geo] if k != rank else list(range(rank))
        full = np.concatenate([np.zeros(rank), np.ones(rank)]).astype(roi.dtype)
        for i, a in enumerate(axes_r):
            full[a], full[rank + a] = roi[i], roi[k + i]
        roi = full
    y = x if plan.mode == "nearest" else x.astype(cdt, copy=False)
    tflite_nn = plan.mode == "nearest" and plan.layout == "NHWC" and from_sizes and plan.ctm in (
        "align_corners", "asymmetric", "tf_half_pixel_for_nn")
    for axis, scale, n_out in geo:
        n_in = y.shape[axis]
        lo, hi = (roi[axis], roi[rank + axis]) if roi is not None else (np.float32(0), np.float32(1))
        if n_out == n_in and scale == 1.0 and plan.ctm != "tf_crop_and_resize":
            continue
        if tflite_nn:
            y = np.take(y, _tflite_nearest_index(plan, n_in, n_out), axis=axis)
            continue
        src, outside = _source_coords(plan, n_in, n_out, scale, lo, hi)
        if plan.mode == "nearest":
            idx = np.clip(_nearest_index(plan, src), 0, n_in - 1)
            y = np.take(y, idx, axis=axis)
        else:
            nb, w = _weights(plan, src, scale, n_in)
            g = np.take(y, np.clip(nb, 0, n_in - 1), axis=axis)  # (..., n_out, taps, ...)
            wshape = (1,) * axis + w.shape + (1,) * (y.ndim - axis - 1)
            y = (g * w.astype(cdt).reshape(wshape)).sum(axis=axis + 1, dtype=cdt)
        if outside is not None and outside.any():
            mshape = (1,) * axis + (n_out,) + (1,) * (y.ndim - axis - 1)
            y = np.where(outside.reshape(mshape), y.dtype.type(plan.extrapolation_value), y)
    return y.astype(out_dtype(x), copy=False) if x.dtype.kind == "f" else y
