"""The HTP GEMM plan (gemm.py, gemm16.py) and what both widths share: the bias the HTP re-derives and the
re-quantization of one-scale uint8 weights to symmetric int8 (refinterp/quant/htp_weights.py)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_weights
from ..onnxruntime import gemm as ort_gemm
from ..tflite.common import where


@dataclass(frozen=True)
class HtpGemmPlan:
    gemm: ort_gemm.QGemmPlan  # accumulator geometry and constants (its bias is added here)
    arch: str  # v68 | v73
    bias: np.ndarray | None  # int64 per output channel, as the HTP adds it
    k: np.ndarray  # per output channel: the accumulator shift
    m: np.ndarray  # per output channel: the multiplier (11 / 12 significant bits)
    z: np.ndarray  # v68 / dw_s2: the folded output zero point per channel (uint8 domain); a16: Z; else unused
    shift: int  # 128 for int8 outputs (v68 and dw_s2 compute in the uint8 domain)
    form: str  # conv (the arch's rule) | dw_s2 (stride-2 depthwise: k holds p, m holds i) | a16 (16-bit:
    #            m holds the integer mi, bias the term added to A >> 8) | a16_v68 (m the 11-bit multiplier)
    bound: np.ndarray | None = None  # a16: |g| beyond which the output saturates (htp.conv16_bound)
    zy_fold: np.ndarray | None = None  # a16_v68: the output zero point and bias folded, in g units
    # 16-bit ConvTranspose: Z per output channel and phase (M, s_h, s_w), z and bias then without it
    phase_z: np.ndarray | None = None


def htp_bias(node, ctx, bias: np.ndarray, ws: np.ndarray, per_channel: bool, truncate: bool = True) -> np.ndarray:
    """The int32 bias the v73 HTP adds (htp.py): per-channel weights re-quantize the whole vector
    (``conv_bias_per_channel``, the bias scale s_x * s_w[c] only), per-tensor ones -- and one-scale
    layers the HTP re-quantized per channel (uint8 weights) -- truncate each code (``conv_bias``).
    ``truncate=False``: the float32 values before the truncation (v68 at 16 bits)."""
    x = ctx.inputs[0]
    bs = ctx.inputs[2].quant.scale if ctx.inputs[2].quant is not None else None
    if bs is None or np.asarray(bs).size not in (1, bias.size):
        raise UnsupportedOpError(f"{where(node)}: the bias has no scale per tensor or per output channel")
    bs = np.asarray(bs, np.float32).ravel()
    xs = float(x.quant.scale[0])
    if per_channel:
        if not np.array_equal(np.broadcast_to(bs, ws.shape), (np.float32(xs) * ws).astype(np.float32)):
            raise UnsupportedOpError(f"{where(node)}: a per-channel bias whose scale is not s_x * s_w (float32) "
                                     "is not characterised on the HTP")
        return htp.conv_bias_per_channel(bias, xs, ws, truncate)
    if bs.size != 1:
        raise UnsupportedOpError(f"{where(node)}: a per-channel bias scale with per-tensor weights is not "
                                 "characterised on the HTP")
    return htp.conv_bias(bias, float(bs[0]), xs, ws if ws.size > 1 else ws[0], truncate)


def symmetric_weights(node, plan, ws: np.ndarray, kind: str):
    """(plan, weight scales, rh): one-scale uint8 weights re-quantized to symmetric int8 per output
    channel as the HTP does (htp_weights.py), the plan's weights and multipliers replaced; rh None
    when every channel's codes minus the zero point fit int8 (used as they are)."""
    if plan.w is None or (node.attrs.get("weight_layout") or "OIHW") != "OIHW":
        raise UnsupportedOpError(f"{where(node)}: uint8 weights are characterised on the HTP for constant weights "
                                 "only")
    axis = 0 if kind in ("Conv", "DepthwiseConv") or plan.fplan.transB else plan.w.ndim - 1  # output channels
    wq, rh = htp_weights.requantize_channels(np.moveaxis(plan.w, axis, 0))
    if np.all(rh == 1.0):
        return plan, ws, None
    wq = np.moveaxis(wq, 0, axis)
    ws = (ws * rh.astype(np.float32)).astype(np.float32)  # f32(s * rh): rh has 12 significant bits
    mult = htp_weights.multipliers(plan.mult.ravel(), rh)
    plan = dataclasses.replace(plan, w=wq.astype(np.float64), w_raw=wq.astype(np.int8),
                               zw=np.zeros_like(np.asarray(plan.zw)), mult=mult)
    return plan, ws, rh


def ort_plan(node, ctx, kind: str, own_scale_only: bool):
    """ONNX Runtime's plan of the node (accumulator geometry, constants); a bias of zeros dropped (its scale is then
    immaterial: a bias an exporter shares with another layer through Identity has that layer's scale).
    ``own_scale_only``: the HTP's bias rule there is measured with the bias on f32(s_x s_w) only (v68 at 8 bits, which
    folds it with the output zero point; the stride-2 depthwise kernel, which adds the codes as they are), so a
    nonzero bias on another scale is refused."""
    plan = ort_gemm.prepare_node(node, dataclasses.replace(ctx, settings={}), kind)
    if plan.bias is not None and not np.any(plan.bias):
        return dataclasses.replace(plan, bias=None)
    b = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    if own_scale_only and plan.bias is not None and b is not None and b.quant is not None:
        f32 = np.float32
        acc = (f32(ctx.inputs[0].quant.scale[0]) * np.asarray(ctx.inputs[1].quant.scale, f32).ravel()).astype(f32)
        bs = np.asarray(b.quant.scale, f32).ravel()
        if bs.size not in (1, acc.size) or not np.array_equal(np.broadcast_to(bs, acc.shape), acc):
            raise UnsupportedOpError(f"{where(node)}: a bias whose scale is not s_x * s_w, where the HTP's bias rule "
                                     "is measured on that scale only: not characterised")
    return plan
