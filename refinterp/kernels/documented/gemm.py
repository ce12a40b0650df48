"""Conv / DepthwiseConv / MatMul / Gemm of the documented (not runtime-verified) schemes:
variants ``dpu`` (Vitis-AI DPU), ``glow_cpu``, ``glow_interp`` (Glow CPU backend / Interpreter)
and ``tvm_qnn`` (TVM Relay QNN).  The exact accumulator (with zero points) and the int32 bias come
from the ONNX Runtime plan (ort_gemm); only the epilogue differs:

* dpu: power-of-two scales, zero points 0; y = DPU_ROUND((acc + b*2^shift_bias) * 2^-shift_cut)
  (refinterp/quant/vitis.py conv_fix); per-tensor weights only.
* glow_cpu: y = clip(transform(acc + bias, quantizeScaleOffset32To8(f32(xs*ws) / ys)) + zy):
  truncating pre-shift, ~8-bit multiplier, half-up post-shift (refinterp/quant/glow.py).
* glow_interp: y = clip(std::round(f32(f32(acc + bias) * f32(f32(xs*ws)/ys) + zy))).
* tvm_qnn: y = clip(requantize(acc + bias, double(f32(xs*ws)) / double(ys)) + zy) with
  ``impl`` upward (default) | tonearest | tflite (refinterp/quant/tvmqnn.py).
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import glow, tvmqnn, vitis
from ..onnxruntime import gemm as ort_gemm
from ..onnxruntime.common import ort_kernel
from ..tflite.common import where

TVM_IMPLS = {"upward": "UPWARD", "tonearest": "TONEAREST", "tflite": "TFLITE"}


def _prepare(node, ctx, kind: str, variant: str):
    impl = (ctx.settings or {}).get("impl") if variant == "tvm_qnn" else None
    if variant == "tvm_qnn" and (impl or "upward") not in TVM_IMPLS:
        raise UnsupportedOpError(f"{where(node)}: impl '{impl}' is not one of {', '.join(TVM_IMPLS)}")
    plan = ort_gemm.prepare_node(node, dataclasses.replace(ctx, settings={}), kind)
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    xs, ys = np.float32(x.quant.scale[0]), np.float32(y.quant.scale[0])
    extra = {"variant": variant, "rounding": TVM_IMPLS[impl or "upward"]}
    if variant == "dpu":
        if ws.size > 1 or plan.zx or plan.zy or np.any(plan.zw):
            raise UnsupportedOpError(f"{where(node)}: the DPU needs per-tensor weights and zero points 0")
        try:
            extra["fp"] = (vitis.fix_pos(xs), vitis.fix_pos(ws[0]), vitis.fix_pos(ys))
        except ValueError as e:
            raise UnsupportedOpError(f"{where(node)}: {e} (the DPU uses power-of-two scales)") from None
    ratio = ((xs * ws).astype(np.float32) / ys).astype(np.float32)
    if variant == "glow_cpu":
        extra["params"] = [glow.scale_transform(float(r)) for r in ratio]
    extra["ratio"] = ratio
    extra["tvm_m"] = [float(np.float64(np.float32(xs * s)) / np.float64(ys)) for s in ws]
    return ort_gemm.EngineGemmPlan(plan, MappingProxyType(extra), variant)


def _finish(plans, acc) -> np.ndarray:
    plan, ex = plans.gemm, plans.requant
    acc = np.asarray(acc).astype(np.int64)
    if plan.bias is not None:
        view = [1] * acc.ndim
        view[plan.chan_axis] = -1
        acc = acc + (plan.bias.reshape(view) if plan.kind in ("Conv", "DepthwiseConv") else plan.bias)
    v = ex["variant"]
    view = [1] * acc.ndim
    view[plan.chan_axis] = -1

    def chan(vals):  # per-tensor -> scalar, per-channel -> broadcast along the channel axis
        a = np.asarray(vals)
        return a.reshape(()) if a.size == 1 else a.reshape(view)

    if v == "dpu":
        fi, fw, fo = ex["fp"]
        y = vitis.conv_fix(acc, None, fi, fw, fi + fw, fo, None, plan.lo, plan.hi)
    elif v == "glow_cpu":
        pre, post, mult = (chan([p[k] for p in ex["params"]]) for k in range(3))
        y = glow.transform(acc, pre, post, mult, plan.zy)
    elif v == "glow_interp":
        y = glow.interp_requant(acc, chan(ex["ratio"]), plan.zy, plan.lo, plan.hi)
    else:
        y = tvmqnn.requantize(acc, chan(ex["tvm_m"]), ex["rounding"]) + plan.zy
    return np.clip(y, plan.lo, plan.hi).astype(plan.dtype)


def _register(variant: str) -> None:
    def conv(plans, x, w, b=None):
        return _finish(plans, ort_gemm.conv_acc(plans.gemm, x, w))

    def mm(plans, a, b, c=None):
        return _finish(plans, ort_gemm.mm_acc(plans.gemm, a, b))

    for kind, fn in (("Conv", conv), ("DepthwiseConv", conv), ("MatMul", mm), ("Gemm", mm)):
        ort_kernel(kind, variant, lambda n, c, k=kind: _prepare(n, c, k, variant),
                   tuple(TVM_IMPLS) if variant == "tvm_qnn" else ())(fn)


for _v in ("dpu", "glow_cpu", "glow_interp", "tvm_qnn"):
    _register(_v)
