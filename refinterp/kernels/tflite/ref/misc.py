"""TFLite integer QUANTIZE, DEQUANTIZE, RESIZE (bilinear / nearest) and L2_NORMALIZATION
(LiteRT reference kernels ``quantize.h``, ``requantize.h``, ``dequantize.h``,
``resize_bilinear.h: ResizeBilinearInteger``, ``resize_nearest_neighbor.h``,
``integer_ops/l2normalization.h``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import gemmlowp
from refinterp.quant.fixedpoint import quantize_multiplier, round_half_away, trunc_div, wrap_int32
from ..common import check_dtype, impl, mbqm, qparams, qrange, rounding, where
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

_I64 = np.int64
_F = np.float32


# --- QUANTIZE ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuantizePlan:
    float: bool  # float32 input (else integer requantization)
    zo: int
    dtype: str
    scale: np.float32 | None = None  # float input: the output scale
    zx: int = 0
    multiplier: int = 0
    shift: int = 0
    rounding: str = ""
    # tflite_opt: float inputs in blocks of 8 multiplied by the reciprocal (``reciprocal``), the
    # conversions saturating or not; 8-bit requantization in blocks (``requant_blocks``)
    opt_blocks: bool = False
    reciprocal: np.float32 | None = None
    saturating: bool = False
    requant_blocks: int = 0


@dataclass(frozen=True)
class DequantizePlan:
    f16: bool
    quant: Any = None
    # tflite_opt: blocks of 8 as float32 q * s + (-z * s), one multiply-add (``fma``) or two roundings
    opt_blocks: bool = False
    scale: np.float32 | None = None
    zero_times_scale: np.float32 | None = None
    fma: bool = False


@dataclass(frozen=True)
class ResizePlan:
    mode: str  # nearest | linear
    align: bool
    half: bool
    size: tuple[int, int]
    dtype: str
    fixed_16_16: bool = False  # tflite_opt nearest, 8-bit: 16.16 fixed-point source indices
    optimized: bool = False  # tflite_opt bilinear uint8 (ResizeBilinearGenericSmallChannel)
    q11: bool = False  # XNNPACK: Q11 fractions


@dataclass(frozen=True)
class L2NormPlan:
    zx: int
    rounding: str


def prepare_quantize(node, ctx) -> QuantizePlan:
    """float32 -> int: clamp(int32(roundf(x / (float)s)) + zp); the float->int32 conversion of an
    out-of-range or NaN value gives INT32_MIN (x86 cvttss2si) and the zero point add wraps.
    int -> int: clamp(MBQM(q - zx, QuantizeMultiplier(double(sx)/double(so))) + zo) (int32 outputs:
    the int32 range, |MBQM| < 2^31 for 16-bit inputs)."""
    out = ctx.outputs[0]
    # int32 outputs: LiteRT requantizes int16 -> int32 (keyword-spotting models end with one)
    int_in = ctx.inputs[0].dtype != "float32"
    odt = check_dtype(out, node, ("int8", "uint8", "int16", "int32") if int_in else ("int8", "uint8", "int16"))
    if out.quant is None or out.quant.scale.size != 1:
        raise UnsupportedOpError(f"{where(node)}: per-channel QUANTIZE output is not supported")
    so, zo = qparams(out, node, "output")
    idt = ctx.inputs[0].dtype
    if idt == "float32":
        return QuantizePlan(True, zo, odt, scale=so)
    check_dtype(ctx.inputs[0], node, ("int8", "uint8", "int16", "int32"))
    sx, zx = qparams(ctx.inputs[0], node, "input")
    M, s = quantize_multiplier(float(sx) / float(so))
    return QuantizePlan(False, zo, odt, zx=zx, multiplier=M, shift=s, rounding=rounding(ctx).value)


# float32 -> int: ``divide`` (LiteRT 2.3: round_half_away(f / s)); ``reciprocal_saturating``
# (tflite-runtime 2.14 on aarch64: round_half_away(float32(f * float32(1 / s))), saturating conversion)
REF_QUANTIZE_IMPLS = ("divide", "reciprocal_saturating")


def _prepare_quantize_ref(node, ctx) -> QuantizePlan:
    p = prepare_quantize(node, ctx)
    if p.float and impl(ctx, REF_QUANTIZE_IMPLS, "divide") == "reciprocal_saturating":
        p = QuantizePlan(True, p.zo, p.dtype, scale=p.scale, reciprocal=np.float32(np.float32(1.0) / p.scale),
                         saturating=True)
    return p


@kernel("Quantize", "tflite_ref", prepare=_prepare_quantize_ref, impls=REF_QUANTIZE_IMPLS)
def quantize(p, x):
    lo, hi = qrange(p.dtype)
    if p.float and p.reciprocal is not None and not p.opt_blocks:
        with np.errstate(invalid="ignore", over="ignore"):
            r = round_half_away((np.asarray(x, _F) * p.reciprocal).astype(_F)).astype(np.float64)
        # aarch64 fcvt: saturates to the int32 range, NaN -> 0
        q = np.clip(np.nan_to_num(r, nan=0.0), -(2.0 ** 31), 2.0 ** 31 - 1).astype(_I64)
        return np.clip(wrap_int32(q + p.zo), lo, hi).astype(p.dtype)
    if p.float:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = round_half_away((np.asarray(x, _F) / p.scale).astype(_F)).astype(np.float64)
        ok = np.isfinite(r) & (np.abs(r) < 2.0 ** 31)
        q = np.where(ok, np.where(ok, r, 0).astype(_I64), -(1 << 31))
        return np.clip(wrap_int32(q + p.zo), lo, hi).astype(p.dtype)
    y = mbqm(x.astype(_I64) - p.zx, p.multiplier, p.shift, p.rounding) + p.zo
    return np.clip(y, lo, hi).astype(p.dtype)


# --- DEQUANTIZE -------------------------------------------------------------------------------

def prepare_dequantize(node, ctx):
    """int -> float32(double(s) * (q - zp)) per tensor; per channel float32(float s[c] * (q - zp[c]))
    evaluated in double then rounded once (the C++ promotes the float scale with the int).
    float16 -> float32 is exact."""
    t = ctx.inputs[0]
    if t.dtype == "float16":
        return DequantizePlan(True)
    check_dtype(t, node, ("int8", "uint8", "int16", "int32"))
    if t.quant is None:
        raise UnsupportedOpError(f"{where(node)}: DEQUANTIZE input '{t.name}' has no quantization")
    return DequantizePlan(False, t.quant)


@kernel("Dequantize", "tflite_ref", prepare=prepare_dequantize)
def dequantize(p, x):
    if p.f16:
        return np.asarray(x).astype(np.float32)
    s, z = p.quant.broadcast(x.shape)
    return (np.asarray(s, np.float64) * (x.astype(_I64) - z)).astype(np.float32)


# --- RESIZE -----------------------------------------------------------------------------------

def prepare_resize(node, ctx):
    a = node.attrs
    mode = a.get("mode", "nearest")
    dt = check_dtype(ctx.inputs[0], node, ("int8", "uint8", "int16", "int32") if mode == "nearest"
                     else ("int8", "uint8", "int16"))
    if a.get("layout", "NHWC") != "NHWC":
        raise UnsupportedOpError(f"{where(node)}: the TFLite integer resize needs NHWC layout")
    size = ctx.const(3) if len(ctx.inputs) > 3 else None
    out_shape = ctx.outputs[0].shape
    if size is None and (out_shape is None or None in out_shape[1:3]):
        raise UnsupportedOpError(f"{where(node)}: resize with a computed size is not supported")
    if size is not None:
        size = [int(v) for v in np.asarray(size).ravel()[-2:]]
    else:
        size = [int(out_shape[1]), int(out_shape[2])]
    return ResizePlan(mode, bool(a.get("align_corners", False)), bool(a.get("half_pixel_centers", False)),
                      tuple(size), dt)


def _bilinear_coords(n_out: int, n_in: int, align: bool, half: bool):
    """``ComputeInterpolationValuesInteger``: Q10 source position, lower and upper index."""
    sc = (1024 * n_in + n_out // 2) // n_out
    if align and n_out > 1:
        sc = (1024 * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    o = np.arange(n_out, dtype=_I64)
    v = o * sc + sc // 2 - 512 if half else o * sc
    lo = np.maximum(trunc_div(v, 1024), 0)
    hi = np.minimum(trunc_div(v + 1023, 1024), n_in - 1)
    return v, lo, hi


def _nearest_index(n_out: int, n_in: int, align: bool, half: bool) -> np.ndarray:
    """``GetNearestNeighbor`` in float32."""
    sc = _F(_F(n_in - 1) / _F(n_out - 1)) if align and n_out > 1 else _F(_F(n_in) / _F(n_out))
    pos = (np.arange(n_out, dtype=_F) + _F(0.5 if half else 0.0)).astype(_F) * sc
    idx = round_half_away(pos) if align else np.floor(pos)
    idx = np.minimum(idx.astype(_I64), n_in - 1)
    return np.maximum(idx, 0) if half else idx


def _float_coords(n_out: int, n_in: int, align: bool, half: bool):
    """float32 ``ComputeInterpolationValues``: (d = position - lower, lower, upper), per output index."""
    sc = _F(_F(n_in - 1) / _F(n_out - 1)) if align and n_out > 1 else _F(_F(n_in) / _F(n_out))
    o = np.arange(n_out, dtype=_F)
    v = ((o + _F(0.5)) * sc - _F(0.5)).astype(_F) if half else (o * sc).astype(_F)
    lo = np.maximum(np.floor(v).astype(_I64), 0)
    hi = np.minimum(np.ceil(v).astype(_I64), n_in - 1)
    return (v - lo.astype(_F)).astype(_F), lo, hi


def resize_bilinear_uint8(x, oh: int, ow: int, align: bool, half: bool, optimized: bool) -> np.ndarray:
    """uint8 RESIZE_BILINEAR: LiteRT runs it in float32, not in fixed point.

    Reference (``reference_ops::ResizeBilinear<uint8_t>``), every step one float32 rounding:
    ``v = ((a*(1-dy))*(1-dx) + (b*dy)*(1-dx)) + (c*(1-dy))*dx) + (d*dy)*dx`` with a, b, c, d the
    (y0,x0), (y1,x0), (y0,x1), (y1,x1) neighbours; out = floor(v + 0.5) (v + 0.5 is exact below 256).
    Optimized (``ResizeBilinearGenericSmallChannel<uint8>``): weights w00 = (1-dy)*(1-dx),
    w01 = (1-dy)*dx, w10 = dy*(1-dx), w11 = dy*dx, ``v = ((a*w00 + c*w01) + b*w10) + d*w11 + 0.5``,
    truncated.  Its x8 half-pixel special case (``ResizeBilinear888Uint8``, 8.8 fixed point with +0.5)
    computes the same values: every weight is a multiple of 1/256 there, so both are exact."""
    fy, y0, y1 = _float_coords(oh, x.shape[1], align, half)
    fx, x0, x1 = _float_coords(ow, x.shape[2], align, half)
    q = x.astype(_F)
    a, b = q[:, y0][:, :, x0], q[:, y1][:, :, x0]
    c, d = q[:, y0][:, :, x1], q[:, y1][:, :, x1]
    dy = fy[None, :, None, None]
    dx = fx[None, None, :, None]
    one = _F(1)
    if optimized:
        w00, w01 = ((one - dy) * (one - dx)).astype(_F), ((one - dy) * dx).astype(_F)
        w10, w11 = (dy * (one - dx)).astype(_F), (dy * dx).astype(_F)
        v = (a * w00).astype(_F) + (c * w01).astype(_F)
        v = (v.astype(_F) + (b * w10).astype(_F)).astype(_F)
        v = (v + (d * w11).astype(_F)).astype(_F)
    else:
        v = ((a * (one - dy)).astype(_F) * (one - dx)).astype(_F) + ((b * dy).astype(_F) * (one - dx)).astype(_F)
        v = (v.astype(_F) + ((c * (one - dy)).astype(_F) * dx).astype(_F)).astype(_F)
        v = (v + ((d * dy).astype(_F) * dx).astype(_F)).astype(_F)
    out = np.floor((v + _F(0.5)).astype(_F))
    return np.clip(out, 0, 255).astype(np.uint8)


@kernel("Resize", "tflite_ref", prepare=prepare_resize)
def resize(p, x, roi=None, scales=None, sizes=None):
    if x.ndim != 4:
        raise UnsupportedOpError(f"TFLite integer resize needs a 4-D NHWC input, got shape {x.shape}")
    oh, ow = p.size
    _, ih, iw, _ = x.shape
    if p.mode == "nearest":
        iy = _nearest_index(oh, ih, p.align, p.half)
        ix = _nearest_index(ow, iw, p.align, p.half)
        return x[:, iy][:, :, ix].astype(p.dtype)
    if p.dtype == "uint8":
        return resize_bilinear_uint8(x, oh, ow, p.align, p.half, bool(p.optimized))
    vy, y0, y1 = _bilinear_coords(oh, ih, p.align, p.half)
    vx, x0, x1 = _bilinear_coords(ow, iw, p.align, p.half)
    dy = (vy - 1024 * y0)[None, :, None, None]
    dx = (vx - 1024 * x0)[None, None, :, None]
    q = x.astype(_I64)
    acc = (q[:, y0][:, :, x0] * (1024 - dy) * (1024 - dx) + q[:, y1][:, :, x0] * dy * (1024 - dx)
           + q[:, y0][:, :, x1] * (1024 - dy) * dx + q[:, y1][:, :, x1] * dy * dx)
    out = trunc_div(acc + np.where(acc > 0, 1 << 19, -(1 << 19)), 1 << 20)
    return out.astype(p.dtype)  # the C++ casts without clamping


# --- L2_NORMALIZATION -------------------------------------------------------------------------

def _prepare_l2norm(node, ctx):
    """int8 only: acc = sum (q - zx)^2 over the last axis; (M, s) = GetInvSqrtQuantizedMultiplierExp(acc, -1);
    out = clamp(MBQM(q - zx, M, s + 7)) (output scale 1/128, zero point 0)."""
    check_dtype(ctx.inputs[0], node, ("int8",))
    _, zx = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    if float(so) != 1.0 / 128 or zo != 0:
        raise UnsupportedOpError(f"{where(node)}: int8 L2_NORMALIZATION needs output scale 1/128, zp 0")
    if int(node.attrs.get("axis", -1)) not in (-1, len(ctx.inputs[0].shape or (0,)) - 1):
        raise UnsupportedOpError(f"{where(node)}: L2 normalisation over a non-last axis")
    return L2NormPlan(zx, rounding(ctx).value)


@kernel("L2Normalization", "tflite_ref", prepare=_prepare_l2norm)
def _l2norm(p, x):
    v = x.astype(_I64) - p.zx
    acc = wrap_int32((v * v).sum(axis=-1, keepdims=True))
    M, s = gemmlowp.inv_sqrt_multiplier_exp(acc, -1)
    return np.clip(mbqm(v, M, s + 7, p.rounding), -128, 127).astype(np.int8)
