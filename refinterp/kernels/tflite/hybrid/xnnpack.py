"""XNNPACK's dynamically quantized (QD8) FULLY_CONNECTED, CONV_2D and BATCH_MATMUL (variant ``xnn_hybrid``).

LiteRT's default XNNPACK delegate takes float-input / int8-filter FULLY_CONNECTED, CONV_2D and
BATCH_MATMUL (not DEPTHWISE_CONV_2D, which stays on the built-in hybrid kernel) and runs them as
``convert f32 -> qdint8`` + a qd8-f32-qc8w GEMM.  ``asymmetric_quantize_inputs`` is ignored: the
input is always quantized asymmetrically, per row (FC, BATCH_MATMUL, and 1x1 stride-1 ungrouped
unpadded CONV_2D with cin + cout > 2, which XNNPACK runs as a fully connected layer) or per image
(other CONV_2D).  Everything in float32 (``src/xnnpack/quantization.h``)::

    lo = min(0, min v), hi = max(0, max v) ; m = lo == hi ? 1 : f32(255 / f32(hi - lo))
    dlo = f32(lo * m), dhi = f32(hi * m)
    zp = f32(f32(-128 + dlo) + f32(127 + dhi)) > 0 ? f32(-128 - dlo) : f32(127 - dhi)
    zp = rint_even(clamp(zp, -128, 127)) ; inv = f32(1 / m)
    q = clamp(rint_even(f32(v * m)) + zp, -128, 127)

GEMM output (qd8-f32-qc8w-gemm ``minmax`` kernels; per-tensor filter scales are broadcast)::

    acc = sum (q - zp) * w                                   exact int32
    y = clamp(fma(f32(f32(acc) * inv), sw[o], bias[o]))      (one rounding; BATCH_MATMUL bias 0)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from refinterp.errors import ModelError
from ...float import conv as float_conv
from . import blockwise
from .common import F32, clamp
from .conv import HybridConvPlan, _prepare as _prepare_conv
from .matmul import _prepare_bmm, _prepare_fc, wrap32
from ...registry import kernel

VARIANT = "xnn_hybrid"


def qd8_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x float32 [rows, n] -> (q int64, inv scale float32 [rows], zero point int64 [rows])."""
    x = np.asarray(x, F32)
    if x.shape[-1] == 0:
        rows = x.shape[0]
        return np.zeros(x.shape, np.int64), np.ones(rows, F32), np.zeros(rows, np.int64)
    lo = np.minimum(F32(0), x.min(axis=1)).astype(F32)
    hi = np.maximum(F32(0), x.max(axis=1)).astype(F32)
    flat = lo == hi
    diff = np.where(flat, F32(1), (hi - lo).astype(F32)).astype(F32)
    m = np.where(flat, F32(1), (F32(255) / diff).astype(F32)).astype(F32)
    dlo, dhi = (lo * m).astype(F32), (hi * m).astype(F32)
    e = ((F32(-128) + dlo).astype(F32) + (F32(127) + dhi).astype(F32)).astype(F32)
    zp = np.where(e > 0, (F32(-128) - dlo).astype(F32), (F32(127) - dhi).astype(F32))
    zp = np.rint(np.clip(zp, F32(-128), F32(127))).astype(np.int64)
    inv = (F32(1) / m).astype(F32)
    q = np.clip(np.rint((x * m[:, None]).astype(F32)).astype(np.int64) + zp[:, None], -128, 127)
    return q, inv, zp


def fma_f32(a, b, c) -> np.ndarray:
    """Correctly rounded float32 a*b + c (the product is exact in float64; a float64 sum that lands
    exactly on a float32 half-way point is nudged by its TwoSum error before the final rounding)."""
    a, b, c = (np.asarray(v, F32) for v in (a, b, c))
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    r = s.astype(F32)
    d = s - r.astype(np.float64)
    other = np.nextafter(r, np.where(d > 0, F32(np.inf), F32(-np.inf)).astype(F32))
    tie = (d != 0) & ((r.astype(np.float64) + other.astype(np.float64)) / 2 == s)
    s = np.where(tie & (err != 0), np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def _always_asymmetric(prepare):
    """The built-in plan with ``asymmetric`` forced on (XNNPACK ignores the option)."""
    def run(node, ctx):
        if node.attrs.get("blockwise"):
            blockwise.refuse(node, "XNNPACK's qd8-f32-qb4w GEMM is not modelled")
        return replace(prepare(node, ctx), asymmetric=True)
    return run


@kernel("FullyConnected", VARIANT, prepare=_always_asymmetric(_prepare_fc))
def xnn_fully_connected(plan, x, w=None, b=None):
    x = np.asarray(x, F32)
    o, k = plan.w.shape
    if x.size % k:
        raise ModelError(f"node '{plan.name}' (FullyConnected): input size {x.size} not a multiple of {k}")
    q, inv, zp = qd8_rows(x.reshape(-1, k))
    acc = wrap32((q - zp[:, None]) @ plan.w.T)
    sw = np.broadcast_to(plan.scales, (o,))
    bias = np.zeros(o, F32) if plan.bias is None else plan.bias
    y = clamp(fma_f32((acc.astype(F32) * inv[:, None]).astype(F32), sw, bias), plan.lo, plan.hi)
    return y.reshape(x.shape[:-1] + (o,)) if plan.keep_num_dims else y.reshape(-1, o)


@dataclass(frozen=True)
class XnnConvPlan:
    conv: HybridConvPlan   # geometry, filter, scales, bias, clamp
    pointwise: bool        # run as a fully connected layer: one quantization row per pixel

    def describe(self) -> dict:
        return {"executed_by": "xnnpack (qd8-f32-qc8w)",
                "input_quantization": "asymmetric per pixel" if self.pointwise else "asymmetric per image"}


def _prepare_xconv(node, ctx) -> XnnConvPlan:
    plan = _prepare_conv(node, ctx, False, "tflite_hybrid_opt")
    w, fp = plan.w, plan.fplan  # w: OHWI
    pads = [int(p) for p in (fp.pads or ())]
    pointwise = (w.shape[1] == w.shape[2] == 1 and all(int(s) == 1 for s in (fp.strides or (1, 1)))
                 and int(node.attrs.get("group", 1) or 1) == 1 and not any(pads)
                 and w.shape[3] + w.shape[0] > 2)
    return XnnConvPlan(plan, pointwise)


@kernel("Conv", VARIANT, prepare=_prepare_xconv)
def xnn_conv(xplan: XnnConvPlan, x, w=None, b=None):
    plan, pointwise = xplan.conv, xplan.pointwise
    x = np.asarray(x, F32)
    if x.ndim != 4:
        raise ModelError(f"node '{plan.name}': hybrid conv needs a 4-D NHWC input, got rank {x.ndim}")
    rows = x.reshape(-1, x.shape[-1]) if pointwise else x.reshape(x.shape[0], -1)
    q, inv, zp = qd8_rows(rows)
    xq = (q - zp[:, None]).astype(np.float64).reshape(x.shape)
    acc = float_conv.run_plan(plan.fplan, xq, plan.w, None).astype(np.int64).astype(F32)
    inv_b = inv.reshape(acc.shape[:-1] + (1,)) if pointwise else inv.reshape(-1, 1, 1, 1)
    bias = np.zeros(plan.scales.size, F32) if plan.bias is None else plan.bias
    return clamp(fma_f32((acc * inv_b).astype(F32), plan.scales, bias), plan.lo, plan.hi)


@kernel("BatchMatMul", VARIANT, prepare=_always_asymmetric(_prepare_bmm))
def xnn_batch_matmul(plan, a, b=None):
    a = np.asarray(a, F32)
    if plan.adj_x:
        a = np.swapaxes(a, -1, -2)
    k = plan.w.shape[-1]
    if a.shape[-1] != k:
        raise ModelError(f"node '{plan.name}' (BatchMatMul): contraction {a.shape[-1]} != {k}")
    q, inv, zp = qd8_rows(a.reshape(-1, k))
    xq = (q - zp[:, None]).reshape(a.shape)
    acc = wrap32(np.matmul(xq, np.swapaxes(plan.w, -1, -2)))
    n = plan.w.shape[-2]
    sw = np.broadcast_to(plan.scales, (n,))
    scaled = (acc.astype(F32) * inv.reshape(a.shape[:-1] + (1,))).astype(F32)
    return fma_f32(scaled, sw, np.zeros(n, F32))
