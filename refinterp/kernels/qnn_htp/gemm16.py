"""HTP Conv / DepthwiseConv / ConvTranspose / Gemm / MatMul with 16-bit activations and 8-bit weights
(the plan; gemm.py runs it): module docstring of gemm.py, "16-bit activations"."""
from __future__ import annotations

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_ops
from ..tflite.common import where
from .gemm_plan import HtpGemmPlan, htp_bias, ort_plan, symmetric_weights


def prepare16(node, ctx, kind: str, arch: str) -> HtpGemmPlan:
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
    strided_dw = kind == "DepthwiseConv" and any(int(v) != 1 for v in node.attrs.get("strides") or ())
    plan = ort_plan(node, ctx, kind, strided_dw)  # the stride-2 depthwise kernel adds the bias codes as they are
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    if strided_dw:
        return _dw_stride2_16(node, ctx, plan, ws, arch)
    rh = None
    if w.dtype == "uint8":  # re-quantized to symmetric int8 per channel as at 8 bits (htp_weights.py)
        if x.dtype == "int16":  # measured: the QNN EP leaves such a Conv unassigned
            raise UnsupportedOpError(f"{where(node)}: int16 activations with uint8 weights: the QNN EP does not "
                                     "take them onto the HTP")
        if ws.size != 1 or kind == "ConvTranspose":
            raise UnsupportedOpError(f"{where(node)}: uint8 weights with per-channel scales, or in a ConvTranspose: "
                                     "not characterised at 16 bits on the HTP")
        plan, ws, rh = symmetric_weights(node, plan, ws, kind)
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
        if rh is not None:
            _require_clear_of_ties(node, np.asarray(bias, np.float64) / rh, rh)
        bias = htp_bias(node, ctx, bias, ws, ws.size > 1 and rh is None)
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
        if bias is not None:  # re-derived in float32 on the model's weight scales, not truncated; over rh in units
            # of the re-quantized weights' accumulator
            w_scales = np.asarray(w.quant.scale, np.float32).ravel()
            bias = htp_bias(node, ctx, bias, w_scales, w_scales.size > 1, truncate=False)
            bias = bias if rh is None else bias / rh
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
    the 16-bit convolution rule misses 2-29% of the codes.  Refused: biases beyond 2^22 (measured there: an
    EfficientNet-B0 by get_qnn_qdq_config at uint16, 1-8 codes off per layer, all on channels whose bias passes
    2^22, not identified), M below 2^-16 (the shift passes 30: 6-309
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
    if np.any(np.abs(bias) > 2 ** 22):  # measured to 2^22; beyond, 1-8 codes of 3,840-24,576 off (EfficientNet-B0)
        raise UnsupportedOpError(f"{where(node)}: a 16-bit stride-2 depthwise Conv with biases up to "
                                 f"{int(np.abs(bias).max())}: characterised within 2^22 (beyond, an EfficientNet-B0 "
                                 "layer's codes near rounding ties differ), not beyond")
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

# v73, 16-bit, one-scale uint8 weights re-quantized (rh != 1): the bias's contribution trunc(b' / 256) follows
# trunc(f32(f32(b s_b) / f32(s_x s')) / 256) except where b / rh lies within about 1e-7 of its size of a multiple
# of 256: there the HTP's b' is another rounding of the quotient, not identified (measured: layers built with b / rh
# 0 .. 1 below multiples of 256 at 2^22 .. 2^24, 12 of 103 such channels off by one code step, every miss within
# 8.8e-8 relative; no float32 / float64 order of the products and quotients, nor the per-channel re-quantization of
# the bias vector, fits them all).  Refused within 2^-22 relative (and on exact multiples).
TIE_WINDOW = 2.0 ** -22

def _require_clear_of_ties(node, e: np.ndarray, rh: np.ndarray) -> None:
    near = (rh != 1.0) & (np.abs(e - 256 * np.round(e / 256)) <= np.abs(e) * TIE_WINDOW)
    if np.any(near):
        c = int(np.flatnonzero(near)[0])
        raise UnsupportedOpError(f"{where(node)}: v73 16-bit with re-quantized uint8 weights: channel {c}'s bias over "
                                 f"rh ({float(e[c]):.2f}) lies within {TIE_WINDOW:.2g} of its size of a multiple of "
                                 "256, where the HTP's bias rounding is not characterised")
