"""Pad (constant / reflect / edge / wrap) and DepthToSpace / SpaceToDepth (NCHW and NHWC)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError
from refinterp.ir import Node
from ..registry import PrepareContext, attr_plan, declare_settings, kernel
from .shape import input_or_attr, ints, where
from .shape_quant import check_equal_params

declare_settings(__name__, "requires_equal_params")  # the scheme settings these kernels read

_NP_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap",
             "symmetric": "symmetric"}


@dataclass(frozen=True)
class PadPlan:
    mode: str  # a np.pad mode
    pads: np.ndarray | None  # None: computed at run time
    value: np.ndarray | None  # None: from the run-time input, else ``default``
    default: int | float  # the pad value's default: 0, or the output zero point of a quantized tensor
    axes: list[int] | None
    where: str


def _pad_plan(node: Node, ctx: PrepareContext, default_value) -> PadPlan:
    mode = str(node.attr("mode", "constant")).lower()
    if mode not in _NP_MODES:
        raise InputError(f"{where(node)}: unknown Pad mode '{mode}'")
    pads = ctx.const(1)
    if pads is None and not (len(node.inputs) > 1 and node.inputs[1]):
        pads = node.attr("pads")
    value = ctx.const(2)
    if value is None and "value" in node.attrs:
        value = np.asarray(node.attrs["value"])
    return PadPlan(_NP_MODES[mode], None if pads is None else np.asarray(pads, np.int64), value, default_value,
                   input_or_attr(node, ctx, 3, "axes"), where(node))


def _pad_prepare_float(node: Node, ctx: PrepareContext) -> PadPlan:
    return _pad_plan(node, ctx, 0)


def _pad_prepare_int(node: Node, ctx: PrepareContext) -> PadPlan:
    # TFLite PAD on quantized tensors pads with the output zero point (real value 0) and copies the
    # input codes even when the input params differ.  ``requires_equal_params`` concerns the
    # mirror modes only (LiteRT MIRROR_PAD refuses unequal params; PAD / PADV2 accept them).
    q = ctx.outputs[0].quant if ctx.outputs else None
    plan = _pad_plan(node, ctx, 0 if q is None else int(q.zero_point.ravel()[0]))
    if plan.mode != "constant":
        check_equal_params(node, ctx, [0])
    return plan


def _begin_end(pads: np.ndarray, ndim: int, axes: list[int] | None) -> tuple[list[int], list[int]]:
    if pads.ndim == 2:  # TFLite paddings [rank, 2] = (before, after) per dim
        begin, end = [int(v) for v in pads[:, 0]], [int(v) for v in pads[:, 1]]
    else:
        flat = [int(v) for v in pads.ravel()]
        half = len(flat) // 2
        begin, end = flat[:half], flat[half:]
    if axes is None:
        return begin, end
    b, e = [0] * ndim, [0] * ndim
    for a, pb, pe in zip(axes, begin, end):
        b[a % ndim], e[a % ndim] = pb, pe
    return b, e


def _pad(plan, x, pads=None, value=None, axes=None):
    p = plan.pads if plan.pads is not None else np.asarray(pads, np.int64)
    ax = plan.axes if plan.axes is not None else ints(axes)
    begin, end = _begin_end(p, x.ndim, ax)
    if len(begin) != x.ndim:
        raise InputError(f"{plan.where}: Pad pads have {len(begin)} dims, input has {x.ndim}")
    # Negative pads crop first (ONNX); the positive remainder is then padded.
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))
    x_c = x[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if plan.mode != "constant":
        return np.pad(x_c, width, mode=plan.mode)
    v = plan.value if plan.value is not None else value
    v = plan.default if v is None or np.asarray(v).size == 0 else np.asarray(v).ravel()[0]
    return np.pad(x_c, width, mode="constant", constant_values=np.asarray(v).astype(x.dtype))


kernel("Pad", "float", prepare=_pad_prepare_float)(_pad)
kernel("Pad", "int", prepare=_pad_prepare_int)(_pad)


# -- DepthToSpace / SpaceToDepth ---------------------------------------------------------------

@dataclass(frozen=True)
class BlockPlan:
    bs: int
    mode: str  # DCR | CRD
    nhwc: bool
    where: str


def _d2s_prepare(node: Node, ctx: PrepareContext) -> BlockPlan:
    bs = node.attr("blocksize", node.attr("block_size"))
    return BlockPlan(int(bs), str(node.attr("mode", "DCR")).upper(),
                     str(node.attr("layout", "NCHW")).upper() == "NHWC", where(node))


@kernel("DepthToSpace", ("float", "int"), prepare=_d2s_prepare)
def _depth_to_space(plan, x):
    bs, crd = plan.bs, plan.mode == "CRD"
    if plan.nhwc:
        n, h, w, c = x.shape
        co = c // (bs * bs)
        if crd:  # channel index = c_out * bs*bs + dy * bs + dx
            y = x.reshape(n, h, w, co, bs, bs).transpose(0, 1, 4, 2, 5, 3)
        else:    # DCR (TFLite): channel index = (dy * bs + dx) * c_out + c
            y = x.reshape(n, h, w, bs, bs, co).transpose(0, 1, 3, 2, 4, 5)
        return np.ascontiguousarray(y).reshape(n, h * bs, w * bs, co)
    n, c, h, w = x.shape
    co = c // (bs * bs)
    if crd:
        y = x.reshape(n, co, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape(n, bs, bs, co, h, w).transpose(0, 3, 4, 1, 5, 2)
    return np.ascontiguousarray(y).reshape(n, co, h * bs, w * bs)


@kernel("SpaceToDepth", ("float", "int"), prepare=_d2s_prepare)
def _space_to_depth(plan, x):
    # Output channel index: DCR (default; ONNX and TFLite) (dy * bs + dx) * C + c,
    # CRD (ONNX opset 24 mode) c * bs*bs + dy * bs + dx.
    bs, crd = plan.bs, plan.mode == "CRD"
    if plan.nhwc:
        n, h, w, c = x.shape
        y = x.reshape(n, h // bs, bs, w // bs, bs, c)
        y = y.transpose(0, 1, 3, 5, 2, 4) if crd else y.transpose(0, 1, 3, 2, 4, 5)
        return np.ascontiguousarray(y).reshape(n, h // bs, w // bs, bs * bs * c)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // bs, bs, w // bs, bs)
    y = y.transpose(0, 1, 3, 5, 2, 4) if crd else y.transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(y).reshape(n, c * bs * bs, h // bs, w // bs)


@kernel("CenterCropPad", "float", prepare=attr_plan)
def _center_crop_pad(plan, x, shape):
    """Crop or zero-pad each listed axis (``axes``, default all) to ``shape`` around the centre; an odd
    difference puts the extra element at the end (crop: one more removed after; pad: one more added
    after).  Float only: a quantized tensor would need its zero point as the pad value."""
    target = ints(shape)
    axes = plan.attr("axes")
    axes = list(range(x.ndim)) if axes is None else [int(a) % x.ndim for a in axes]
    if len(target) != len(axes) or any(t < 0 for t in target):
        raise InputError(f"{plan.where}: shape {target} does not match axes {axes}")
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    for a, t in zip(axes, target):
        lo = abs(t - x.shape[a]) // 2
        if t < x.shape[a]:
            src[a] = slice(lo, lo + t)
        elif t > x.shape[a]:
            dst[a] = slice(lo, lo + x.shape[a])
        out_shape[a] = t
    out = np.zeros(out_shape, x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out
