"""TFLite integer Conv / DepthwiseConv / ConvTranspose (variant ``tflite_ref``).

Numeric contract (``reference/integer_ops/{conv,depthwise_conv,transpose_conv}.h``):

    acc[.., oc] = sum (w - zw) * (x - zx) + bias[oc]        exact; padded cells contribute 0
    out = clamp(requant(acc, M[oc], shift[oc]) + zo, lo, hi)

* int8 (int32 bias): the accumulator is an int32 (scheme ``accumulator``: wrap or saturate when the
  exact sum leaves int32; never for realistic models) and the requantizer is the scheme's
  ``requant.rounding``.
* 16x8 (int16 activations): with an int64 bias (or no bias) the accumulator is int64 and the
  scheme's ``requant.rounding64`` is used (TFLite: MBQM64); with an int32 bias the int32 path.
  DepthwiseConv 16x8 is always int64.  (TFLM TRANSPOSE_CONV 16x8 reads an int32 bias buffer as
  int64 — not modelled.)  (LiteRT picks the int32 path from the op option
  ``quantized_bias_type``; a model with an int32 bias but without that option makes LiteRT read the
  bias buffer as int64, which is not modelled.)
* multipliers: ``QuantizeMultiplier(double(sx) * double(sw[oc]) / double(so))``; fused activation
  folded into [lo, hi] (``CalculateActivationRangeQuantized``).
* ``requant.channel_block`` / ``block_rounding`` (int32 paths only): output channels
  c < N*floor(C/N) use ``block_rounding``, the tail ``rounding`` (LiteRT optimized DepthwiseConv /
  TransposeConv: N = 8, upward, tail double).  The ``xnn`` variant (``xnn_gemm.py``) reuses these
  run functions with XNNPACK's float32 multipliers.

The sums are formed with float64 BLAS on integer-valued arrays: every partial sum is an integer of
magnitude < 2^53 (|w - zw| <= 255, |x - zx| <= 65535, K < 2^20), so the result is exact.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from refinterp.errors import ModelError
from refinterp.settings import fast_kernels
from refinterp.quant.params import (Requant, accumulate_overflow, activation_range, channel_block_of,
                            effective_scale_double, effective_scale_f32_product, per_channel_scales,
                            rounding_of)
from refinterp.quant.requant import Rounding
from ...float import conv as float_conv
from ...float import conv_transpose as _ftconv
from ..common import accumulator_settings
from .conv_fast import fast_conv
from .depthwise_fast import fast_depthwise
from .requant_fast import conv_finish
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant", "accumulator")  # the scheme settings these kernels read

_FAST = fast_kernels()

VARIANT = "tflite_ref"


@dataclass(frozen=True)
class QConvPlan:
    name: str
    fplan: Any  # the float kernel's plan: geometry only
    zx: int
    w: np.ndarray | None  # float64 (w - zw), None when the filter is computed at run time
    zw: Any
    bias: np.ndarray | None  # int64
    requant: Requant
    acc32: bool  # the backend accumulates in int32
    settings: Mapping[str, Any]  # the accumulator setting only (accumulator_settings)
    executed_by: str = ""  # delegate variants: "xnnpack" or "built-in kernel (<why XNNPACK refused>)"

    def describe(self) -> dict:
        d = {"input_zero_point": self.zx, **self.requant.describe(),
             "accumulator": "int32" if self.acc32 else "int64"}
        return {"executed_by": self.executed_by, **d} if self.executed_by else d


def _quant_of(ctx, i: int, what: str):
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None or t.quant is None:
        raise ModelError(f"node '{ctx.node.name}' ({ctx.node.op}): {what} has no quantization parameters")
    return t


def _one_pixel(out) -> bool:
    """The conv output (its static NHWC shape) is one pixel: the GEMM has one column."""
    shape = out.shape
    return shape is not None and len(shape) == 4 and None not in shape and shape[0] * shape[1] * shape[2] == 1


def prepare_common(node, ctx, n_out_axis: int, fplan, *, w_index: int = 1, b_index: int = 2,
                   always64: bool = False, eff_fn=effective_scale_double) -> QConvPlan:
    """Shared Prepare: ``n_out_axis`` is the filter axis holding the output channels; ``eff_fn``
    computes the real multipliers (default: ``double(sx) * double(sw[oc]) / double(so)``)."""
    x = _quant_of(ctx, 0, "input")
    w = _quant_of(ctx, w_index, "filter")
    out = ctx.outputs[0]
    if out.quant is None:
        raise ModelError(f"node '{node.name}' ({node.op}): output has no quantization parameters")
    wshape = w.const.shape if w.const is not None else tuple(w.shape)
    n_out = int(wshape[n_out_axis])
    sw = per_channel_scales(w.quant, n_out, node.name)
    if eff_fn is effective_scale_double and (ctx.settings.get("requant") or {}).get("multiplier") == "f32_product":
        eff_fn = effective_scale_f32_product
    eff = eff_fn(x.quant.scale[0], sw, out.quant.scale[0])
    zw_b = w.quant.broadcast(tuple(wshape))[1]
    wq = None if w.const is None else w.const.astype(np.float64) - zw_b.astype(np.float64)
    bt = ctx.inputs[b_index] if b_index < len(ctx.inputs) else None
    bias = None
    if bt is not None:
        if bt.const is None:
            raise ModelError(f"node '{node.name}' ({node.op}): a computed bias is not supported")
        bias = bt.const.astype(np.int64).reshape(-1)
    x16 = x.dtype == "int16"
    acc64 = x16 and (always64 or bt is None or bt.dtype == "int64")
    rounding = rounding_of(ctx.settings)
    block, block_rounding = channel_block_of(ctx.settings, node.name)
    if acc64 and not rounding.is_float:
        rounding = Rounding.parse((ctx.settings.get("requant") or {}).get("rounding64", "mbqm64"))
        block, block_rounding = 0, None  # the int64 (16x8) paths are scalar reference code
    gemv = (ctx.settings.get("requant") or {}).get("gemv_rounding")
    if gemv and node.op == "Conv" and not rounding.is_float and x.dtype in ("int8", "uint8") \
            and _one_pixel(out) and int(np.prod(wshape[1:])) >= 8 and n_out >= 4:
        rounding = Rounding.parse(gemv)  # cpu_backend_gemm: dst cols (output pixels) == 1 -> CustomGemv
    lo, hi = activation_range(node.attrs.get("activation"), out.quant.scale, out.quant.zero_point,
                              out.dtype, node.name)
    rq = Requant.build(eff, rounding, int(out.quant.zero_point[0]), lo, hi, out.dtype, block, block_rounding)
    return QConvPlan(node.name, fplan, int(x.quant.zero_point[0]), wq, zw_b, bias, rq, not acc64,
                     accumulator_settings(ctx))


def finish(plan: QConvPlan, acc_f: np.ndarray) -> np.ndarray:
    if _FAST:
        y = conv_finish(plan, acc_f)
        if y is not None:
            return y
    acc = acc_f.astype(np.int64)
    if plan.bias is not None:
        acc = acc + plan.bias
    if plan.acc32:
        acc = accumulate_overflow(acc, plan.settings)
    return plan.requant(acc)


def _weights(plan: QConvPlan, w) -> np.ndarray:
    return plan.w if plan.w is not None else np.asarray(w).astype(np.float64) - plan.zw


def prepare_conv(node, ctx, **kw):
    return prepare_common(node, ctx, 0, float_conv.prepare_node(node, ctx), **kw)


def prepare_dw(node, ctx, **kw):
    wl = node.attrs.get("weight_layout") or "1HWO"
    return prepare_common(node, ctx, -1 if wl == "1HWO" else 0, float_conv.prepare_node(node, ctx, depthwise=True),
                          always64=True, **kw)


@kernel("Conv", VARIANT, prepare=prepare_conv)
def qconv(plan: QConvPlan, x, w, b=None):
    y = fast_conv(plan, x) if _FAST else None
    if y is not None:
        return y
    xf = np.asarray(x).astype(np.float64) - plan.zx
    return finish(plan, float_conv.run_plan(plan.fplan, xf, _weights(plan, w), None))


@kernel("DepthwiseConv", VARIANT, prepare=prepare_dw)
def qdepthwise_conv(plan: QConvPlan, x, w, b=None):
    y = fast_depthwise(plan, x) if _FAST else None
    if y is not None:
        return y
    xf = np.asarray(x).astype(np.float64) - plan.zx
    return finish(plan, float_conv.run_plan(plan.fplan, xf, _weights(plan, w), None))


def prepare_tconv(node, ctx, **kw):
    wl = node.attrs.get("weight_layout") or "OHWI"
    axis = 0 if wl == "OHWI" else 1
    return prepare_common(node, ctx, axis, _ftconv.prepare_node(node, ctx), **kw)


@kernel("ConvTranspose", VARIANT, prepare=prepare_tconv)
def qconv_transpose(plan: QConvPlan, x, w, b=None, output_shape=None):
    """TFLite TRANSPOSE_CONV: scatter-accumulate (x - zx) * w, crop, + bias, requantize."""
    _ftconv.check_output_shape(plan.fplan, output_shape)
    xf = np.asarray(x).astype(np.float64) - plan.zx
    return finish(plan, _ftconv.conv_transpose(plan.fplan, xf, _weights(plan, w), None))
