"""XNNPACK delegate (variant ``xnn``) for Conv / DepthwiseConv / ConvTranspose / FullyConnected /
BatchMatMul: the LiteRT default resolver hands these to XNNPACK when its validity checks pass,
otherwise the built-in (optimized) kernel runs them.

Decision (made in ``prepare`` from tensor params, shown by ``refinterp inspect`` as
``executed_by``): the checks of ``tflite/delegates/xnnpack/xnnpack_delegate.cc``
(``Visit{Conv2D,DepthwiseConv2D,TransposeConv,FullyConnected,BatchMatMul}Node``) that can fail
for a model TFLite itself accepts:

* activations: input and output int8 (or uint8), same type as the filter -> 16x8 falls back;
* filter and bias constant; Conv / DepthwiseConv need a bias;
* filter per-channel: quantized dimension 0 (DepthwiseConv 3), zero point 0, finite positive
  scales; per-tensor: zero point in [-128, 127] (int8) or [0, 255] (uint8, QU8 operators), finite
  positive normal scale;
* FullyConnected: int8 filter zero point 0; BatchMatMul: both operands the same type, RHS zero point 0;
* ConvTranspose (``CalculateTransposeConvPaddings``): VALID needs kernel <= output size; SAME
  needs ceil(output / stride) == input size and kernel >= stride in both dimensions.

Numeric contract when XNNPACK runs the node (``requant.rounding: float32_half_even`` from the
scheme's ``delegate`` settings)::

    scale[c] = float32(float32(sx * sw[c]) / so)                  (every op, per-tensor or per-channel)
    out = clamp(rint_even(float32(acc) * scale[c]) + zo, lo, hi)   acc = exact int32 sum + bias
    lo/hi = lrintf(clamp(f / so + zo, qmin, qmax)) for the fused activation's float bounds f

A node XNNPACK accepts but cannot build -- requantization scale ``float32(sx*sw[c])/so >= 256``
(checked by XNNPACK's operator creation) -- makes LiteRT 2.3.0 fail ``allocate_tensors`` ("failed
to create XNNPACK runtime"); ``prepare`` raises ``ModelError`` for it instead of computing numbers
the runtime never produces.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from refinterp.errors import ModelError
from refinterp.quant.params import qrange, xnn_scale_f32
from ..ref import conv as ref_conv
from ..ref import matmul as ref_matmul
from ...registry import PrepareContext, SettingsView, declare_settings, kernel

declare_settings(__name__, "requant", "accumulator", "delegate", "impl")  # the scheme settings these kernels read

VARIANT = "xnn"
_ACT_BOUNDS = {None: (None, None), "NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0),
               "RELU_N1_TO_1": (-1.0, 1.0)}


def _derive(ctx: PrepareContext, data: dict) -> PrepareContext:
    s = ctx.settings
    return replace(ctx, settings=s.derived(data) if isinstance(s, SettingsView) else data)


def _raw(ctx: PrepareContext) -> dict:
    s = ctx.settings
    return s.raw() if isinstance(s, SettingsView) else dict(s or {})


def delegate_ctx(ctx: PrepareContext) -> PrepareContext:
    """The node's settings with the scheme's ``delegate`` settings merged over them."""
    raw = _raw(ctx)
    base = {k: v for k, v in raw.items() if k != "delegate"}
    over = (ctx.settings or {}).get("delegate") or {}
    merged = dict(base)
    for k, v in over.items():
        merged[k] = {**base.get(k, {}), **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return _derive(ctx, merged)


def fallback_ctx(ctx: PrepareContext) -> PrepareContext:
    return _derive(ctx, {k: v for k, v in _raw(ctx).items() if k != "delegate"})


def _is8(t) -> bool:
    return t is not None and t.dtype in ("int8", "uint8")


def _filter_refusal(w, qdim: int) -> str | None:
    if w.const is None:
        return "filter is not a constant"
    q = w.quant
    s = np.asarray(q.scale, np.float32)
    if s.size > 1:
        if q.axis is not None and q.axis % len(w.shape or w.const.shape) != qdim:
            return f"per-channel filter quantized along axis {q.axis}, XNNPACK needs {qdim}"
        if int(q.zero_point[0]) != 0:
            return "per-channel filter with a non-zero zero point"
        if not np.all(np.isfinite(s) & (s > 0)):
            return "per-channel filter scale not finite and positive"
        return None
    zp = int(q.zero_point[0])
    lo, hi = (0, 255) if w.dtype == "uint8" else (-128, 127)  # QU8 filters: any uint8 zero point
    if not (lo <= zp <= hi) or not (np.isfinite(s[0]) and s[0] >= np.finfo(np.float32).tiny):
        return "per-tensor filter zero point / scale outside XNNPACK's range"
    return None


def _tconv_refusal(node, x, w, out) -> str | None:
    wshape = w.const.shape
    k = list(node.attrs.get("kernel_shape") or wshape[1:3])
    st = list(node.attrs.get("strides") or (1, 1))
    ohw = list(node.attrs.get("output_shape") or out.shape[1:3])
    ihw = list(x.shape[1:3])
    if node.attrs.get("auto_pad") == "VALID":
        if any(k[i] > ohw[i] for i in range(2)):
            return "VALID transpose conv with a kernel larger than the output"
        return None
    if any(-(-ohw[i] // st[i]) != ihw[i] for i in range(2)):
        return "SAME transpose conv whose input is not ceil(output / stride)"
    if any(k[i] < st[i] for i in range(2)):
        return "SAME transpose conv with kernel smaller than stride"
    return None


def refusal(node, ctx: PrepareContext) -> str | None:
    """Why XNNPACK would refuse this node (None: it takes it)."""
    op = node.op
    if op == "ConvTranspose":
        x, w, b = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2] if len(ctx.inputs) > 2 else None
    else:
        x, w = ctx.inputs[0], ctx.inputs[1]
        b = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    out = ctx.outputs[0]
    if op == "BatchMatMul":
        if not (_is8(x) and _is8(w) and _is8(out)) or x.dtype != w.dtype:
            return f"operand types {x.dtype} x {w.dtype} -> {out.dtype} (XNNPACK needs matching 8-bit types)"
        if int(w.quant.zero_point[0]) != 0:
            return "non-zero zero point of the right-hand operand"
        return None
    if not (_is8(x) and _is8(out)) or x.dtype != out.dtype or w.dtype != x.dtype:
        return f"types {x.dtype} x {w.dtype} -> {out.dtype} (XNNPACK QS8/QU8 needs 8-bit activations)"
    if node.attrs.get("activation") not in _ACT_BOUNDS:
        return f"fused activation {node.attrs.get('activation')}"
    qdim = {"Conv": 0, "DepthwiseConv": 3, "ConvTranspose": 0, "FullyConnected": 0}[op]
    why = _filter_refusal(w, qdim)
    if why:
        return why
    if op == "ConvTranspose":
        why = _tconv_refusal(node, x, w, out)
        if why:
            return why
    if op == "FullyConnected" and w.dtype == "int8" and np.any(np.asarray(w.quant.zero_point) != 0):
        return "non-zero filter zero point"  # (QS8; QU8 filters carry a kernel zero point)
    if b is None and op in ("Conv", "DepthwiseConv"):
        return "no bias"
    if b is not None and b.const is None:
        return "bias is not a constant"
    if b is not None and b.dtype != "int32":
        return f"bias type {b.dtype}"
    return None


def xnn_bounds(act, so, zo: int, dtype: str) -> tuple[int, int]:
    """``xnn_qs8_quantize`` of the activation's float bounds: lrintf(clamp(f/so + zo, qmin, qmax))."""
    qmin, qmax = qrange(dtype)
    fmin, fmax = _ACT_BOUNDS[act]

    def q(f, dflt):
        if f is None:
            return dflt
        v = np.float32(np.float32(f) / np.float32(so)) + np.float32(zo)
        return int(np.rint(np.clip(np.float32(v), qmin, qmax)))
    return q(fmin, qmin), q(fmax, qmax)


def _delegated(prepare_fn, node, ctx, **kw):
    why = refusal(node, ctx)
    if why is not None:
        plan = prepare_fn(node, fallback_ctx(ctx))
        return replace(plan, executed_by=f"built-in kernel (XNNPACK refuses: {why})")
    plan = prepare_fn(node, delegate_ctx(ctx), eff_fn=xnn_scale_f32, **kw)
    rq = plan.requant
    if np.any(np.asarray(rq.scale) >= 256.0):
        raise ModelError(f"node '{node.name}' ({node.source_op or node.op}): XNNPACK requantization scale "
                         f"{float(np.max(rq.scale)):g} >= 256: LiteRT's XNNPACK delegate fails to create its "
                         f"runtime for this model (allocate_tensors raises)")
    if node.op != "BatchMatMul":
        out = ctx.outputs[0]
        lo, hi = xnn_bounds(node.attrs.get("activation"), out.quant.scale[0], rq.zo, rq.dtype)
        rq = replace(rq, lo=lo, hi=hi)
    return replace(plan, requant=rq, executed_by="xnnpack")


kernel("Conv", VARIANT, prepare=lambda n, c: _delegated(ref_conv.prepare_conv, n, c))(ref_conv.qconv)
kernel("DepthwiseConv", VARIANT, prepare=lambda n, c: _delegated(ref_conv.prepare_dw, n, c))(ref_conv.qdepthwise_conv)
kernel("ConvTranspose", VARIANT, prepare=lambda n, c: _delegated(ref_conv.prepare_tconv, n, c))(ref_conv.qconv_transpose)
kernel("FullyConnected", VARIANT, prepare=lambda n, c: _delegated(ref_matmul.prepare_fc, n, c))(ref_matmul.qfully_connected)
kernel("BatchMatMul", VARIANT, prepare=lambda n, c: _delegated(ref_matmul.prepare_bmm, n, c))(ref_matmul.qbatch_matmul)
