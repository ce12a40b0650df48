"""Float Conv and DepthwiseConv (1-D/2-D/3-D, groups, dilations, pads/auto_pad, NCHW/NHWC).

Internal form: activations channels-last ``(N, *S, C)``, weights ``(*K, G, Cg, Mg)`` (kernel cell,
group, input channel in group, output channel in group).  The convolution is a loop over the
kernel cells (<= prod(K) iterations), each a batched matmul of a strided view of the padded input.
Accumulation is in float32 (float64 for float64 inputs); float16 inputs are rounded once at the end.
Fast paths (single-cell ungrouped GEMM, Numba 2-D depthwise in kernels/float/depthwise_fast.py) keep the same
per-element operation order, so their results are bit-identical to the cell loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ..spatial import (compute_dtype, from_channels_last, ints, out_dtype, pad_channels_last,
                       resolve_window, to_channels_last, window_offsets)
from ..registry import kernel


@dataclass(frozen=True)
class ConvPlan:
    name: str
    layout: str
    weight_layout: str
    group: int  # 0 = one group per input channel (DepthwiseConv)
    kernel_shape: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    dilations: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    auto_pad: str


def prepare_node(node, ctx, depthwise: bool = False) -> ConvPlan:
    a = node.attrs
    ks = a.get("kernel_shape")
    opt = (lambda v: None if v is None else tuple(int(t) for t in np.asarray(v).ravel()))
    return ConvPlan(
        name=node.name,
        layout=a.get("layout") or "NCHW",
        weight_layout=a.get("weight_layout") or ("1HWO" if depthwise and a.get("layout") == "NHWC"
                                                 else "OIHW"),
        group=0 if depthwise else int(a.get("group", 1) or 1),
        kernel_shape=opt(ks),
        strides=opt(a.get("strides")),
        dilations=opt(a.get("dilations")),
        pads=opt(a.get("pads")),
        auto_pad=str(a.get("auto_pad", "NOTSET") or "NOTSET"),
    )


def internal_weights(w: np.ndarray, weight_layout: str, group: int, nsp: int, where: str) -> np.ndarray:
    """Any supported filter layout -> ``(*K, G, Cg, Mg)``."""
    if weight_layout == "OIHW":  # (M, Cg, *K)
        k = np.moveaxis(w, (0, 1), (-1, -2))  # (*K, Cg, M)
    elif weight_layout == "OHWI":  # (M, *K, Cg)
        k = np.moveaxis(w, 0, -1)  # (*K, Cg, M)
    elif weight_layout == "1HWO":  # (1, *K, G*Mg): one input channel per group
        k = w.reshape(w.shape[1:-1] + (1, w.shape[-1]))
    else:
        raise ModelError(f"node '{where}': unknown weight_layout '{weight_layout}'")
    if k.ndim != nsp + 2:
        raise ModelError(f"node '{where}': weight rank {w.ndim} does not match {nsp} spatial dims")
    m = k.shape[-1]
    if m % group:
        raise ModelError(f"node '{where}': {m} output channels not divisible by group {group}")
    k = k.reshape(k.shape[:-1] + (group, m // group))  # (*K, Cg, G, Mg)
    return np.moveaxis(k, -2, -3)  # (*K, G, Cg, Mg)


def conv_channels_last(x: np.ndarray, wk: np.ndarray, bias, win, cdt) -> np.ndarray:
    """x (N, *S, C) float; wk (*K, G, Cg, Mg); returns (N, *O, G*Mg) in ``cdt``.

    Fast paths give the same bits as ``conv_channels_last_numpy`` (tests/unit/kernels/tflite/test_ref_fast_vs_numpy.py):
    a single-cell ungrouped conv is one GEMM (``0 + p`` of the NumPy loop reproduced by ``p + 0``);
    a 2-D depthwise conv runs the same per-element cell loop in Numba.
    """
    g, cg, mg = wk.shape[-3:]
    nsp = x.ndim - 2
    if g == 1 and all(k == 1 for k in win.kernel):
        xp = pad_channels_last(x, win)
        sl = next(window_offsets(win))[1]
        # the same GEMM expression (operand layouts included) as the cell loop
        flat = np.ascontiguousarray(xp[(slice(None),) + sl]).reshape(-1, cg) @ wk[(0,) * nsp][0]
        flat += cdt.type(0)  # -0.0 -> +0.0, as 0 + p in the cell loop
        y = flat.reshape((x.shape[0],) + win.out + (mg,))
    elif g > 1 and cg == 1 and nsp == 2:
        from .depthwise_fast import depthwise2d

        acc = depthwise2d(pad_channels_last(x, win), wk, win.strides, win.dilations, win.out, cdt)
        y = acc.reshape(acc.shape[:-2] + (g * mg,))
    else:
        return conv_channels_last_numpy(x, wk, bias, win, cdt)
    if bias is not None:
        y += np.asarray(bias, dtype=cdt).reshape(-1)
    return y


def conv_channels_last_numpy(x: np.ndarray, wk: np.ndarray, bias, win, cdt) -> np.ndarray:
    """The reference NumPy form: one (batched) matmul per kernel cell, accumulated in order."""
    g, cg, mg = wk.shape[-3:]
    xp = pad_channels_last(x, win)
    n = x.shape[0]
    acc = np.zeros((n,) + win.out + (g, mg), dtype=cdt)
    flat = acc.reshape(-1, mg) if g == 1 else None  # 2-D view: one BLAS GEMM per kernel cell
    for kidx, sl in window_offsets(win):
        patch = xp[(slice(None),) + sl]  # (N, *O, C)
        wcell = wk[kidx]
        if g == 1:
            flat += np.ascontiguousarray(patch).reshape(-1, cg) @ wcell[0]
        elif cg == 1:
            acc += patch[..., None] * wcell[:, 0, :]
        elif g <= 8:  # few wide groups: one GEMM per group
            p2 = np.ascontiguousarray(patch).reshape(-1, g, cg)
            a2 = acc.reshape(-1, g, mg)
            for gi in range(g):
                a2[:, gi] += p2[:, gi] @ wcell[gi]
        else:
            acc += (patch.reshape(patch.shape[:-1] + (g, 1, cg)) @ wcell)[..., 0, :]
    y = acc.reshape(acc.shape[:-2] + (g * mg,))
    if bias is not None:
        y += np.asarray(bias, dtype=cdt).reshape(-1)
    return y


def run_plan(plan: ConvPlan, x, w, b=None):
    cdt = compute_dtype(x)
    nsp = x.ndim - 2
    xc = to_channels_last(x, plan.layout).astype(cdt, copy=False)
    cin = xc.shape[-1]
    group = cin if plan.group == 0 else plan.group
    if cin % group:
        raise ModelError(f"node '{plan.name}': {cin} input channels not divisible by group {group}")
    wk = internal_weights(np.asarray(w, dtype=cdt), plan.weight_layout, group, nsp, plan.name)
    if wk.shape[-2] * group != cin:
        raise ModelError(f"node '{plan.name}': weights expect {wk.shape[-2] * group} input channels, "
                         f"got {cin}")
    kshape = wk.shape[:nsp]
    if plan.kernel_shape is not None and tuple(plan.kernel_shape) != tuple(kshape):
        raise ModelError(f"node '{plan.name}': kernel_shape {plan.kernel_shape} != weights {kshape}")
    win = resolve_window(xc.shape[1:-1], kshape, ints(plan.strides, nsp, 1),
                         ints(plan.dilations, nsp, 1), plan.pads, plan.auto_pad, where=plan.name)
    y = conv_channels_last(xc, wk, b, win, cdt)
    return from_channels_last(y, plan.layout).astype(out_dtype(x), copy=False)


@kernel("Conv", "float", prepare=prepare_node)
def conv(plan: ConvPlan, x, w, b=None):
    return run_plan(plan, x, w, b)


@kernel("DepthwiseConv", "float", prepare=lambda node, ctx: prepare_node(node, ctx, depthwise=True))
def depthwise_conv(plan: ConvPlan, x, w, b=None):
    """One group per input channel; output channel ``c * depth_multiplier + m`` (TFLite and ONNX agree)."""
    return run_plan(plan, x, w, b)
