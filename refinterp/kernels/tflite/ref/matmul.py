"""TFLite integer FullyConnected and BatchMatMul (variant ``tflite_ref``).

FULLY_CONNECTED (``reference/integer_ops/fully_connected.h``)::

    acc[b, o] = sum_d (w[o, d] - zw) * (x[b, d] - zx) + bias[o]          exact
    float forms (LiteRT REF since 2025): eff[o] = double(sx) * double(sw[o]) / double(so),
        out = clamp(int32(round_half_away(double(acc) * eff[o])) + zo, lo, hi)
    integer forms (TFLM, older TFLite): per-channel M from double(sx)*double(sw[o])/double(so),
        per-tensor M from double(float32(sx*sw))/double(so) (GetQuantizedConvolutionMultipler)

BATCH_MATMUL (``reference/batch_matmul.h``)::

    acc = sum (a - za)(b - zb) ; M from double(float32(sa*sb))/double(so) ; no fused activation

Accumulation: float64 BLAS on integer values, exact for K < 2^20 (|products| < 2^32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from refinterp.errors import ModelError
from refinterp.quant.params import (Requant, accumulate_overflow, activation_range, effective_scale_double,
                            effective_scale_f32_product, per_channel_scales, qrange, rounding_of)
from refinterp.quant.requant import Rounding
from refinterp.settings import fast_kernels
from ..common import accumulator_settings
from .matmul_fast import fast_bmm, fast_fc
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant", "accumulator")  # the scheme settings these kernels read

_FAST = fast_kernels()

VARIANT = "tflite_ref"


@dataclass(frozen=True)
class QFCPlan:
    name: str
    keep_num_dims: bool
    zx: int
    w: np.ndarray | None  # float64 (w - zw) [O, I] when constant
    zw: np.ndarray
    bias: np.ndarray | None
    requant: Requant
    acc32: bool
    settings: Mapping[str, Any]  # the accumulator setting only (accumulator_settings)
    executed_by: str = ""  # delegate variants: "xnnpack" or "built-in kernel (<why>)"

    def describe(self) -> dict:
        d = {"input_zero_point": self.zx, **self.requant.describe(),
             "accumulator": "int32" if self.acc32 else "int64"}
        return {"executed_by": self.executed_by, **d} if self.executed_by else d


def _need_quant(ctx, i, what):
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None or t.quant is None:
        raise ModelError(f"node '{ctx.node.name}' ({ctx.node.op}): {what} has no quantization parameters")
    return t


FC_IMPLS = ("reference_16x8", "ruy_16x8")


def _one_row(x, wshape) -> bool:
    """The FC input (its static shape) is one row of ``wshape[1]`` features."""
    shape = x.shape
    return shape is not None and None not in shape and int(np.prod(shape)) == int(wshape[1])


def prepare_fc(node, ctx, eff_fn=None) -> QFCPlan:
    """``eff_fn(sx, sw[O], so)`` overrides the multiplier formula (delegate variants).

    16x8 (int16 activations) accumulator choice, scheme ``impl``:
    ``reference_16x8`` (default; reference kernels): int64 accumulator + ``requant.rounding64``
    unless the bias is int32; ``ruy_16x8`` (LiteRT optimized, ``fully_connected.cc``): only an
    int64 bias selects the int64 reference path (``rounding64``), no bias or an int32 bias runs
    the int32 ruy GEMM with ``requant.rounding``."""
    x = _need_quant(ctx, 0, "input")
    w = _need_quant(ctx, 1, "weights")
    out = ctx.outputs[0]
    wshape = w.const.shape if w.const is not None else tuple(w.shape)
    n_out = int(wshape[0])
    impl = ctx.settings.get("impl", "reference_16x8")
    if impl not in FC_IMPLS:
        raise ModelError(f"node '{node.name}' (FullyConnected): impl '{impl}' not one of {', '.join(FC_IMPLS)}")
    bt = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    bias = None if bt is None or bt.const is None else bt.const.astype(np.int64).reshape(-1)
    if bt is not None and bt.const is None:
        raise ModelError(f"node '{node.name}' (FullyConnected): a computed bias is not supported")
    no_bias64 = bt is None and impl == "reference_16x8"
    acc64 = x.dtype == "int16" and (no_bias64 or (bt is not None and bt.dtype == "int64"))
    rounding = rounding_of(ctx.settings)
    if acc64 and not rounding.is_float:
        rounding = Rounding.parse((ctx.settings.get("requant") or {}).get("rounding64", "mbqm64"))
    gemv = (ctx.settings.get("requant") or {}).get("gemv_rounding")
    if gemv and not rounding.is_float and x.dtype in ("int8", "uint8") and _one_row(x, wshape) \
            and wshape[1] >= 8 and n_out >= 4:
        rounding = Rounding.parse(gemv)  # cpu_backend_gemm: dst cols == 1 -> CustomGemv
    per_channel = np.asarray(w.quant.scale).size > 1
    sw = per_channel_scales(w.quant, n_out, node.name)
    if eff_fn is not None:
        eff = eff_fn(x.quant.scale[0], sw, out.quant.scale[0])
        eff = eff if per_channel else eff[0]
    elif rounding.is_float or per_channel:
        eff = effective_scale_double(x.quant.scale[0], sw, out.quant.scale[0])
    else:
        eff = effective_scale_f32_product(x.quant.scale[0], w.quant.scale[:1], out.quant.scale[0])[0]
    zw_b = w.quant.broadcast(tuple(wshape))[1]
    wq = None if w.const is None else w.const.astype(np.float64) - zw_b
    lo, hi = activation_range(node.attrs.get("activation"), out.quant.scale, out.quant.zero_point,
                              out.dtype, node.name)
    rq = Requant.build(eff, rounding, int(out.quant.zero_point[0]), lo, hi, out.dtype)
    return QFCPlan(node.name, bool(node.attrs.get("keep_num_dims", False)), int(x.quant.zero_point[0]),
                   wq, zw_b, bias, rq, not acc64, accumulator_settings(ctx))


@kernel("FullyConnected", VARIANT, prepare=prepare_fc, impls=FC_IMPLS)
def qfully_connected(plan: QFCPlan, x, w, b=None):
    y = fast_fc(plan, x) if _FAST else None
    if y is not None:
        return y
    wf = plan.w if plan.w is not None else np.asarray(w).astype(np.float64) - plan.zw
    n_in = wf.shape[1]
    x = np.asarray(x)
    if x.size % n_in:
        raise ModelError(f"node '{plan.name}': input of {x.size} elements not divisible by {n_in}")
    acc = ((x.reshape(-1, n_in).astype(np.float64) - plan.zx) @ wf.T).astype(np.int64)
    if plan.bias is not None:
        acc = acc + plan.bias
    if plan.acc32:
        acc = accumulate_overflow(acc, plan.settings)
    y = plan.requant(acc)
    if plan.keep_num_dims:
        y = y.reshape(x.shape[:-1] + (wf.shape[0],))
    return y


@dataclass(frozen=True)
class QBMMPlan:
    adj_x: bool
    adj_y: bool
    za: int
    zb: int
    requant: Requant
    settings: Mapping[str, Any]  # the accumulator setting only (accumulator_settings)
    executed_by: str = ""
    # int8 x int8: int32 accumulator (scheme ``accumulator`` overflow); int16 lhs (16x8): int64, exact
    # (LiteRT ``BatchMatMul<int16_t, int64_t>``: K = 256 full-scale products reach 2^38)
    acc32: bool = True
    # per-channel operand: LiteRT reads the legacy per-tensor params, which are scale 0 for a tensor
    # with several scales, so the multiplier is 0 and every output is the output zero point (clamped)
    constant: int | None = None

    def describe(self) -> dict:
        if self.constant is not None:
            return {"output": f"constant {self.constant} (per-channel operand: LiteRT's multiplier is 0)"}
        d = {"zero_points": [self.za, self.zb], **self.requant.describe(),
             "accumulator": "int32" if self.acc32 else "int64"}
        return {"executed_by": self.executed_by, **d} if self.executed_by else d


def prepare_bmm(node, ctx, eff_fn=effective_scale_f32_product) -> QBMMPlan:
    a = _need_quant(ctx, 0, "lhs")
    b = _need_quant(ctx, 1, "rhs")
    out = ctx.outputs[0]
    lo, hi = qrange(out.dtype)
    if a.quant.scale.size > 1 or b.quant.scale.size > 1:
        zo = int(np.clip(int(out.quant.zero_point[0]), lo, hi))
        return QBMMPlan(bool(node.attrs.get("adj_x", False)), bool(node.attrs.get("adj_y", False)), 0, 0,
                        None, {}, constant=zo)
    eff = eff_fn(a.quant.scale[0], b.quant.scale[:1], out.quant.scale[0])[0]
    rounding = rounding_of(ctx.settings)
    if out.dtype == "int16" and not rounding.is_float:
        rounding = Rounding.parse((ctx.settings.get("requant") or {}).get("rounding64", "mbqm64"))
    rq = Requant.build(eff, rounding, int(out.quant.zero_point[0]), lo, hi, out.dtype)
    return QBMMPlan(bool(node.attrs.get("adj_x", False)), bool(node.attrs.get("adj_y", False)),
                    int(a.quant.zero_point[0]), int(b.quant.zero_point[0]), rq, accumulator_settings(ctx),
                    acc32=a.dtype != "int16")


@kernel("BatchMatMul", VARIANT, prepare=prepare_bmm)
def qbatch_matmul(plan: QBMMPlan, a, b):
    if plan.constant is not None:
        sa = np.shape(a)[:-2] + ((np.shape(a)[-1],) if plan.adj_x else (np.shape(a)[-2],))
        sb = np.shape(b)[:-2] + ((np.shape(b)[-2],) if plan.adj_y else (np.shape(b)[-1],))
        shape = np.broadcast_shapes(sa[:-1], sb[:-1]) + (sa[-1], sb[-1])
        return np.full(shape, plan.constant, dtype=np.asarray(a).dtype)
    y = fast_bmm(plan, a, b) if _FAST else None
    if y is not None:
        return y
    af = np.asarray(a).astype(np.float64) - plan.za
    bf = np.asarray(b).astype(np.float64) - plan.zb
    if plan.adj_x:
        af = np.swapaxes(af, -1, -2)
    if plan.adj_y:
        bf = np.swapaxes(bf, -1, -2)
    acc = np.matmul(af, bf).astype(np.int64)  # exact: |acc| < 2^53 for K < 2^21 at int16
    return plan.requant(accumulate_overflow(acc, plan.settings) if plan.acc32 else acc)
