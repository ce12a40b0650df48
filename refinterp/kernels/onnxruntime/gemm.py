"""ONNX Runtime CPU integer Conv / DepthwiseConv / MatMul / Gemm (QLinearConv, QLinearMatMul, QGemm
and their QDQ fusions) plus ConvInteger / MatMulInteger; variants ``ort`` and ``onnx_ref``.

Numeric contract:

    acc[.., c] = sum (x - zx) * (w - zw[c]) + bias[c]    exact (int32 in the C++; float64 BLAS on
                                                          integer values here, exact below 2^53)
    y = requant(acc, mult[c], zy)                          refinterp/quant/mlas.py

* ``mult`` = f32(f32(xs * ws[c]) / ys) (QLinearConv, QLinearMatMul, onnx.reference) or
  f32(f32(f32(alpha * as) * bs[c]) / ys) (QGemm); QGemm without y_scale outputs
  f32(acc) * f32(f32(alpha * as) * bs[c]) as float32.
* ``impl`` (scheme): ``mlas_f32`` (default; f32(acc) * mult, RNE, zp after rounding),
  ``onnx_ref_f64`` (float64 product, zp before rounding), ``fixed_point_rndnu`` (ORT ARM64 option),
  ``mlas_f32_u8s8_sat16`` (AVX2 without VNNI: raw u8 x s8 products summed in pairs into a
  saturating int16 before the int32 sum; documented, not verified here).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from refinterp.errors import ModelError, UnsupportedOpError
from refinterp.quant import mlas
from refinterp.settings import fast_kernels
from ..float import conv as float_conv
from ..float import conv_transpose as float_tconv
from ..tflite.common import where
from .common import ort_kernel
from ..spatial import (from_channels_last, ints, pad_channels_last, resolve_window, to_channels_last,
                       window_offsets)
from .conv_fast import fast_ort_conv
from .gemm_fast import fast_ort_gemm
from ..registry import kernel

_FAST = fast_kernels()
VARIANTS = ("ort", "onnx_ref")
CONV_KINDS = ("Conv", "DepthwiseConv", "ConvTranspose")  # bias per channel on the channel axis
IMPLS = ("mlas_f32", "onnx_ref_f64", "fixed_point_rndnu", "mlas_f32_u8s8_sat16")


@dataclass(frozen=True)
class QGemmPlan:
    node: str
    kind: str  # Conv | DepthwiseConv | MatMul | Gemm
    fplan: Any
    zx: int
    zw: np.ndarray  # broadcast against the filter / B
    w: np.ndarray | None  # float64 (w - zw) when constant
    w_raw: np.ndarray | None
    bias: np.ndarray | None  # int64, per output channel
    mult: np.ndarray  # float32, per output channel (or scalar)
    zy: int
    lo: int
    hi: int
    dtype: str  # output storage dtype ("float32" for QGemm without y_scale)
    impl: str
    chan_axis: int  # output axis holding the channels


def _q(ctx, i: int, what: str):
    t = ctx.inputs[i] if i < len(ctx.inputs) else None
    if t is None or t.quant is None:
        raise ModelError(f"{where(ctx.node)}: {what} has no quantization parameters")
    return t


def _impl(ctx) -> str:
    v = (ctx.settings or {}).get("impl", "mlas_f32")
    if v not in IMPLS:
        raise UnsupportedOpError(f"{where(ctx.node)}: impl '{v}' is not one of {', '.join(IMPLS)}")
    return v


@dataclass(frozen=True)
class EngineGemmPlan:
    """ORT's integer GEMM (accumulators, zero points, output range) with another engine's epilogue:
    the torch and documented backends reuse ``prepare_node`` and change only the requantization."""

    gemm: Any  # this module's plan (its bias handed to the epilogue or removed)
    requant: Mapping[str, Any]  # the engine's requantization constants
    engine: str


@dataclass(frozen=True)
class GemmTranspose:
    transA: int
    transB: int


def prepare_node(node, ctx, kind: str):
    x, w = _q(ctx, 0, "input"), _q(ctx, 1, "weight")
    out = ctx.outputs[0]
    layout = node.attrs.get("layout") or "NCHW"
    wshape = tuple(w.const.shape) if w.const is not None else tuple(w.shape)
    if kind in ("Conv", "DepthwiseConv"):
        n_out = wshape[0] if (node.attrs.get("weight_layout") or "OIHW") != "1HWO" else wshape[-1]
        fplan = float_conv.prepare_node(node, ctx, depthwise=kind == "DepthwiseConv")
        chan_axis = -1 if layout == "NHWC" else 1
    elif kind == "ConvTranspose":  # no ORT kernel: the accumulator for other engines (the HTP's), ONNX layout
        if layout != "NCHW" or (node.attrs.get("weight_layout") or "OIHW") != "OIHW":
            raise UnsupportedOpError(f"{where(node)}: a quantized ConvTranspose is supported in ONNX layout only")
        fplan = float_tconv.prepare_node(node, ctx)
        n_out, chan_axis = wshape[1] * fplan.group, 1
    else:
        trans_b = kind == "Gemm" and int(node.attrs.get("transB", 0))
        n_out = wshape[0] if trans_b else wshape[-1]
        fplan = GemmTranspose(int(node.attrs.get("transA", 0)), int(trans_b))
        chan_axis = -1
    ws = np.asarray(w.quant.scale, np.float32).ravel()
    ws = np.repeat(ws, n_out) if ws.size == 1 else ws
    xs = np.float32(x.quant.scale[0])
    if kind == "Gemm":
        base = (np.float32(node.attrs.get("alpha", 1.0)) * xs * ws).astype(np.float32)
    else:
        base = (xs * ws).astype(np.float32)
    zw = w.quant.broadcast(wshape)[1]
    bt = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    bias = None
    if bt is not None:
        if bt.const is None:
            raise ModelError(f"{where(node)}: a computed int32 bias is not supported")
        bias = bt.const.astype(np.int64)
        bias = bias.reshape(-1) if kind in CONV_KINDS else bias
    if out.quant is None or np.dtype(out.dtype).kind == "f":
        mult, zy, lo, hi, dtype = base, 0, 0, 0, "float32"
    else:
        mult = (base / np.float32(out.quant.scale[0])).astype(np.float32)
        info = np.iinfo(np.dtype(out.dtype))
        zy, lo, hi, dtype = int(out.quant.zero_point[0]), int(info.min), int(info.max), out.dtype
    wc = None if w.const is None else w.const.astype(np.float64) - zw
    return QGemmPlan(node.name, kind, fplan, int(x.quant.zero_point[0]), zw, wc, w.const, bias, mult,
                     zy, lo, hi, dtype, _impl(ctx), chan_axis)


def _finish(plan: QGemmPlan, acc: np.ndarray) -> np.ndarray:
    acc = np.asarray(acc).astype(np.int64)
    view = [1] * acc.ndim
    view[plan.chan_axis] = -1
    if plan.bias is not None:  # Conv: per output channel; QGemm C: broadcast against (M, N)
        acc = acc + (plan.bias.reshape(view) if plan.kind in CONV_KINDS else plan.bias)
    mult = plan.mult.reshape(view) if plan.mult.size > 1 else plan.mult.reshape(())
    if plan.dtype == "float32":
        return (acc.astype(np.float32) * mult).astype(np.float32)
    impl = "mlas_f32" if plan.impl == "mlas_f32_u8s8_sat16" else plan.impl
    return mlas.REQUANT[impl](acc, mult, plan.zy, plan.lo, plan.hi).astype(plan.dtype)


def _wq(plan: QGemmPlan, w) -> np.ndarray:
    return plan.w if plan.w is not None else np.asarray(w).astype(np.float64) - plan.zw


def _sat16(plan: QGemmPlan, x, w) -> bool:
    return (plan.impl == "mlas_f32_u8s8_sat16" and np.asarray(x).dtype == np.uint8
            and np.asarray(w).dtype == np.int8)


def tconv_acc(plan: QGemmPlan, x, w) -> np.ndarray:
    """ConvTranspose: sum (x - zx) * (w - zw) over the taps reaching each output, exact (float64 on
    integer values, |acc| < 2^53)."""
    xf = np.asarray(x).astype(np.float64) - plan.zx
    return np.rint(float_tconv.conv_transpose(plan.fplan, xf, _wq(plan, w)))


def conv_acc(plan: QGemmPlan, x, w) -> np.ndarray:
    if _sat16(plan, x, w) and plan.kind == "Conv" and plan.fplan.group == 1:
        return _conv_sat16(plan, np.asarray(x), np.asarray(w))
    xf = np.asarray(x).astype(np.float64) - plan.zx
    return float_conv.run_plan(plan.fplan, xf, _wq(plan, w), None)


def _conv_sat16(plan: QGemmPlan, x, w) -> np.ndarray:
    """im2col with K ordered (kh, kw, cin), cin fastest, input padded with its zero point."""
    fp = plan.fplan
    xc = to_channels_last(x, fp.layout).astype(np.int64)
    wk = float_conv.internal_weights(np.asarray(w).astype(np.int64), fp.weight_layout, 1, x.ndim - 2, fp.name)
    nsp = x.ndim - 2
    win = resolve_window(xc.shape[1:-1], wk.shape[:nsp], ints(fp.strides, nsp, 1), ints(fp.dilations, nsp, 1),
                         fp.pads, fp.auto_pad, where=fp.name)
    xp = pad_channels_last(xc, win, value=plan.zx)
    cols = np.stack([xp[(slice(None),) + sl] for _, sl in window_offsets(win)], axis=-2)  # (N,*O,KK,C)
    a = cols.reshape(-1, cols.shape[-2] * cols.shape[-1])
    b = wk.reshape(-1, wk.shape[-1])  # (KK*C, M) with the same (cell, cin) order
    acc = _corrected(mlas.u8s8_pair_sat16(a, b), a, b, plan.zx, int(plan.zw.ravel()[0]))
    return from_channels_last(acc.reshape(cols.shape[:-2] + (b.shape[1],)), fp.layout)


def _corrected(raw, a, b, za: int, zb: int) -> np.ndarray:
    """MLAS zero-point correction of a raw-value product (qgemm.h): exact in int32."""
    k = a.shape[1]
    return raw - za * b.sum(axis=0)[None, :] - zb * a.sum(axis=1)[:, None] + k * za * zb


@ort_kernel("Conv", VARIANTS, lambda n, c: prepare_node(n, c, "Conv"), IMPLS)
def ort_conv(plan: QGemmPlan, x, w, b=None):
    y = fast_ort_conv(plan, x) if _FAST else None  # None: not covered, the NumPy path below
    if y is not None:
        return y
    return _finish(plan, conv_acc(plan, x, w))


@ort_kernel("DepthwiseConv", VARIANTS, lambda n, c: prepare_node(n, c, "DepthwiseConv"), IMPLS)
def ort_depthwise(plan: QGemmPlan, x, w, b=None):
    # MLAS depthwise kernels (MlasConvDepthwise, ConvSym depthwise) accumulate in exact int32.
    y = fast_ort_conv(plan, x) if _FAST else None
    if y is not None:
        return y
    return _finish(plan, conv_acc(plan, x, w))


def mm_acc(plan: QGemmPlan, a, w) -> np.ndarray:
    if plan.fplan.transA:
        a = np.asarray(a).T
    wq = _wq(plan, w)
    if plan.fplan.transB:
        wq, w = wq.T, np.asarray(w).T
    if _sat16(plan, a, w) and np.asarray(a).ndim == 2:
        a2 = np.asarray(a).astype(np.int64)
        return _corrected(mlas.u8s8_pair_sat16(a2, np.asarray(w)), a2, np.asarray(w).astype(np.int64),
                          plan.zx, int(np.asarray(plan.zw).ravel()[0]))
    return np.matmul(np.asarray(a).astype(np.float64) - plan.zx, wq)


@ort_kernel("MatMul", VARIANTS, lambda n, c: prepare_node(n, c, "MatMul"), IMPLS)
def ort_matmul(plan: QGemmPlan, a, b):
    y = fast_ort_gemm(plan, a) if _FAST else None  # None: not covered, the NumPy path below
    if y is not None:
        return y
    return _finish(plan, mm_acc(plan, a, b))


@ort_kernel("Gemm", VARIANTS, lambda n, c: prepare_node(n, c, "Gemm"), IMPLS)
def ort_gemm(plan: QGemmPlan, a, b, c=None):
    """QGemm: C is an int32 matrix/vector already in the accumulator scale (accumulate mode)."""
    y = fast_ort_gemm(plan, a, c) if _FAST else None
    if y is not None:
        return y
    acc = mm_acc(plan, a, b).astype(np.int64)
    if c is not None and plan.bias is None:
        acc = acc + np.asarray(c).astype(np.int64)
    return _finish(plan, acc)


# -- ConvInteger / MatMulInteger: exact int32 (ORT and onnx.reference agree) --------------------------

def _zp(v, default=0):
    return np.asarray(default if v is None else v).astype(np.int64)


def _prepare_convint(node, ctx):
    return float_conv.prepare_node(node, ctx, depthwise=False)


@kernel("ConvInteger", VARIANTS + ("float",), prepare=_prepare_convint, raw_inputs=True)
def conv_integer(plan, x, w, x_zp=None, w_zp=None):
    """y = conv(x - x_zp, w - w_zp[m]) in int32; w_zp scalar or per output channel (axis 0)."""
    wz = _zp(w_zp)
    wz = wz.reshape((-1,) + (1,) * (np.asarray(w).ndim - 1)) if wz.size > 1 else wz.reshape(())
    xf = np.asarray(x).astype(np.float64) - float(_zp(x_zp).ravel()[0])
    wf = np.asarray(w).astype(np.float64) - wz
    return float_conv.run_plan(plan, xf, wf, None).astype(np.int64).astype(np.int32)


@kernel("MatMulInteger", VARIANTS + ("float",), raw_inputs=True)
def matmul_integer(plan, a, b, a_zp=None, b_zp=None):
    """y = (a - a_zp) @ (b - b_zp) in int32; a_zp scalar or per row, b_zp scalar or per column."""
    az, bz = _zp(a_zp), _zp(b_zp)
    af = np.asarray(a).astype(np.int64) - (az.reshape(-1, 1) if az.size > 1 else az.reshape(()))
    bf = np.asarray(b).astype(np.int64) - (bz.reshape(-1) if bz.size > 1 else bz.reshape(()))
    return np.matmul(af.astype(np.float64), bf.astype(np.float64)).astype(np.int64).astype(np.int32)
