"""TFLite integer MEAN / SUM / REDUCE_MAX (variant ``tflite_ref``), ``reference/reduce.h``.

MEAN (``QuantizedMeanOrSum``, compute_sum=false)::

    n = product of the reduced dims ; S = sum of q (int32)
    (M, e) = QuantizeMultiplier(double(sx) / double(so))
    k = min(floor(log2 n), 32, 31 + e) ; M' = (int64(M) << k) // n ; e' = e - k
    out = clamp(requant(S - zx*n, M', e') + zo, qmin, qmax)       (no fused activation)

SUM: the same with (M, e) unchanged.  ``impl`` selects how the stored values are read:
``typed`` (TFLM: the tensor's own dtype) or ``uint8_bytes`` (LiteRT BUILTIN_REF: the reference SUM
path is instantiated with ``uint8_t`` for every input type, so int8 bytes are read as 0..255 and the
result is clamped to 0..255 and stored as a byte).  REDUCE_MAX: plain max (no requantization;
TFLite requires equal input/output params).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from refinterp.quant.fixedpoint import quantize_multiplier, wrap_int32
from refinterp.quant.params import qrange, rounding_of
from refinterp.quant.requant import Rounding, requantize
from refinterp.settings import fast_kernels
from .reduce_fast import fast_reduce
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_ref"
_FAST = fast_kernels()
SUM_IMPLS = ("typed", "uint8_bytes")


@dataclass(frozen=True)
class QReducePlan:
    op: str
    axes: tuple[int, ...] | None
    keepdims: bool
    zx: int
    zo: int
    M: int
    shift: int
    rounding: Rounding
    impl: str
    dtype: str

    def describe(self) -> dict:
        if self.op == "ReduceMax":
            return {"axes": self.axes, "keepdims": self.keepdims}
        return {"axes": self.axes, "keepdims": self.keepdims, "multiplier": self.M, "shift": self.shift,
                "rounding": self.rounding.value, "impl": self.impl, "zero_points": [self.zx, self.zo],
                "note": "MEAN folds 1/n into the multiplier at run time (QuantizedMeanOrSum)"}


def prepare_node(node, ctx) -> QReducePlan:
    axes = ctx.const(1)
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        raise ModelError(f"node '{node.name}' ({node.op}): computed axes are not supported")
    x, out = ctx.inputs[0], ctx.outputs[0]
    keep = bool(int(node.attrs.get("keepdims", 1)))
    ax = None if axes is None else tuple(int(a) for a in np.asarray(axes).ravel())
    if node.op == "ReduceMax" or x.quant is None or out.quant is None:
        return QReducePlan(node.op, ax, keep, 0, 0, 0, 0, Rounding.DOUBLE, "", out.dtype)
    M, sh = quantize_multiplier(float(np.float64(x.quant.scale[0]) / np.float64(out.quant.scale[0])))
    impl = ctx.settings.get("impl", "typed") if node.op == "ReduceSum" else "typed"
    if impl not in SUM_IMPLS:
        raise ModelError(f"node '{node.name}' ({node.op}): impl '{impl}' not supported by variant "
                         f"{VARIANT} (expected one of: {', '.join(SUM_IMPLS)})")
    if impl == "uint8_bytes" and np.dtype(x.dtype).itemsize != 1:
        raise ModelError(f"node '{node.name}' ({node.op}): impl uint8_bytes (LiteRT BUILTIN_REF SUM) "
                         f"cannot be modelled for {x.dtype} input (the backend reads raw bytes and leaves "
                         f"part of the output buffer unwritten)")
    return QReducePlan(node.op, ax, keep, int(x.quant.zero_point[0]), int(out.quant.zero_point[0]), M, sh,
                       rounding_of(ctx.settings), impl, out.dtype)


def reduce_axes(plan: QReducePlan, ndim: int) -> tuple[int, ...]:
    if plan.axes is None or len(plan.axes) == 0:
        return tuple(range(ndim))
    return tuple(sorted({a % ndim for a in plan.axes}))


def reduced_count(x: np.ndarray, ax) -> int:
    return int(np.prod([x.shape[a] for a in ax], dtype=np.int64))


@kernel(("ReduceMean", "ReduceSum"), VARIANT, prepare=prepare_node, impls={"ReduceSum": SUM_IMPLS})
def qmean_or_sum(plan: QReducePlan, x, axes=None):
    y = fast_reduce(plan, x) if _FAST else None
    if y is not None:
        return y
    x = np.asarray(x)
    ax = reduce_axes(plan, x.ndim)
    lo, hi = qrange(plan.dtype)
    v = x.astype(np.int64)
    if plan.impl == "uint8_bytes":
        v = v & 0xFF
        lo, hi = 0, 255
    n = reduced_count(x, ax)
    s = wrap_int32(np.sum(v, axis=ax, keepdims=plan.keepdims))  # int32 temp_sum
    M, sh = plan.M, plan.shift
    if plan.op == "ReduceMean" and n > 0:
        k = min(n.bit_length() - 1, 32, 31 + sh)
        M = (M << k) // n
        sh = sh - k
    y = requantize(wrap_int32(s - plan.zx * n), M, sh, plan.rounding) + plan.zo
    y = np.clip(y, lo, hi)
    if plan.impl == "uint8_bytes":
        return y.astype(np.uint8).view(np.int8) if plan.dtype == "int8" else y.astype(plan.dtype)
    return y.astype(plan.dtype)


@kernel("ReduceMax", VARIANT, prepare=prepare_node)
def qreduce_max(plan: QReducePlan, x, axes=None):
    x = np.asarray(x)
    ax = reduce_axes(plan, x.ndim)
    return np.max(x, axis=ax, keepdims=plan.keepdims).astype(plan.dtype)
