"""LiteRT optimized MUL, 8-bit (variant ``tflite_opt``).

Source: LiteRT ``tflite/kernels/internal/optimized/integer_ops/mul.h`` (int8 ``MulElementwise`` /
``MulSimpleBroadcast``), ``optimized/optimized_ops.h`` (uint8 versions, ``BinaryBroadcastFiveFold``),
``reference/process_broadcast_shapes.h``.

The vector loop (NEON via NEON_2_SSE on x86; int8: 16 lanes, uint8: 8 lanes) computes the same
y = MBQM((a - z1)(b - z2)) as the reference, then narrows to int16 with saturation, adds the output
zero point in *wrapping* int16 arithmetic, and narrows to 8 bits with saturation:

    vector lanes: out = clamp(sat8(wrap16(sat16(y) + zo)), lo, hi)
    scalar tail:  out = clamp(y + zo, lo, hi)                        (= reference)

They differ only when |y| >= 2^15 - |zo| (saturated outputs), where the int16 add wraps.  Which
output elements are vector lanes follows the broadcast decomposition: the output is processed in
runs of L contiguous elements (no broadcast: the whole tensor; five-fold broadcast: y4, or y3 when
y4 == 1), and lane i of a run is vectorised iff i < W * floor(L / W).  Generic (six-D slow)
broadcasts run the reference code.  int16 MUL uses the reference formula.
"""
from __future__ import annotations

import numpy as np

from ..quant.fixedpoint import wrap_int32
from . import qelementwise
from ._qtflite import mbqm
from .registry import kernel

VARIANT = "tflite_opt"
_I64 = np.int64


def _fivefold_run(shape0: tuple, shape1: tuple) -> int | None:
    """Run length L of ``BinaryBroadcastFiveFold`` (None: generic broadcast, reference code;
    0: no broadcast, one run over the whole tensor)."""
    n = max(len(shape0), len(shape1))
    s0 = (1,) * (n - len(shape0)) + tuple(shape0)
    s1 = (1,) * (n - len(shape1)) + tuple(shape1)
    if s0 == s1:
        return 0
    first_fast = None
    for i in range(n - 1, -1, -1):
        if s0[i] == s1[i]:
            continue
        if s0[i] == 1:
            first_fast = True
        elif s1[i] == 1:
            first_fast = False
        else:
            return None
        break
    a, b = (s0, s1) if first_fast else (s1, s0)
    y = [1, 1, 1, 1, 1]
    i = n - 1
    while i >= 0 and a[i] == b[i]:
        y[4] *= b[i]
        i -= 1
    while i >= 0 and a[i] == 1:
        y[3] *= b[i]
        i -= 1
    while i >= 0 and a[i] == b[i]:
        y[2] *= a[i]
        i -= 1
    while i >= 0 and b[i] == 1:
        y[1] *= a[i]
        i -= 1
    while i >= 0 and a[i] == b[i]:
        y[0] *= b[i]
        i -= 1
    if i >= 0:
        return None
    return y[4] if y[4] > 1 else y[3]


def _vector_mask(out_size: int, run: int, width: int) -> np.ndarray:
    if run == 0:
        run = out_size
    lane = np.arange(out_size) % run
    return lane < width * (run // width)


def _prepare_mul(node, ctx):
    p = qelementwise._prepare_mul(node, ctx)
    if p["dtype"] in ("int8", "uint8"):
        p = dict(p, vector_width=16 if p["dtype"] == "int8" else 8)
    return p


@kernel("Mul", VARIANT, prepare=_prepare_mul)
def _mul(p, a, b):
    ref = qelementwise._run_mul(p, a, b)
    width = p.get("vector_width")
    run = _fivefold_run(a.shape, b.shape) if width else None
    if run is None:
        return ref
    prod = wrap_int32((a.astype(_I64) - p["z1"]) * (b.astype(_I64) - p["z2"]))
    y = np.broadcast_to(mbqm(prod, p["m"], p["shift"], p["rounding"]), ref.shape)
    t = np.clip(y, -32768, 32767) + p["zo"]
    t = ((t + 32768) & 0xFFFF) - 32768  # vaddq_s16 wraps
    qlo, qhi = (-128, 127) if p["dtype"] == "int8" else (0, 255)
    lo, hi = p["clamp"]
    vec = np.clip(np.clip(t, qlo, qhi), lo, hi).astype(p["dtype"])
    mask = _vector_mask(ref.size, run, width).reshape(ref.shape)
    return np.where(mask, vec, ref)
