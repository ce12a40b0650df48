"""PyTorch quantized conv / linear (variants ``fbgemm``, ``qnnpack``, ``onednn``) on the canonical Conv,
DepthwiseConv, MatMul and Gemm nodes of ONNX QOperator / fused QDQ models.

Numeric contract (refinterp/quant/torchq.py):

    acc[.., c] = sum (x - zx) * (w - zw[c])          exact int32
    aw[c]      = f32(xs * ws[c])
    bias_f[c]  = f32(f32(bias_q[c]) * aw[c])         the float bias torch holds (= DequantizeLinear
                                                     of the model's int32 bias)
* fbgemm: b = fbgemm_bias(bias_f, aw) (per-tensor: * f32(1.0/aw) ; per-channel: / aw);
  y = clamp(RNE(f32(f32(f32(acc) + b) * f32(aw / ys))) + zy)
* qnnpack: bq = RNE(f32(bias_f * f32(1/aw))) (int32, prepack); rs = f32(aw * f32(1/ys));
  y = clamp(RNE(f32(f32(acc + bq) * rs)) + zy)
A weight is per-channel when its QuantParams carry more than one scale.  Fused ReLU / ReLU6 reach
the kernel as the output clamp (the qdq pass drops Relu / Clip whose range covers the output's).
* onednn (engines 'onednn', and 'x86' which picks oneDNN for symmetric weights on VNNI CPUs):
  f = f32(f32(f32(f32(acc) * xs) * ws[c]) + bias_f); y = clamp(RNE(f32(f32(f * f32(1/ys)) + zy)))
  (scales applied one at a time; zero point in float before rounding).
The AVX2 int16 pair saturation (``impl: u8s8_sat16``, documented only) reuses the MLAS emulation.
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import torchq
from ..onnxruntime import gemm as ort_gemm
from ..onnxruntime.common import ort_kernel
from ..tflite.common import where

IMPLS = ("exact", "u8s8_sat16")


def _prepare(node, ctx, kind: str, engine: str):
    impl = (ctx.settings or {}).get("impl", "exact")
    if impl not in IMPLS:
        raise UnsupportedOpError(f"{where(node)}: impl '{impl}' is not one of {', '.join(IMPLS)}")
    ort_ctx = dataclasses.replace(ctx, settings={"impl": "mlas_f32_u8s8_sat16" if impl != "exact"
                                                 else "mlas_f32"})
    plan = ort_gemm.prepare_node(node, ort_ctx, kind)
    x, w = ctx.inputs[0], ctx.inputs[1]
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    per_channel = ws.size > 1
    aw = torchq.act_times_w(x.quant.scale[0], ws if per_channel else ws[0])
    aw = np.broadcast_to(aw, plan.mult.shape).astype(np.float32) if plan.mult.ndim else aw
    bias_f = None if plan.bias is None else (plan.bias.astype(np.float32) * aw).astype(np.float32)
    if plan.dtype == "float32":
        raise UnsupportedOpError(f"{where(node)}: a float output is not a PyTorch quantized op")
    ys = np.float32(ctx.outputs[0].quant.scale[0])
    if engine == "onednn":
        wsc = np.broadcast_to(ws if per_channel else ws[0], np.shape(aw)).astype(np.float32)
        extra = {"bias": bias_f, "mult": wsc, "ys": ys, "xs": np.float32(x.quant.scale[0])}
    elif engine == "fbgemm":
        extra = {"bias": None if bias_f is None else torchq.fbgemm_bias(bias_f, aw, per_channel),
                 "mult": (aw / ys).astype(np.float32)}
    else:
        extra = {"bias": None if bias_f is None else torchq.qnnpack_bias(bias_f, aw),
                 "mult": torchq.qnnpack_requant_scale(x.quant.scale[0], ws if per_channel else ws[0], ys)}
    return ort_gemm.EngineGemmPlan(dataclasses.replace(plan, bias=None), MappingProxyType(extra), engine)


def _finish(plans, acc) -> np.ndarray:
    plan, extra, engine = plans.gemm, plans.requant, plans.engine
    acc = np.asarray(acc).astype(np.int64)
    view = [1] * acc.ndim
    view[plan.chan_axis] = -1
    mult = extra["mult"].reshape(view) if np.size(extra["mult"]) > 1 else np.float32(extra["mult"])
    bias = extra["bias"]
    if bias is not None:
        bias = bias.reshape(view) if np.size(bias) > 1 else bias.reshape(())
    if engine == "onednn":
        y = torchq.onednn_requant(acc, extra["xs"], mult, bias, extra["ys"], plan.zy, plan.lo, plan.hi)
    elif engine == "fbgemm":
        y = torchq.fbgemm_requant(acc, bias, mult, plan.zy, plan.lo, plan.hi)
    else:
        y = torchq.qnnpack_requant(acc if bias is None else acc + bias, mult, plan.zy, plan.lo, plan.hi)
    return y.astype(plan.dtype)


def _register(engine: str) -> None:
    def conv(plans, x, w, b=None):
        return _finish(plans, ort_gemm.conv_acc(plans.gemm, x, w))

    def mm(plans, a, b, c=None):
        return _finish(plans, ort_gemm.mm_acc(plans.gemm, a, b))

    for kind, fn in (("Conv", conv), ("DepthwiseConv", conv), ("MatMul", mm), ("Gemm", mm)):
        ort_kernel(kind, engine, lambda n, c, k=kind: _prepare(n, c, k, engine), IMPLS)(fn)


_register("fbgemm")
_register("qnnpack")
_register("onednn")
