"""HTP Conv / DepthwiseConv / ConvTranspose / Gemm / MatMul with 8- and 16-bit activations, int8 weights.

The accumulator (zero points subtracted, int32 bias added) is exact, from the ONNX Runtime plan
(kernels/onnxruntime/gemm.py); the epilogue is the HTP's:

* ``htp_v68``: refinterp/quant/htp_ops.py ``conv_requant_v68`` (11-bit multiplier, output zero point
  folded into the accumulator, uint8 domain; int8 moved by 128); the bias codes as they are.
* ``htp_v73``: refinterp/quant/htp.py ``conv_requant`` (12-bit multiplier, the middle of the dropped
  bits, zero point after) with the bias re-derived by ``htp.conv_bias`` (per-tensor weights) or
  ``htp.conv_bias_per_channel`` (per-channel weights: the bias vector re-quantized as a whole; a bias
  scale other than s_x * s_w[c] is refused there, not measured).
* 16-bit activations (uint16 / int16 in and out, constant int8 weights; uint16 with one-scale uint8 weights
  re-quantized as below first, int16 with uint8 weights the QNN EP does not take): v73 ``htp.conv16_requant`` on
  g = (A >> 8) - round_half_up(Z / 256) + trunc(b / 256) (htp.py, "16-bit activations"); v68 the same g
  without the bias, plus the output zero point and the bias folded in accumulator units, times an
  11-bit multiplier (htp_ops.py, "v68 16-bit convolution"); an int16 depthwise Conv (the QNN EP does
  not take it) is refused; a uint16 one with stride 2 runs the 8-bit stride-2 depthwise kernel
  (``_dw_stride2_16``).
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

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_ops, htp_weights
from ..float import conv_transpose as float_tconv
from ..onnxruntime import gemm as ort_gemm
from ..tflite.common import where
from . import matmul_act
from .common import ARCHS, SIXTEEN_BIT, htp_kernel, require_8bit, shift_of


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
        return _prepare16(node, ctx, kind, arch)
    require_8bit(node, [x, y])
    if w is None or w.dtype not in ("int8", "uint8"):
        raise UnsupportedOpError(f"{where(node)}: weights of type {getattr(w, 'dtype', None)}: the HTP rules "
                                 "here are measured with 8-bit weights only")
    plan = ort_gemm.prepare_node(node, dataclasses.replace(ctx, settings={}), kind)
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
    depthwise = kind == "DepthwiseConv"
    strided = depthwise and any(int(v) != 1 for v in plan.fplan.strides or ())
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
        plan, ws, rh = _symmetric_weights(node, plan, ws, kind)
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
    if arch == "v73" and bias is not None and form == "conv":
        bias = _htp_bias(node, ctx, bias, ws, per_channel and rh is None)
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


def _htp_bias(node, ctx, bias: np.ndarray, ws: np.ndarray, per_channel: bool) -> np.ndarray:
    """The int32 bias the v73 HTP adds (htp.py): per-channel weights re-quantize the whole vector
    (``conv_bias_per_channel``, the bias scale s_x * s_w[c] only), per-tensor ones -- and one-scale
    layers the HTP re-quantized per channel (uint8 weights) -- truncate each code (``conv_bias``)."""
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
        return htp.conv_bias_per_channel(bias, xs, ws)
    if bs.size != 1:
        raise UnsupportedOpError(f"{where(node)}: a per-channel bias scale with per-tensor weights is not "
                                 "characterised on the HTP")
    return htp.conv_bias(bias, float(bs[0]), xs, ws if ws.size > 1 else ws[0])


def _prepare16(node, ctx, kind: str, arch: str) -> HtpGemmPlan:
    """16-bit activations with int8 weights (htp.py, "16-bit activations"; v68: htp_ops.py): one 16-bit type
    in and out, symmetric int8 weights; the plan's z holds Z (added to ORT's accumulator to give A), its
    bias the per-channel term -round_half_up(Z / 256) + trunc(b / 256), k / m / bound the 16-bit rule's."""
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if y.dtype != x.dtype:
        raise UnsupportedOpError(f"{where(node)}: input {x.dtype} and output {y.dtype}: the HTP's 16-bit "
                                 "convolution is characterised with one 16-bit type in and out")
    if w is None or w.dtype not in ("int8", "uint8") or w.const is None:
        raise UnsupportedOpError(f"{where(node)}: 16-bit activations are characterised with constant 8-bit "
                                 "weights only")
    if kind == "DepthwiseConv" and x.dtype == "int16":  # measured: the QNN EP leaves it unassigned
        raise UnsupportedOpError(f"{where(node)}: an int16 depthwise Conv: the QNN EP does not take it onto the HTP")
    plan = ort_gemm.prepare_node(node, dataclasses.replace(ctx, settings={}), kind)
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    if kind == "DepthwiseConv" and any(int(v) != 1 for v in plan.fplan.strides or ()):
        return _dw_stride2_16(node, ctx, plan, ws, arch)
    rh = None
    if w.dtype == "uint8":  # re-quantized to symmetric int8 per channel as at 8 bits (htp_weights.py)
        if x.dtype == "int16":  # measured: the QNN EP leaves such a Conv unassigned
            raise UnsupportedOpError(f"{where(node)}: int16 activations with uint8 weights: the QNN EP does not "
                                     "take them onto the HTP")
        if ws.size != 1 or kind == "ConvTranspose":
            raise UnsupportedOpError(f"{where(node)}: uint8 weights with per-channel scales, or in a ConvTranspose: "
                                     "not characterised at 16 bits on the HTP")
        plan, ws, rh = _symmetric_weights(node, plan, ws, kind)
    elif np.any(np.asarray(plan.zw) != 0):
        raise UnsupportedOpError(f"{where(node)}: int8 weights with a zero point: not characterised at 16 bits "
                                 "on the HTP")
    if plan.dtype == "float32":
        raise UnsupportedOpError(f"{where(node)}: a float output: not characterised at 16 bits on the HTP")
    wc = np.rint(plan.w).astype(np.int64)  # w - z_w (or the re-quantized w')
    axis = 1 if kind == "ConvTranspose" else 0 if kind in ("Conv", "DepthwiseConv") or plan.fplan.transB \
        else wc.ndim - 1
    wsum = np.moveaxis(wc, axis, 0).reshape(wc.shape[axis], -1).sum(1)  # every tap, padding included
    moved = 32768 if x.dtype == "uint16" else 0
    Z = (plan.zx - moved) * wsum
    bias = plan.bias
    term = -np.floor(Z / 256 + 0.5).astype(np.int64)
    phase_z = None
    if kind == "ConvTranspose":  # Z of the output's phase, not of every tap (_tconv_phase_z)
        phase_z = _tconv_phase_z(plan, wc, plan.zx - moved)
        Z, term = np.zeros_like(Z), np.zeros_like(term)
    if bias is not None and arch == "v73":
        bias = _htp_bias(node, ctx, bias, ws, ws.size > 1 and rh is None)
        term = term + np.trunc(np.asarray(bias, np.int64) / 256).astype(np.int64)
    if rh is not None:  # f32(M rh) per channel, from _symmetric_weights
        mult = np.asarray(plan.mult, np.float64).ravel()
    elif ws.size > 1:  # through the largest weight scale, as v68 (measured: 0 of 524,288 codes differ;
        # f32(f32(s_x s_w[c]) / s_y) misses 141 at 22 significant bits)
        mult = htp_ops.per_channel_multipliers(float(x.quant.scale[0]), ws, float(y.quant.scale[0]))
    else:
        mult = np.broadcast_to(np.asarray(plan.mult, np.float64).ravel(), wsum.shape)
    if arch == "v68":  # htp_ops.py, "v68 16-bit convolution": int16 computed as uint16 (codes moved by 32768)
        shift = 32768 if y.dtype == "int16" else 0
        m = np.array([htp_ops.conv16_multiplier_v68(float(M)) for M in mult], np.float64)
        if rh is not None and bias is not None:  # in units of the re-quantized weights' accumulator
            bias = np.asarray(bias, np.float64) / rh
        zy = htp_ops.folded_zero_point16(plan.zy + shift, np.asarray(mult, np.float64), bias)
        return HtpGemmPlan(plan, arch, term, np.zeros_like(m, np.int64), m, Z, shift, "a16_v68", zy_fold=zy,
                           phase_z=phase_z)
    params = [htp.conv16_requant_params(float(M)) for M in mult]
    k = np.array([p[0] for p in params], np.int64)
    mi = np.array([p[1] for p in params], np.int64)
    bound = np.array([htp.conv16_bound(float(M)) for M in mult], np.int64)
    return HtpGemmPlan(plan, arch, term, k, mi, Z, 0, "a16", bound, phase_z=phase_z)


def _dw_stride2_16(node, ctx, plan, ws: np.ndarray, arch: str) -> HtpGemmPlan:
    """A uint16 3x3 depthwise Conv with stride 2 runs the 8-bit stride-2 depthwise kernel on 16-bit codes
    (``htp_ops.dw_stride2_requant``: the exact accumulator plus the bias codes as they are plus the folded
    output zero point floor(f32(f32(zp_y / M) + 1/2)), times a 15-bit multiplier, one rounding; v68 and v73 alike;
    int8 weights per tensor or per channel, or one-scale uint8 weights as w - z_w, as at 8 bits).  Measured
    (tests/conformance/test_qnn_htp_ops.py ``test_a16_depthwise_stride_2`` and ``.._uint8_weights``): 0 codes off
    for M from 2^-16 to 1/2 while that sum stays within int32;
    the 16-bit convolution rule misses 2-29% of the codes.  Refused: M below 2^-16 (the shift passes 30: 6-309
    codes in 648 off), a folded offset that may pass 2^31 with the accumulator (every code off), 5x5 windows
    (a few codes of the left column off), other strides."""
    strides = [int(v) for v in plan.fplan.strides]
    kshape = [int(v) for v in plan.fplan.kernel_shape]
    if ctx.inputs[1].dtype not in ("int8", "uint8") or any(v != 2 for v in strides) or kshape != [3, 3]:
        raise UnsupportedOpError(f"{where(node)}: a 16-bit depthwise Conv {kshape[0]}x{kshape[-1]} with strides "
                                 f"{strides} and {ctx.inputs[1].dtype} weights: characterised on the HTP for 3x3, "
                                 "stride 2 and 8-bit weights only")
    if ctx.inputs[1].dtype == "int8" and np.any(np.asarray(plan.zw) != 0):
        raise UnsupportedOpError(f"{where(node)}: int8 weights with a zero point: not characterised at 16 bits")
    if ctx.inputs[1].dtype == "uint8" and ws.size != 1:  # measured: the QNN EP leaves such a node unassigned
        raise UnsupportedOpError(f"{where(node)}: uint8 weights with per-channel scales: the QNN EP does not take "
                                 "them onto the HTP")
    x, y = ctx.inputs[0], ctx.outputs[0]
    mult = htp_ops.per_channel_multipliers(float(x.quant.scale[0]), ws, float(y.quant.scale[0])) if ws.size > 1 \
        else np.broadcast_to(np.asarray(plan.mult, np.float64).ravel(), (np.asarray(plan.w).shape[0],))
    if np.any(mult >= 0.5) or np.any(mult < 2.0 ** -16):
        raise UnsupportedOpError(f"{where(node)}: a 16-bit stride-2 depthwise Conv with multipliers "
                                 f"{float(mult.min()):.4g} .. {float(mult.max()):.4g}: characterised from 2^-16 to "
                                 "1/2 only")
    f32 = np.float32  # Z = floor(f32(f32(z_y / M) + 1/2)): the half added in float32 (measured above 2^23, where
    # the quotient has no fraction left and the sum rounds to even: 1-2 codes in 1,024 off with the exact half)
    z = np.floor((f32(plan.zy) / np.asarray(mult, f32)).astype(f32) + f32(0.5)).astype(np.int64)
    bias = np.zeros_like(z) if plan.bias is None else np.asarray(plan.bias, np.int64)
    reach = np.abs(np.rint(plan.w)).reshape(len(z), -1).sum(1) * 65535  # the largest |accumulator|
    if np.any(np.abs(z + bias) + reach >= 2 ** 31):
        raise UnsupportedOpError(f"{where(node)}: a 16-bit stride-2 depthwise Conv whose folded output zero point "
                                 "and bias may pass int32 with the accumulator (the HTP then computes every code "
                                 "otherwise, not characterised)")
    params = [htp_ops.dw_stride2_params(float(M)) for M in mult]
    k = np.array([q[0] for q in params], np.int64)
    m = np.array([q[1] for q in params], np.float64)
    return HtpGemmPlan(plan, arch, plan.bias, k, m, z, 0, "dw_s2")


def _tconv_phase_z(plan, wc: np.ndarray, zx_moved: int) -> np.ndarray:
    """(M, s_h, s_w): the HTP runs a strided ConvTranspose as one convolution per output phase (full-result
    position u mod s), whose taps are those k = u (mod s); its Z is (z_x - moved) times their weight sum.
    Measured at 16 bits (v68 and v73, uint16 and int16): 0 codes off, while Z over the taps that reach each
    output misses 1-27 codes in 600-5,400 and Z over every tap (stride 1 only) up to 296 in 2,400."""
    s = [int(v) for v in (plan.fplan.strides or (1, 1))]
    out = np.zeros((wc.shape[1], s[0], s[1]), np.int64)
    for py in range(s[0]):
        for px in range(s[1]):
            out[:, py, px] = zx_moved * wc[:, :, py::s[0], px::s[1]].sum((0, 2, 3))
    return out


def _symmetric_weights(node, plan, ws: np.ndarray, kind: str):
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
