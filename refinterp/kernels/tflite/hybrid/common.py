"""Shared pieces of the LiteRT dynamic-range ("hybrid") kernels: weight scales, float clamps.

A hybrid node has float32 activations and a constant int8 filter with (per-tensor or per-channel)
scales; LiteRT ignores the filter zero point in these kernels (symmetric int8 weights).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import ModelError, UnsupportedOpError

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max

# fused activation -> float clamp bounds (kernel_util.h CalculateActivationRange)
_RANGES = {None: (-FLT_MAX, FLT_MAX), "RELU": (F32(0), FLT_MAX), "RELU6": (F32(0), F32(6)),
           "RELU_N1_TO_1": (F32(-1), F32(1))}


def act_range(node) -> tuple[np.float32, np.float32]:
    act = node.attrs.get("activation")
    if act not in _RANGES:
        raise UnsupportedOpError(f"node '{node.name}' ({node.op}): fused activation {act} is not "
                                 f"supported by the hybrid kernels")
    lo, hi = _RANGES[act]
    return F32(lo), F32(hi)


def clamp(y: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    """min(max(y, lo), hi) in float32 (NaN propagates as in std::max/std::min with y first)."""
    return np.minimum(np.maximum(y, lo), hi).astype(F32)


def filter_of(node, ctx, i: int = 1) -> tuple[np.ndarray, np.ndarray, bool]:
    """(int8 filter, float32 scales, per_channel) of the constant quantized input ``i``."""
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None or t.const is None or t.quant is None:
        raise ModelError(f"node '{node.name}' ({node.op}): hybrid kernels need a constant quantized filter")
    if t.dtype != "int8":  # LiteRT also has uint8 (legacy) and int4 / int2 hybrid paths
        raise UnsupportedOpError(f"node '{node.name}' ({node.op}): dynamic-range kernels with a {t.dtype} "
                                 f"filter are not supported (int8 only)")
    scales = np.asarray(t.quant.scale, F32).reshape(-1)
    return np.asarray(t.const, np.int8), scales, scales.size > 1


def float_bias(node, ctx, i: int, n: int) -> np.ndarray | None:
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None:
        return None
    if t.const is None:
        raise ModelError(f"node '{node.name}' ({node.op}): a computed bias is not supported")
    b = np.asarray(t.const, F32).reshape(-1)
    if b.size != n:
        raise ModelError(f"node '{node.name}' ({node.op}): bias has {b.size} values, expected {n}")
    return b
