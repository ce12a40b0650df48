"""Fused activations applied after a float kernel (integer kernels fold them into the output clamp)."""
from __future__ import annotations

import numpy as np


def apply_activation(x: np.ndarray, act: str | None) -> np.ndarray:
    if not act or act == "NONE":
        return x
    if act == "RELU":
        return np.maximum(x, 0).astype(x.dtype, copy=False)
    if act == "RELU6":
        return np.clip(x, 0, 6).astype(x.dtype, copy=False)
    if act == "RELU_N1_TO_1":
        return np.clip(x, -1, 1).astype(x.dtype, copy=False)
    if act == "TANH":
        return np.tanh(x).astype(x.dtype, copy=False)
    if act == "SIGN_BIT":
        return np.signbit(x).astype(x.dtype)
    raise ValueError(f"unknown fused activation {act}")
