"""Integer accumulators of the matmul-like TFLite ops, recomputed from a case's own tensors.

The kernels do not expose their accumulators, so golden computes them here, independently:

    acc[o] = bias[o] + sum_k (x[k] - zx) * (w[k, o] - zw[o])

exactly (int64 sums of int8/int16 products; float64 is never used).  Padding cells contribute 0
(TFLite pads with the input zero point, i.e. (x - zx) = 0).  The result is the value *before*
requantization and clamping; it is stored as int32 when the backend accumulates in 32 bits
(values wrap modulo 2**32 exactly as an int32 register would), else int64 (16x8 kernels with an
int64 bias).  Supported: Conv (NHWC, OHWI), DepthwiseConv (NHWC, 1HWO), FullyConnected, BatchMatMul.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import Node
from ..kernels.spatial import pad_channels_last, resolve_window, window_offsets

ACC_OPS = ("Conv", "DepthwiseConv", "FullyConnected", "BatchMatMul")


def _zp(spec_q: Any, shape: tuple[int, ...]) -> np.ndarray:
    if spec_q is None:
        return np.zeros((), np.int64)
    return spec_q.broadcast(shape)[1].astype(np.int64)


def _spatial_acc(node: Node, x: np.ndarray, w_hwio: np.ndarray, depthwise: bool, mult: int) -> np.ndarray:
    """x: int64 (N,H,W,C) minus zx; w_hwio: int64 (kh, kw, Cin_or_1, Cout) minus zw."""
    a = node.attrs
    kh, kw = w_hwio.shape[:2]
    win = resolve_window(x.shape[1:3], (kh, kw), a.get("strides") or [1, 1], a.get("dilations") or [1, 1],
                         a.get("pads"), a.get("auto_pad", "NOTSET"), where=node.name)
    xp = pad_channels_last(x, win, 0)
    n, (oh, ow) = x.shape[0], win.out
    cout = w_hwio.shape[-1]
    acc = np.zeros((n, oh, ow, cout), np.int64)
    group = int(a.get("group", 1) or 1)
    for (i, j), sl in window_offsets(win):
        patch = xp[(slice(None),) + sl + (slice(None),)]  # (N, oh, ow, Cin)
        if depthwise:
            acc += np.repeat(patch, mult, axis=-1) * w_hwio[i, j, 0]
        elif group == 1:
            acc += patch @ w_hwio[i, j]
        else:
            cg = w_hwio.shape[2]
            og = cout // group
            for g in range(group):
                acc[..., g * og:(g + 1) * og] += patch[..., g * cg:(g + 1) * cg] @ w_hwio[i, j, :, g * og:(g + 1) * og]
    return acc


def accumulators(node: Node, infos: list, values: list[np.ndarray | None]) -> np.ndarray | None:
    """The node's accumulator (int64, before any wrap) or None when the op has none / is unsupported."""
    if node.op not in ACC_OPS or any(i is None or i.quant is None for i in infos[:2]):
        return None
    x, w = (np.asarray(v) for v in values[:2])
    if x.dtype.kind not in "iu" or w.dtype.kind not in "iu":
        return None
    xz = x.astype(np.int64) - _zp(infos[0].quant, x.shape)
    wz = w.astype(np.int64) - _zp(infos[1].quant, w.shape)
    bias = values[2] if len(values) > 2 and values[2] is not None else None
    if node.op == "Conv":
        if node.attrs.get("weight_layout", "OHWI") != "OHWI" or node.attrs.get("layout") != "NHWC":
            return None
        acc = _spatial_acc(node, xz, np.transpose(wz, (1, 2, 3, 0)), False, 1)
    elif node.op == "DepthwiseConv":
        if node.attrs.get("weight_layout", "1HWO") != "1HWO" or node.attrs.get("layout") != "NHWC":
            return None
        mult = int(node.attrs.get("depth_multiplier", 1) or 1)
        acc = _spatial_acc(node, xz, np.transpose(wz, (1, 2, 0, 3)), True, mult)
    elif node.op == "FullyConnected":
        n_in = wz.shape[1]
        acc = xz.reshape(-1, n_in) @ wz.T
        if node.attrs.get("keep_num_dims"):
            acc = acc.reshape(x.shape[:-1] + (wz.shape[0],))
    else:
        a, b = xz, wz
        if node.attrs.get("adj_x"):
            a = np.swapaxes(a, -1, -2)
        if node.attrs.get("adj_y"):
            b = np.swapaxes(b, -1, -2)
        acc = np.matmul(a, b)
    if bias is not None:
        acc = acc + np.asarray(bias).astype(np.int64).reshape(-1)
    return acc


def store_dtype(acc: np.ndarray, plan: Any) -> np.ndarray:
    """int32 (wrapped, as the register holds it) when the plan accumulates in 32 bits, else int64."""
    acc32 = getattr(plan, "acc32", True)
    if acc32:
        return (acc.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    return acc.astype(np.int64)
