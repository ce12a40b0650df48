"""LiteRT dynamic-range CONV_2D and DEPTHWISE_CONV_2D (variants ``tflite_hybrid_ref`` / ``_opt``).

CONV_2D (``conv.cc``): when the filter scales are all equal (per-tensor) -> ``EvalHybrid``, the same
code in both resolvers::

    q, s[b] = symmetric quantization of the whole image b (hybrid_quant), scale[b] = f32(s[b] * sw[0])
    acc = sum w * q (padding contributes 0)                                    exact int32
    y = clamp(f32(f32(f32(acc) * scale[b]) + bias[oc]))

otherwise (``EvalHybridPerChannel``, also every grouped conv): asymmetric quantization per image
(``q, s[b], z[b]``), ``acc = sum w * (q - z[b])`` over in-bounds taps, then

    REF (reference_ops::HybridConvPerChannel):  f32(f32(f32(acc) * sw[oc]) * s[b]) + bias[oc]
    OPT (optimized_ops, ruy + Eigen):           f32(acc) * f32(sw[oc] * s[b]) + bias[oc]
                                                (grouped convs: the REF form)

DEPTHWISE_CONV_2D (``depthwise_conv.cc EvalHybridPerChannel``, int8 filter, scales per output
channel): asymmetric quantization per image, ``acc = sum w * (q - z[b])`` over in-bounds taps, then

    REF: f32(acc) * f32(sw[c] * s[b]) + bias[c]
    OPT (x86: NEON_2_SSE DepthwiseConvHybridGeneral): channels c < 4*floor(C/4):
         f32(f32(f32(acc) * sw[c]) * s[b]) + bias[c]; the C mod 4 tail channels:
         f32(f32(f32(acc) * s[b]) * sw[c]) + bias[c]
    then clamp.  (aarch64 3x3 fast kernels are not modelled.)

Integer sums: float64 convolution of integers, exact while |acc| < 2^53.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ...float import conv as float_conv
from .common import F32, act_range, clamp, filter_of, float_bias
from .quantize import asymmetric_rows, symmetric_rows
from ...registry import kernel

REF, OPT = "tflite_hybrid_ref", "tflite_hybrid_opt"


@dataclass(frozen=True)
class HybridConvPlan:
    name: str
    fplan: object            # the float ConvPlan (geometry)
    w: np.ndarray            # float64 filter values (exact int8)
    scales: np.ndarray       # float32 per output channel (broadcast from per-tensor)
    per_channel: bool        # False: symmetric EvalHybrid path (CONV_2D with one distinct scale)
    bias: np.ndarray | None
    order: str               # "acc_w_s" | "acc_ws" | "dw_opt" (see the module docstring)
    lo: np.float32
    hi: np.float32

    def describe(self) -> dict:
        return {"input_quantization": "asymmetric per image" if self.per_channel else "symmetric per image",
                "scale_order": self.order}


def _prepare(node, ctx, depthwise: bool, variant: str) -> HybridConvPlan:
    w, sw, _pc = filter_of(node, ctx)
    fplan = float_conv.prepare_node(node, ctx, depthwise=depthwise)
    n_out = w.shape[-1] if depthwise else w.shape[0]
    if sw.size not in (1, n_out):
        raise ModelError(f"node '{node.name}' ({node.op}): {sw.size} filter scales for {n_out} channels")
    scales = np.broadcast_to(sw, (n_out,)).astype(F32)
    if depthwise:
        per_channel, order = True, ("acc_ws" if variant == REF else "dw_opt")
    else:
        # LiteRT takes the per-channel path when any scale differs or the conv is grouped
        grouped = int(node.attrs.get("group", 1) or 1) != 1
        if grouped and sw.size != n_out:  # conv.cc Prepare: TF_LITE_ENSURE_EQ(scale->size, dims[qdim])
            raise ModelError(f"node '{node.name}' (Conv): a grouped dynamic-range conv needs one filter "
                             f"scale per output channel ({sw.size} for {n_out}); LiteRT refuses it too")
        per_channel = bool(np.any(sw != sw[0])) or grouped
        # the optimized resolver runs grouped hybrid convs on the reference kernel (conv.cc)
        order = "acc_w_s" if variant == REF or grouped else "acc_ws"
    lo, hi = act_range(node)
    return HybridConvPlan(node.name, fplan, w.astype(np.float64), scales, per_channel,
                          float_bias(node, ctx, 2, n_out), order, lo, hi)


def _acc(plan: HybridConvPlan, x: np.ndarray):
    """(int accumulators as float64 [N, H, W, C], per-image scale s[b] float32)."""
    n = x.shape[0]
    rows = np.asarray(x, F32).reshape(n, -1)
    if plan.per_channel:
        q, s, z = asymmetric_rows(rows)
        xq = q.astype(np.float64) - z.astype(np.float64)[:, None]
    else:
        q, s = symmetric_rows(rows)
        xq = q.astype(np.float64)
    acc = float_conv.run_plan(plan.fplan, xq.reshape(x.shape), plan.w, None)
    return acc, s


def _finish(plan: HybridConvPlan, acc: np.ndarray, s: np.ndarray) -> np.ndarray:
    a = acc.astype(np.int64).astype(F32)                  # exact ints -> float32 (rounds past 2^24)
    sb = s.reshape((-1,) + (1,) * (acc.ndim - 1))
    sw = plan.scales
    if not plan.per_channel:
        y = (a * (sb * sw[0]).astype(F32)).astype(F32)
    elif plan.order == "acc_w_s":
        y = ((a * sw).astype(F32) * sb).astype(F32)
    elif plan.order == "acc_ws":
        y = (a * (sw * sb).astype(F32)).astype(F32)
    else:  # dw_opt: 4-channel vector blocks, scalar tail with the other product order
        c = sw.size
        blk = (c // 4) * 4
        y = np.empty(a.shape, F32)
        y[..., :blk] = ((a[..., :blk] * sw[:blk]).astype(F32) * sb).astype(F32)
        y[..., blk:] = ((a[..., blk:] * sb).astype(F32) * sw[blk:]).astype(F32)
    if plan.bias is not None:
        y = (y + plan.bias).astype(F32)
    return clamp(y, plan.lo, plan.hi)


def _run(plan: HybridConvPlan, x, w=None, b=None):
    x = np.asarray(x, F32)
    if x.ndim != 4:
        raise ModelError(f"node '{plan.name}': hybrid conv needs a 4-D NHWC input, got rank {x.ndim}")
    acc, s = _acc(plan, x)
    return _finish(plan, acc, s)


for _v in (REF, OPT):
    kernel("Conv", _v, prepare=lambda node, ctx, _v=_v: _prepare(node, ctx, False, _v))(_run)
    kernel("DepthwiseConv", _v, prepare=lambda node, ctx, _v=_v: _prepare(node, ctx, True, _v))(_run)
