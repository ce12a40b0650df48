"""Fused multiply-add in float32, exactly as hardware computes it: ``a * b + c`` rounded ONCE
(to nearest, ties to even).  aarch64 compilers contract ``x * y + z`` into FMAs (clang's
``-ffp-contract=on`` within an expression; GCC's default ``fast`` even across NEON intrinsics),
so ARM builds of a kernel can differ from x86 builds that round the product first.

Method (vectorised, no loops): for float32 inputs the product is exact in float64 (24 + 24 bits);
the float64 sum ``s`` is then rounded to odd (its error, from TwoSum, decides: an inexact sum is
truncated toward zero and its last bit set), and round-to-odd at 53 bits followed by one rounding
to 24 bits is the correctly rounded result (53 >= 24 + 2).
"""
from __future__ import annotations

import numpy as np


def fma_f32(a, b, c) -> np.ndarray:
    """float32(a * b + c) with a single rounding; a, b, c float32 (scalars or arrays)."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = a * b                              # exact: 48 significant bits at most
    s = p + c
    bp = s - c                             # TwoSum: err = (p - bp) + (c - (s - bp)), exact
    err = (p - bp) + (c - (s - bp))
    toward_zero = np.where((err != 0) & (np.sign(err) != np.sign(s)), np.nextafter(s, 0.0), s)
    bits = toward_zero.view(np.int64)
    odd = np.where(err != 0, bits | 1, bits).view(np.float64)
    return odd.astype(np.float32)
