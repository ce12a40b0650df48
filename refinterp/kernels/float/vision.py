"""ONNX NonMaxSuppression, RoiAlign and Einsum (float; the detection heads and attention blocks
exporters emit).

NonMaxSuppression (the spec; ONNX Runtime and onnx.reference compute it the same way): per batch
and class, candidates are the boxes whose score is > score_threshold (all boxes when that input is
absent), taken by score descending, equal scores by box index ascending; a candidate is dropped
when its IoU with an already selected box is > iou_threshold; at most max_output_boxes_per_class
(absent: 0, so nothing) per class.  IoU in float32 scalars: corner boxes may list either corner
first (``center_point_box`` 0) or be (x_center, y_center, width, height) (1); an empty intersection
or a non-positive area or union suppresses nothing.  Output: int64 [selected, 3] rows (batch,
class, box) in selection order.

Einsum: ``numpy.einsum`` in the inputs' dtype (float32 sums are not in a fixed order: equal to a
reference to float rounding, not bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from ..int.shape import BOTH
from ..registry import attr_plan, kernel

F32 = np.float32


@dataclass(frozen=True)
class NmsPlan:
    center: int  # center_point_box
    where: str


@dataclass(frozen=True)
class EinsumPlan:
    equation: str
    where: str


@dataclass(frozen=True)
class RoiAlignPlan:
    mode: str
    half_pixel: bool
    oh: int
    ow: int
    ratio: int
    scale: np.float32
    where: str


@dataclass(frozen=True)
class GridSamplePlan:
    mode: str  # linear | nearest | cubic
    pad: str  # zeros | border | reflection
    align: bool
    ort: bool = False  # ONNX Runtime's bicubic + border (taps clamped, not the coordinate)


def _prepare_nms(node, ctx) -> NmsPlan:
    cpb = int(node.attrs.get("center_point_box", 0))
    if cpb not in (0, 1):
        raise InputError(f"node '{node.name}' (NonMaxSuppression): center_point_box must be 0 or 1, got {cpb}")
    return NmsPlan(cpb, f"node '{node.name}' (NonMaxSuppression)")


def _extent(b, center: int):
    """(x_min, x_max, y_min, y_max) in float32."""
    if center:
        hw, hh = b[2] / F32(2), b[3] / F32(2)
        return b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh
    return min(b[1], b[3]), max(b[1], b[3]), min(b[0], b[2]), max(b[0], b[2])


def _suppress(b1, b2, center: int, iou_threshold) -> bool:
    x1a, x1b, y1a, y1b = _extent(b1, center)
    x2a, x2b, y2a, y2b = _extent(b2, center)
    ix0, ix1 = max(x1a, x2a), min(x1b, x2b)
    if ix1 <= ix0:
        return False
    iy0, iy1 = max(y1a, y2a), min(y1b, y2b)
    if iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    if inter <= 0:
        return False
    a1 = (x1b - x1a) * (y1b - y1a)
    a2 = (x2b - x2a) * (y2b - y2a)
    union = a1 + a2 - inter
    if a1 <= 0 or a2 <= 0 or union <= 0:
        return False
    return bool(inter / union > iou_threshold)


def _scalar(v, default, dtype):
    a = None if v is None else np.asarray(v)
    return default if a is None or a.size == 0 else dtype(a.reshape(-1)[0])


@kernel("NonMaxSuppression", "float", prepare=_prepare_nms)
def non_max_suppression(plan, boxes, scores, max_out=None, iou=None, score_threshold=None):
    boxes = np.asarray(boxes, F32)
    scores = np.asarray(scores, F32)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise InputError(f"{plan.where}: boxes {list(boxes.shape)} and scores {list(scores.shape)} must be "
                         f"[batch, boxes, 4] and [batch, classes, boxes]")
    limit = max(_scalar(max_out, 0, int), 0)
    iou_t = _scalar(iou, F32(0), F32)
    thr = None if score_threshold is None or np.asarray(score_threshold).size == 0 else \
        _scalar(score_threshold, F32(0), F32)
    rows: list[tuple[int, int, int]] = []
    for bi in range(boxes.shape[0]):
        bx = boxes[bi]
        for ci in range(scores.shape[1]):
            s = scores[bi, ci]
            cand = np.arange(s.size) if thr is None else np.flatnonzero(s > thr)
            order = cand[np.lexsort((cand, -s[cand]))]  # score descending, index ascending
            chosen: list[int] = []
            for k in order:
                if len(chosen) >= limit:
                    break
                if not any(_suppress(bx[k], bx[j], plan.center, iou_t) for j in chosen):
                    chosen.append(int(k))
                    rows.append((bi, ci, int(k)))
    return np.array(rows, np.int64).reshape(-1, 3)


def _prepare_einsum(node, ctx) -> EinsumPlan:
    eq = node.attrs.get("equation")
    if not isinstance(eq, (str, bytes)) or not eq:
        raise InputError(f"node '{node.name}' (Einsum): missing 'equation'")
    return EinsumPlan((eq.decode() if isinstance(eq, bytes) else eq).replace(" ", ""), f"node '{node.name}' (Einsum)")


@kernel("Einsum", BOTH, prepare=_prepare_einsum)
def einsum(plan, *xs):
    try:
        y = np.einsum(plan.equation, *[np.asarray(x) for x in xs])
    except ValueError as e:
        raise InputError(f"{plan.where}: {e}") from None
    return np.asarray(y).astype(np.result_type(*xs), copy=False)


# -- RoiAlign ---------------------------------------------------------------------------------------
# ONNX RoiAlign as ONNX Runtime (and onnx.reference) compute it, float32 arithmetic: per roi
# (x1, y1, x2, y2) * spatial_scale (- 0.5 with half_pixel; without it sizes are at least 1), bins of
# size/output, a grid of sampling_ratio (0: ceil(bin size)) points per bin at (k + 0.5) / grid; a
# point outside [-1, H] x [-1, W] contributes weight 0; inside, it is clamped at 0 and bilinearly
# interpolated (at the last row / column the four taps collapse).  avg: the mean over the grid of
# the interpolated values; max: the max over the grid of max(w_k * v_k) over the four taps (ORT's
# definition, not the max of interpolated values).

def _prepare_roi(node, ctx) -> RoiAlignPlan:
    a = node.attrs
    mode = str(a.get("mode", "avg"))
    ctm = str(a.get("coordinate_transformation_mode", "half_pixel"))
    if mode not in ("avg", "max") or ctm not in ("half_pixel", "output_half_pixel"):
        raise InputError(f"node '{node.name}' (RoiAlign): mode '{mode}', coordinate_transformation_mode '{ctm}'")
    return RoiAlignPlan(mode, ctm == "half_pixel", int(a.get("output_height", 1)), int(a.get("output_width", 1)),
                        int(a.get("sampling_ratio", 0)), F32(a.get("spatial_scale", 1.0)),
                        f"node '{node.name}' (RoiAlign)")


def _axis_samples(start, bin_size, n_out: int, grid: int, size: int):
    """Per output cell and grid point along one axis: (low, high, l weight, valid) arrays."""
    k = np.arange(n_out, dtype=F32)[:, None]
    g = np.arange(grid, dtype=F32)[None, :]
    pos = (start + k * bin_size + (g + F32(0.5)) * bin_size / F32(grid)).astype(F32)  # [n_out, grid]
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, F32(0))
    low = pos.astype(np.int64)
    last = low >= size - 1
    low = np.where(last, size - 1, low)
    high = np.where(last, size - 1, low + 1)
    pos = np.where(last, low.astype(F32), pos)
    return low, high, (pos - low.astype(F32)).astype(F32), valid


@kernel("RoiAlign", "float", prepare=_prepare_roi)
def roi_align(plan, x, rois, batch_indices):
    x = np.asarray(x, F32)
    rois = np.asarray(rois, F32)
    bidx = np.asarray(batch_indices).astype(np.int64)
    n, c, h, w = x.shape
    oh, ow = plan.oh, plan.ow
    out = np.zeros((rois.shape[0], c, oh, ow), F32)
    off = F32(0.5) if plan.half_pixel else F32(0)
    for r in range(rois.shape[0]):
        if not 0 <= bidx[r] < n:
            raise InputError(f"{plan.where}: batch index {bidx[r]} outside [0, {n})")
        x1, y1, x2, y2 = (rois[r] * plan.scale - off).astype(F32)
        rw, rh = F32(x2 - x1), F32(y2 - y1)
        if not plan.half_pixel:
            rw, rh = max(rw, F32(1)), max(rh, F32(1))
        bh, bw = F32(rh / F32(oh)), F32(rw / F32(ow))
        gh = plan.ratio if plan.ratio > 0 else int(np.ceil(rh / F32(oh)))
        gw = plan.ratio if plan.ratio > 0 else int(np.ceil(rw / F32(ow)))
        count = F32(max(gh * gw, 1))
        ylo, yhi, ly, yv = _axis_samples(y1, bh, oh, gh, h)
        xlo, xhi, lx, xv = _axis_samples(x1, bw, ow, gw, w)
        hy, hx = F32(1) - ly, F32(1) - lx
        # [oh, gh, ow, gw] weights, zero where the point is outside
        valid = yv[:, :, None, None] & xv[None, None, :, :]
        wts = [np.where(valid, (a[:, :, None, None] * b[None, None, :, :]).astype(F32), F32(0))
               for a, b in ((hy, hx), (hy, lx), (ly, hx), (ly, lx))]
        fm = x[bidx[r]]  # [C, H, W]
        taps = [fm[:, yi[:, :, None, None], xi[None, None, :, :]] for yi, xi in
                ((ylo, xlo), (ylo, xhi), (yhi, xlo), (yhi, xhi))]  # each [C, oh, gh, ow, gw]
        taps = [np.where(valid, t, F32(0)) for t in taps]
        prods = [(wk * t).astype(F32) for wk, t in zip(wts, taps)]
        if plan.mode == "avg":
            val = ((prods[0] + prods[1]) + prods[2]) + prods[3]
            out[r] = (val.sum(axis=(2, 4), dtype=F32) / count).astype(F32)
        else:
            val = np.maximum(np.maximum(prods[0], prods[1]), np.maximum(prods[2], prods[3]))
            out[r] = val.max(axis=(2, 4)) if gh * gw else 0
    return out


# -- GridSample -------------------------------------------------------------------------------------
# ONNX GridSample (opset 16 names bilinear / bicubic, 20 linear / cubic; any number of spatial
# dims): grid [N, *out, k] holds normalized coordinates in [-1, 1], last axis (x, y, ...) i.e. the
# data axes reversed.  Denormalized: align_corners (n + 1) / 2 (D - 1), else ((n + 1) D - 1) / 2.
# nearest rounds half to even first.  A coordinate beyond the border ([-0.5, D - 0.5], with
# align_corners [0, D - 1]) is clamped to [0, D - 1] (border) or reflected (reflection); then the
# taps (linear 2, cubic 4 with Keys alpha -0.75) read the data with the padding rule (zeros: 0
# outside; border: clamped index; reflection: the reflected index).  float32 values; the taps are
# combined as a tensor product (the reference nests 1-D interpolations: equal to float rounding).

def _prepare_grid(node, ctx) -> GridSamplePlan:
    a = node.attrs
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(str(a.get("mode", "linear")), str(a.get("mode", "linear")))
    pad = str(a.get("padding_mode", "zeros"))
    if mode not in ("linear", "nearest", "cubic") or pad not in ("zeros", "border", "reflection"):
        raise InputError(f"node '{node.name}' (GridSample): mode '{mode}', padding_mode '{pad}'")
    return GridSamplePlan(mode, pad, bool(int(a.get("align_corners", 0))))


def _reflect(x, lo, hi):
    rng = hi - lo
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, np.where(above, x - hi, 0))
    n = np.floor(dx / rng) if rng > 0 else np.zeros_like(dx)
    r = dx - n * rng
    even = (n % 2) == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(below, low_side, np.where(above, high_side, x))


def _cubic_coeffs(t):
    a = -0.75
    t1, t2, t3 = t + 1, 1 - t, 2 - t
    return [((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a, ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * t2 - (a + 3)) * t2 * t2 + 1, ((a * t3 - 5 * a) * t3 + 8 * a) * t3 - 4 * a]


@kernel("GridSample", "float", prepare=_prepare_grid)
def grid_sample(plan, x, grid):
    x = np.asarray(x)
    grid = np.asarray(grid)
    dt = x.dtype
    dims = x.shape[2:]
    nd = len(dims)
    out_sp = grid.shape[1:-1]
    y = np.zeros(x.shape[:2] + out_sp, dt)
    if y.size == 0:
        return y
    for b in range(x.shape[0]):
        taps_per_dim = []  # per data dim: list of (index array, weight array, inside mask)
        for d in range(nd):
            size = dims[d]
            n = grid[b, ..., nd - 1 - d].astype(np.float32)
            c = ((n + 1) / np.float32(2) * np.float32(size - 1) if plan.align
                 else ((n + 1) * np.float32(size) - 1) / np.float32(2)).astype(np.float32)
            lo, hi = (0.0, size - 1.0) if plan.align else (-0.5, size - 0.5)
            if plan.mode == "nearest":
                c = np.rint(c)
            out_of = (c < lo) | (c > hi)
            if plan.pad == "border" and not (plan.mode == "cubic" and plan.ort):
                c = np.where(out_of, np.clip(c, 0, size - 1), c)
            elif plan.pad == "reflection":
                c = np.where(out_of, _reflect(c, lo, hi), c)
            if plan.mode == "nearest":
                idx = [c.astype(np.int64)]
                wts = [np.ones_like(c)]
            else:
                f = np.floor(c)
                t = (c - f).astype(np.float32)
                f = f.astype(np.int64)
                if plan.mode == "linear":
                    idx, wts = [f, f + 1], [1 - t, t]
                else:
                    idx, wts = [f - 1, f, f + 1, f + 2], _cubic_coeffs(t)
            resolved = []
            for i, w in zip(idx, wts):
                if plan.pad == "zeros":
                    inside = (i >= 0) & (i < size)
                    resolved.append((np.clip(i, 0, size - 1), w, inside))
                elif plan.pad == "border":
                    resolved.append((np.clip(i, 0, size - 1), w, None))
                else:
                    ri = _reflect(i.astype(np.float64), lo, hi).astype(np.int64)
                    resolved.append((np.clip(ri, 0, size - 1), w, None))
            taps_per_dim.append(resolved)
        acc = np.zeros((x.shape[1],) + out_sp, np.float64)
        for combo in np.ndindex(*[len(t) for t in taps_per_dim]):
            index = tuple(taps_per_dim[d][k][0] for d, k in enumerate(combo))
            weight = np.ones(out_sp, np.float64)
            mask = np.ones(out_sp, bool)
            for d, k in enumerate(combo):
                _, w, inside = taps_per_dim[d][k]
                weight = weight * w
                if inside is not None:
                    mask &= inside
            vals = x[b][(slice(None),) + index]  # [C, *out]
            acc += np.where(mask, vals * weight, 0)
        y[b] = acc.astype(dt)
    return y


def _prepare_grid_ort(node, ctx) -> dict:
    """ONNX Runtime's GridSample: as the spec except bicubic with border padding, where ORT does not
    clamp the out-of-range coordinate (only the taps are clamped; measured against ORT 1.32)."""
    first = ctx.inputs[0] if ctx.inputs else None
    if first is not None and first.quant is not None:
        raise UnsupportedOpError(f"node '{node.name}' (GridSample): quantized input (ORT has float GridSample only)")
    return replace(_prepare_grid(node, ctx), ort=True)


kernel("GridSample", "ort_float", prepare=_prepare_grid_ort)(grid_sample)


# -- AffineGrid -------------------------------------------------------------------------------------

@kernel("AffineGrid", "float", prepare=attr_plan)
def affine_grid(plan, theta, size):
    """ONNX AffineGrid (opset 20): the sampling grid GridSample takes.  theta [N, 2, 3] (2-D) or
    [N, 3, 4] (3-D), size (N, C, H, W) / (N, C, D, H, W).  Normalized base coordinates per axis:
    align_corners 1: -1 .. 1 inclusive; 0: pixel centres (2i + 1) / n - 1.  Output [N, H, W, 2]
    ((x, y) per cell) or [N, D, H, W, 3], computed in float64 and rounded once to theta's type."""
    dims = [int(v) for v in np.asarray(size).ravel()]
    spatial = dims[2:]
    nsp = len(spatial)
    theta = np.asarray(theta)
    if nsp not in (2, 3) or theta.shape[1:] != (nsp, nsp + 1) or theta.shape[0] != dims[0]:
        raise InputError(f"{plan.where}: theta {list(theta.shape)} does not fit size {dims}")
    corners = int(plan.attr("align_corners", 0))

    def axis(n):
        if corners:
            return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        return (2.0 * np.arange(n) + 1.0) / n - 1.0

    mesh = np.meshgrid(*[axis(n) for n in spatial], indexing="ij")  # D?, H, W
    coords = [m.ravel() for m in reversed(mesh)] + [np.ones(mesh[0].size)]  # x, y (, z), 1
    base = np.stack(coords)  # [nsp + 1, cells]
    grid = theta.astype(np.float64) @ base  # [N, nsp, cells]
    return np.swapaxes(grid, 1, 2).reshape([dims[0]] + spatial + [nsp]).astype(theta.dtype)


# -- Col2Im -----------------------------------------------------------------------------------------

@kernel("Col2Im", "float", prepare=attr_plan)
def col2im(plan, x, image_shape, block_shape):
    """ONNX Col2Im (torch's fold): x [N, C * prod(block), L] -> [N, C, *image_shape].  Block b of the
    sliding grid (row-major, ``L`` blocks) and kernel offset k (row-major over block_shape) add
    x[n, c * prod(block) + k, b] at image position b_d * stride_d - pad_begin_d + k_d * dilation_d
    (positions outside the image are dropped).  Sums in the input's type, in block order."""
    img = [int(v) for v in np.asarray(image_shape).ravel()]
    blk = [int(v) for v in np.asarray(block_shape).ravel()]
    nd = len(img)
    strides = [int(v) for v in (plan.attr("strides") or [1] * nd)]
    dil = [int(v) for v in (plan.attr("dilations") or [1] * nd)]
    pads = [int(v) for v in (plan.attr("pads") or [0] * (2 * nd))]
    kprod = int(np.prod(blk))
    n, ck, length = x.shape
    grid = [(img[d] + pads[d] + pads[d + nd] - dil[d] * (blk[d] - 1) - 1) // strides[d] + 1 for d in range(nd)]
    if len(blk) != nd or ck % kprod or length != int(np.prod(grid)) or min(grid) <= 0:
        raise InputError(f"{plan.where}: input {list(x.shape)} does not fit image {img}, block {blk}")
    c = ck // kprod
    xs = x.reshape((n, c, kprod) + tuple(grid))
    padded = np.zeros((n, c) + tuple(img[d] + pads[d] + pads[d + nd] for d in range(nd)), x.dtype)
    for k, off in enumerate(np.ndindex(*blk)):
        sl = tuple(slice(off[d] * dil[d], off[d] * dil[d] + (grid[d] - 1) * strides[d] + 1, strides[d])
                   for d in range(nd))
        padded[(slice(None), slice(None)) + sl] += xs[:, :, k]
    crop = tuple(slice(pads[d], pads[d] + img[d]) for d in range(nd))
    return padded[(slice(None), slice(None)) + crop]
