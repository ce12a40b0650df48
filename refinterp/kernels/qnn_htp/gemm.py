"""HTP Conv / DepthwiseConv / ConvTranspose / Gemm / MatMul with 8- and 16-bit activations, int8 weights.

The accumulator (zero points subtracted, int32 bias added) is exact, from the ONNX Runtime plan
(kernels/onnxruntime/gemm.py); the epilogue is the HTP's:

* ``htp_v68``: refinterp/quant/htp_ops.py ``conv_requant_v68`` (11-bit multiplier, output zero point
  folded into the accumulator, uint8 domain; int8 moved by 128) with the bias folded with it in float32 as v73's
  untruncated quotient (``htp_ops.folded_offset8``).
* ``htp_v73``: refinterp/quant/htp.py ``conv_requant`` (12-bit multiplier, the middle of the dropped
  bits, zero point after) with the bias re-derived by ``htp.conv_bias`` (per-tensor weights) or
  ``htp.conv_bias_per_channel`` (per-channel weights: the bias vector re-quantized as a whole; a bias
  scale other than s_x * s_w[c] is refused there, not measured).
* 16-bit activations (uint16 / int16 in and out, constant int8 weights; uint16 with one-scale uint8 weights
  re-quantized as below first, int16 with uint8 weights the QNN EP does not take): v73 ``htp.conv16_requant`` on
  g = (A >> 8) - round_half_up(Z / 256) + trunc(b / 256) (htp.py, "16-bit activations"); v68 the same g
  without the bias, plus the output zero point and the bias (v73's float32 quotient, not truncated) folded
  in accumulator units, times an 11-bit multiplier (htp_ops.py, "v68 16-bit convolution"); an int16
  depthwise Conv (the QNN EP does not take it) is refused; a uint16 one with stride 2 runs the 8-bit
  stride-2 depthwise kernel (``_dw_stride2_16``).
* ConvTranspose (2-D, one group, int8 weights per-tensor or on axis 1): the exact accumulator of the
  transposed convolution (``ort_gemm.tconv_acc``) through the arch's rule above, 8 and 16 bit.  At 16
  bits the HTP runs one convolution per output phase, so Z is per phase (``_tconv_phase_z``).  A dilated
  one the QNN EP does not take (measured); grouped, 1-D and 3-D ones are not measured: refused.
* Depthwise Conv with stride 2 (both archs): its own kernel, ``htp_ops.dw_stride2_requant`` (15-bit
  multiplier, no pre-shift); multipliers M >= 1/2 there are refused (not characterised).  A strided 1x1
  depthwise Conv takes the arch's convolution rule instead; v68's 1x1 depthwise with a stride of 1 and v73's
  by (2, 2) on 2-4 channels are refused (measured: another kernel, one value per channel).
* uint8 weights with a zero point (one scale): re-quantized per output channel to symmetric int8 as
  the HTP does (refinterp/quant/htp_weights.py), then the per-channel rule of the arch; the stride-2
  depthwise kernel takes w - z_w as it is.
* MatMul of two activations: the same re-quantization of B's columns at run time (matmul_act.py).

Refused at prepare: a dilated Conv with strides above 1 (measured: 1-20 codes in 2,000-9,000 off the
convolution rule, not identified; dilated depthwise ones and dilated stride 1 follow the rules above), int8
weights with a zero point other than 0 (not
measured), uint8 weights with per-channel scales (the QNN EP leaves such a node unassigned: measured) or on int8
activations (measured: 42-297 codes of 512-1,800 off the rule that holds on uint8 activations),
Gemm with alpha / beta other than 1, float outputs.
"""
from __future__ import annotations

import functools

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_ops, htp_weights
from ..float import conv_transpose as float_tconv
from ..onnxruntime import gemm as ort_gemm
from ..tflite.common import where
from . import matmul_act
from .common import ARCHS, SIXTEEN_BIT, htp_kernel, require_8bit, shift_of
from .gemm16 import prepare16
from .gemm_plan import HtpGemmPlan, htp_bias, ort_plan, symmetric_weights


def _prepare(node, ctx, kind: str, variant: str) -> HtpGemmPlan | matmul_act.HtpActMatMulPlan:
    arch = ARCHS[variant]
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if kind == "Gemm" and (float(node.attrs.get("alpha", 1.0)) != 1.0 or float(node.attrs.get("beta", 1.0)) != 1.0):
        raise UnsupportedOpError(f"{where(node)}: Gemm with alpha / beta other than 1 is not characterised on the HTP")
    if kind == "MatMul" and w is not None and w.const is None:  # two activations: matmul_act.py
        return matmul_act.prepare(node, ctx, arch)
    if kind == "ConvTranspose":
        _require_tconv(node, ctx)
    if kind == "Conv" and any(int(v) != 1 for v in node.attrs.get("dilations") or ()) \
            and any(int(v) != 1 for v in node.attrs.get("strides") or ()):
        raise UnsupportedOpError(f"{where(node)}: a dilated Conv with strides {list(node.attrs['strides'])}: the "
                                 "HTP runs another kernel there, not characterised (kernels/qnn_htp/MEASURED.md)")
    if x is not None and y is not None and x.dtype in SIXTEEN_BIT:
        return prepare16(node, ctx, kind, arch)
    require_8bit(node, [x, y])
    if w is None or w.dtype not in ("int8", "uint8"):
        raise UnsupportedOpError(f"{where(node)}: weights of type {getattr(w, 'dtype', None)}: the HTP rules "
                                 "here are measured with 8-bit weights only")
    depthwise = kind == "DepthwiseConv"
    strided = depthwise and any(int(v) != 1 for v in node.attrs.get("strides") or ())
    plan = ort_plan(node, ctx, kind, arch == "v68" or strided)
    if plan.dtype == "float32":
        raise UnsupportedOpError(f"{where(node)}: a float output of a quantized GEMM is not characterised on the HTP")
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    if w.dtype == "int8" and np.any(np.asarray(plan.zw) != 0):
        raise UnsupportedOpError(f"{where(node)}: int8 weights with a zero point other than 0 are not characterised "
                                 "on the HTP")
    if w.dtype == "uint8" and x.dtype == "int8":
        raise UnsupportedOpError(f"{where(node)}: uint8 weights with int8 activations: the HTP computes another result "
                                 "than with the same layer on uint8 activations (42-297 codes of 512-1,800 off "
                                 "the uint8 weight rule, Conv and depthwise, v68 and v73: measured), not characterised")
    if w.dtype == "uint8" and ws.size != 1:  # measured: the QNN EP leaves the node unassigned, the session fails
        raise UnsupportedOpError(f"{where(node)}: uint8 weights with per-channel scales: the QNN EP does not take "
                                 "them onto the HTP (measured), so they have one scale only here")
    pointwise = depthwise and all(int(v) == 1 for v in plan.fplan.kernel_shape)
    if pointwise and arch == "v68" and any(int(v) == 1 for v in plan.fplan.strides or (1,)):
        raise UnsupportedOpError(f"{where(node)}: a 1x1 depthwise Conv with strides {list(plan.fplan.strides)}: v68 "
                                 "runs another kernel there (1-62 codes off the depthwise and the convolution rules "
                                 "and a Mul by the weights: measured), not characterised")
    if pointwise and arch == "v73" and [int(v) for v in plan.fplan.strides] == [2, 2] and w.const is not None \
            and 2 <= np.shape(w.const)[0] <= 4:
        raise UnsupportedOpError(f"{where(node)}: a 1x1 depthwise Conv with strides [2, 2] on 2-4 channels: v73 gives "
                                 "one value per channel there, not a convolution (measured; 1 and 5 or more channels, "
                                 "other strides follow the convolution rule), not characterised")
    # a strided 1x1 depthwise Conv takes the convolution rule, not the strided depthwise kernel (measured: 0 off at
    # strides 2 / 3 on both archs, (1, 2) / (2, 1) on v73, per-tensor / per-channel int8 weights, with and without
    # a bias; the strided depthwise kernel was 4-42 codes of 512 off)
    dw_strided = strided and not pointwise
    rh = None  # the HTP's per-channel scale factors of re-quantized uint8 weights (htp_weights.py)
    if w.dtype == "uint8" and not dw_strided:
        plan, ws, rh = symmetric_weights(node, plan, ws, kind)
    per_channel = ws.size > 1
    mult = np.asarray(plan.mult, np.float64).ravel()
    if per_channel and rh is None:  # both archs through the largest weight scale (v73: measured at 16 bits)
        mult = htp_ops.per_channel_multipliers(float(x.quant.scale[0]), ws, float(y.quant.scale[0]))
    form = "conv"
    if dw_strided:  # uint8 weights: w - z_w exactly here, not re-quantized (measured)
        if any(int(v) != 2 for v in plan.fplan.strides) or np.any(mult >= 0.5):
            raise UnsupportedOpError(f"{where(node)}: depthwise strides {list(plan.fplan.strides)} with multipliers "
                                     f"up to {float(mult.max()):.4g}: the HTP's strided depthwise kernel is "
                                     "characterised for stride 2 and multipliers below 1/2 only")
        if per_channel and plan.bias is not None and np.any(mult < htp_ops.DW_S2_PER_CHANNEL_BIAS_MIN_M):
            raise UnsupportedOpError(f"{where(node)}: stride-2 depthwise with per-channel weights, a bias and a "
                                     f"multiplier {float(mult.min()):.3g} below "
                                     f"{htp_ops.DW_S2_PER_CHANNEL_BIAS_MIN_M}: not characterised on the HTP")
        form = "dw_s2"  # the same kernel on both archs: the bias codes as they are, uint8 domain
    bias = plan.bias
    groups = int(node.attrs.get("group", 1) or 1)
    if arch == "v73" and kind == "Conv" and groups > 1 and per_channel and bias is not None:
        raise UnsupportedOpError(f"{where(node)}: a grouped Conv ({groups} groups) with per-channel weights and a bias: "
                                 "the v73 HTP derives its bias otherwise (a RegNet-X layer: one output of 1,600 off "
                                 "both the whole-vector rule and each channel's own quotient), not characterised")
    if arch == "v73" and bias is not None and form == "conv":
        bias = htp_bias(node, ctx, bias, ws, per_channel and rh is None)
    if form == "dw_s2":
        params = [htp_ops.dw_stride2_params(float(M)) for M in mult]
    elif arch == "v68":
        params = [htp_ops.conv_requant_params_v68(float(M)) for M in mult]
    else:
        params = [htp.conv_requant_params(float(M)) for M in mult]
    k = np.array([p[0] for p in params], np.int64)
    m = np.array([p[1] for p in params], np.float64)
    folds = form == "dw_s2" or arch == "v68"
    shift = shift_of(plan.dtype) if folds else 0
    if rh is not None and arch == "v68":  # the bias folds with the zero point in one rounding
        z, bias = htp_weights.folded_offset_v68(plan.zy + shift, mult, bias, rh), None
    elif arch == "v68" and form == "conv" and bias is not None:  # v73's quotient untruncated, folded in float32
        b = htp_bias(node, ctx, bias, ws, per_channel, truncate=False)
        z, bias = htp_ops.folded_offset8(plan.zy + shift, mult, b), None
    else:
        z = htp_ops.folded_zero_point(plan.zy + shift, mult) if folds else np.zeros_like(k)
    return HtpGemmPlan(plan, arch, bias, k, m, z, shift, form)


def _require_tconv(node, ctx) -> None:
    """ConvTranspose is measured 2-D, with one group and constant int8 weights, per-tensor or per output
    channel (axis 1)."""
    w = ctx.inputs[1]
    if int(node.attrs.get("group", 1) or 1) != 1 or w is None or w.dtype != "int8" or w.const is None \
            or w.const.ndim != 4 or w.quant is None or not (w.quant.per_tensor or w.quant.axis % 4 == 1):
        raise UnsupportedOpError(f"{where(node)}: ConvTranspose with group {node.attrs.get('group', 1)} and "
                                 f"{getattr(w, 'dtype', None)} weights: the HTP's is characterised 2-D with one "
                                 "group and constant int8 weights, per-tensor or on axis 1, only")
    if any(int(v) != 1 for v in node.attrs.get("dilations") or ()):  # measured: the EP leaves it unassigned
        raise UnsupportedOpError(f"{where(node)}: a dilated ConvTranspose: the QNN EP does not take it onto the HTP")


def _epilogue(p: HtpGemmPlan, acc, zt=None) -> np.ndarray:
    """``zt``: the 16-bit (Z, term) per output position when they are not per channel (ConvTranspose)."""
    g = p.gemm
    acc = np.asarray(acc).astype(np.int64)
    view = [1] * acc.ndim
    view[g.chan_axis] = -1

    def chan(v):
        return v.reshape(()) if v.size == 1 else v.reshape(view)

    if p.form in ("a16", "a16_v68"):  # the 16-bit plans always carry Z and the term
        Z, term = zt if zt is not None else (chan(p.z), chan(p.bias))
    if p.form == "a16_v68":  # g = (A >> 8) + term, then the v68 16-bit rule in the uint16 domain (htp_ops.py)
        y = htp_ops.conv16_apply_v68(((acc + Z) >> 8) + term, chan(p.zy_fold), chan(p.m)) - p.shift
        return np.clip(y, g.lo, g.hi).astype(g.dtype)
    if p.form == "a16":  # ORT's accumulator + Z = A; g = (A >> 8) + term (htp.py, 16-bit)
        gg = ((acc + Z) >> 8) + term
        y = htp.conv16_apply(gg, chan(p.k), chan(p.m), chan(p.bound), g.zy, g.lo, g.hi)
        return y.astype(g.dtype)
    if p.bias is not None:
        acc = acc + (chan(p.bias) if g.kind in ort_gemm.CONV_KINDS else p.bias)
    k, m = chan(p.k), chan(p.m)
    if p.form == "dw_s2":
        y = htp_ops.dw_stride2_requant(acc + chan(p.z), k, m.astype(np.int64), g.lo + p.shift, g.hi + p.shift)
        return (y - p.shift).astype(g.dtype)
    if p.arch == "v68":
        a = acc + chan(p.z)
        a = np.where(k >= 0, a >> np.maximum(k, 0), a << np.maximum(-k, 0))
        y = np.clip(np.floor(a.astype(np.float64) * m + 0.5), 0, 255) - p.shift
        return np.clip(y, g.lo, g.hi).astype(g.dtype)
    a = np.where(k >= 0, acc >> np.maximum(k, 0), acc << np.maximum(-k, 0))
    y = np.floor((a.astype(np.float64) + 0.5) * m + 0.5).astype(np.int64) + g.zy
    return np.clip(y, g.lo, g.hi).astype(g.dtype)


def _conv(p: HtpGemmPlan, x, w, b=None):
    return _epilogue(p, ort_gemm.conv_acc(p.gemm, x, w))


def _tconv(p: HtpGemmPlan, x, w, b=None):
    acc = ort_gemm.tconv_acc(p.gemm, x, w)
    if p.phase_z is None:
        return _epilogue(p, acc)
    fp = p.gemm.fplan  # output o is full-result position o + begin; its phase (o + begin) mod s
    s, _, begin, out = float_tconv.geometry(fp, np.shape(x)[2:], np.shape(w)[2:], 2)
    uy, ux = ((np.arange(n) + b0) % s0 for n, b0, s0 in zip(out, begin, s))
    Z = p.phase_z[:, uy][:, :, ux][None]  # (1, M, OH, OW)
    term = p.bias.reshape(1, -1, 1, 1) - np.floor(Z / 256 + 0.5).astype(np.int64)
    return _epilogue(p, acc, (Z, term))


def _matmul(p, a, b, c=None):  # Gemm: C is the bias, already on the plan
    if isinstance(p, matmul_act.HtpActMatMulPlan):
        return matmul_act.run(p, a, b)
    return _epilogue(p, ort_gemm.mm_acc(p.gemm, a, b))


for _kind, _run in (("Conv", _conv), ("DepthwiseConv", _conv), ("ConvTranspose", _tconv), ("MatMul", _matmul),
                    ("Gemm", _matmul)):
    for _variant in ARCHS:
        htp_kernel(_kind, _variant, functools.partial(_prepare, kind=_kind, variant=_variant))(_run)
