"""LiteRT optimized kernels (variant ``tflite_opt``, ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` on x86-64)
where they differ from the reference kernels: QUANTIZE float -> int, DEQUANTIZE, SOFTMAX (8-bit
input) and RESIZE_NEAREST_NEIGHBOR (8-bit, no align_corners / half_pixel_centers).  Every other
case delegates to the ``tflite_ref`` prepare/run of the same op (the optimized kernel calls the
reference code there).

Source: LiteRT ``tflite/kernels/internal/optimized/optimized_ops.h`` (``AffineQuantize``,
``Dequantize``, ``PopulateSoftmaxLookupTable`` + ``Softmax<In, Out>``, ``ResizeNearestNeighbor``),
``tflite/kernels/{quantize,dequantize,activations,resize_nearest_neighbor}.cc``.  The x86 wheel is
built with NEON_2_SSE, so the ``USE_NEON`` blocks run: they process the flattened tensor in blocks
of 8 elements; the ``n mod 8`` tail runs the scalar loop.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from refinterp.quant import lut
from refinterp.quant.fixedpoint import round_half_away, wrap_int32
from refinterp.quant.fixedpoint import quantize_multiplier
from refinterp.quant.requant import mbqm_double, mbqm_upward
from refinterp.settings import fast_kernels
from ..ref import misc as ref_misc
from ..ref import softmax as ref_softmax
from ..ref.softmax_fast import fast_softmax
from ..common import check_dtype, impl, qparams, qrange
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_opt"
_F = np.float32
_I64 = np.int64
BLOCK = 8
REQUANT_BLOCK = 16
_FAST = fast_kernels()


# ``impl`` values (x86 build first; the others are the ARM / other-build forms)
QUANTIZE_IMPLS = ("x86_convert", "saturating_convert")
DEQUANTIZE_IMPLS = ("mul_add", "fma")
SOFTMAX_IMPLS = ("float_lut", "uint16_lut")


def _block_mask(n: int) -> np.ndarray:
    """True for flat indices handled by the 8-wide vector loop."""
    return np.arange(n) < BLOCK * (n // BLOCK)


def _to_int32(r: np.ndarray, saturating: bool = False) -> np.ndarray:
    """float -> int32 as x86 converts it (cvtps2dq / cvttsd2si, also NEON_2_SSE's
    ``vcvtnq_s32_f32``): out-of-range and NaN give INT32_MIN, in either direction.
    ``saturating`` (aarch64 fcvtns / fcvtzs): clamp to the int32 range, NaN -> 0."""
    r = np.asarray(r, np.float64)
    if saturating:
        return np.clip(np.nan_to_num(r, nan=0.0, posinf=2.0 ** 31, neginf=-2.0 ** 31),
                       -2.0 ** 31, 2.0 ** 31 - 1).astype(_I64)
    ok = np.isfinite(r) & (r >= -2.0 ** 31) & (r < 2.0 ** 31)
    return np.where(ok, np.where(ok, r, 0).astype(_I64), -(1 << 31))


# --- QUANTIZE ---------------------------------------------------------------------------------

def prepare_quantize(node, ctx):
    """float32 -> int8/uint8/int16, per tensor: blocks q = clamp(wrap(rint(f * float32(1/double(s)))
    + zp)); tail q = clamp(wrap(int32(round_half_away(double(f) / double(s))) + zp)).
    8-bit -> 8-bit requantize (``Requantize<int8/uint8, int8/uint8>``): blocks of 16 use
    ``MultiplyByQuantizedMultiplier4Rows`` (SRDHM then a half-up rounding shift, "upward"), the
    tail the reference MultiplyByQuantizedMultiplier; other requantizations are the reference.
    ``impl``: ``x86_convert`` (default; out-of-range floats become INT32_MIN before the zero point
    is added) or ``saturating_convert`` (aarch64: the conversions saturate; documented, not run)."""
    p = ref_misc.prepare_quantize(node, ctx)
    if p.float:
        how = impl(ctx, QUANTIZE_IMPLS, "x86_convert")
        p = replace(p, opt_blocks=True, reciprocal=_F(1.0 / float(p.scale)),
                 saturating=how == "saturating_convert")
    elif ctx.inputs[0].dtype in ("int8", "uint8") and p.dtype in ("int8", "uint8"):
        p = replace(p, requant_blocks=REQUANT_BLOCK)
    return p


@kernel("Quantize", VARIANT, prepare=prepare_quantize, impls=QUANTIZE_IMPLS)
def quantize(p, x):
    if p.requant_blocks:
        ref = ref_misc.quantize(p, x)
        lo, hi = qrange(p.dtype)
        up = np.clip(mbqm_upward(x.astype(_I64) - p.zx, p.multiplier, p.shift) + p.zo, lo, hi)
        n = ref.size
        mask = (np.arange(n) < REQUANT_BLOCK * (n // REQUANT_BLOCK)).reshape(ref.shape)
        return np.where(mask, up, ref).astype(p.dtype)
    if not p.opt_blocks:
        return ref_misc.quantize(p, x)
    lo, hi = qrange(p.dtype)
    f = np.asarray(x, _F)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sat = p.saturating
        blk = _to_int32(np.rint((f * p.reciprocal).astype(_F)), sat)
        tail = _to_int32(round_half_away(f.astype(np.float64) / float(p.scale)), sat)
    q = np.where(_block_mask(f.size).reshape(f.shape), blk, tail)
    return np.clip(wrap_int32(q + p.zo), lo, hi).astype(p.dtype)


# --- DEQUANTIZE -------------------------------------------------------------------------------

def prepare_dequantize(node, ctx):
    """Per-tensor 8/16-bit: blocks f = float32(float32(q) * float32(s)) + float32(-zp * double(s))
    (``impl: mul_add``, default: separate multiply and add, no FMA on x86) or one fused
    multiply-add rounded once (``impl: fma``: ARM builds with __ARM_FEATURE_FMA; documented, not
    run); tail = reference float32(double(s) * (q - zp)).  Per-channel and float16 inputs use the
    reference kernel."""
    p = ref_misc.prepare_dequantize(node, ctx)
    t = ctx.inputs[0]
    if not p.f16 and t.dtype in ("int8", "uint8", "int16") and t.quant.scale.size == 1:
        s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
        p = replace(p, opt_blocks=True, scale=_F(s), zero_times_scale=_F(-z * s),
                 fma=impl(ctx, DEQUANTIZE_IMPLS, "mul_add") == "fma")
    return p


@kernel("Dequantize", VARIANT, prepare=prepare_dequantize, impls=DEQUANTIZE_IMPLS)
def dequantize(p, x):
    ref = ref_misc.dequantize(p, x)
    if not p.opt_blocks:
        return ref
    q = np.asarray(x)
    if p.fma:
        # q * s is exact in float64 (<= 16 + 24 significant bits); one rounding of the sum
        blk = (q.astype(np.float64) * float(p.scale) + float(p.zero_times_scale)).astype(_F)
    else:
        blk = (q.astype(_F) * p.scale).astype(_F) + p.zero_times_scale
    return np.where(_block_mask(ref.size).reshape(ref.shape), blk.astype(_F), ref).astype(_F)


# --- SOFTMAX ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Uint16LutSoftmaxPlan:
    table16: np.ndarray
    out_scale: np.float32
    zo: int
    dtype: str
    uint16_lut: bool = True


@dataclass(frozen=True)
class FloatLutSoftmaxPlan:
    table: np.ndarray  # float32 expf(-sx * beta * v), v = 255..0
    inv_scale_of: np.float32
    zo: int
    dtype: str
    float_lut: bool = True


def _prepare_softmax(node, ctx):
    """8-bit input: float table[255 - v] = expf(float32(-sx * beta) * v), v = 0..255 (libm expf).
    Per row: m = max(q); e = table[255 - m + q]; sum = sequential float32 sum of e;
    inv = 1.0f / (sum * so); out = clamp(round_half_away(e * inv) + zo) — uint8 output:
    int(e * inv + 0.5f) (x86 ``QuantizeSoftmaxOutput<uint8_t>``, no zero point).
    int16 input: the reference int16 kernel (the optimized kernel calls it).
    ``impl: uint16_lut`` (aarch64 + clang builds, TFLITE_SOFTMAX_USE_UINT16_LUT, 8-bit in and out of
    the same type; documented, not run): ``SoftmaxInt8LUT``, see ``_run_uint16_lut``."""
    dt = check_dtype(ctx.inputs[0], node, ("int8", "uint8", "int16"))
    if dt == "int16":
        return ref_softmax.prepare_node(node, ctx)
    p = ref_softmax.prepare_node(node, ctx)  # validates axis / dtypes
    sx, _ = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    beta = _F(node.attrs.get("beta", 1.0))
    how = impl(ctx, SOFTMAX_IMPLS, "float_lut")
    if how == "uint16_lut" and p.dtype == dt:
        s16 = _F(sx * beta)
        e = np.array([lut.expf(_F(s16 * _F(v - 255))) for v in range(256)], _F)
        t16 = np.minimum(np.trunc((e * _F(65535)).astype(_F).astype(np.float64) + 0.5), 65535).astype(_I64)
        return Uint16LutSoftmaxPlan(t16, _F(so), zo, dt)
    s = _F(-sx * beta)
    table = np.array([lut.expf(_F(s * _F(v))) for v in range(256)], _F)[::-1].copy()
    return FloatLutSoftmaxPlan(table, _F(so), zo, p.dtype)


def _run_uint16_lut(p, x):
    """Per row: u = q (uint8) or q + 128 (int8); e = table16[u + 255 - max(u)] with
    table16[v] = min(int(expf(float32(sx*beta) * (v - 255)) * 65535 + 0.5), 65535);
    S = sum(e) (int32); inv = 1.0f / (float(S) * so); (M, sh) = QuantizeMultiplier(inv);
    out = clamp(MBQM(e, M, sh) + zo): blocks of 16 per row "upward" (4Rows), tail double rounding."""
    u = np.asarray(x).astype(_I64) + (128 if p.dtype == "int8" else 0)
    e = p.table16[u + 255 - u.max(axis=-1, keepdims=True)]
    total = e.sum(axis=-1, keepdims=True)
    inv = (_F(1.0) / (total.astype(_F) * p.out_scale).astype(_F)).astype(_F)
    flat_inv = inv.reshape(-1)
    ms = [quantize_multiplier(float(v)) for v in flat_inv]
    M = np.array([m for m, _ in ms], _I64).reshape(inv.shape)
    sh = np.array([s for _, s in ms], _I64).reshape(inv.shape)
    lo, hi = qrange(p.dtype)
    up = mbqm_upward(e, M, sh)
    ref = mbqm_double(e, M, sh)
    d = e.shape[-1]
    lanes = np.arange(d) < 16 * (d // 16)
    return np.clip(np.where(lanes, up, ref) + p.zo, lo, hi).astype(p.dtype)


@kernel("Softmax", VARIANT, prepare=_prepare_softmax, impls=SOFTMAX_IMPLS, settings=("float_contract",))
def _softmax(p, x):
    if isinstance(p, Uint16LutSoftmaxPlan):
        return _run_uint16_lut(p, x)
    if not isinstance(p, FloatLutSoftmaxPlan):
        return ref_softmax.softmax(p, x)
    y = fast_softmax(p, x) if _FAST else None
    if y is not None:
        return y
    q = np.asarray(x).astype(_I64)
    e = p.table[255 - q.max(axis=-1, keepdims=True) + q]
    total = np.cumsum(e, axis=-1, dtype=_F)[..., -1:]  # sequential float32 sum
    inv = (_F(1.0) / (total * p.inv_scale_of).astype(_F)).astype(_F)
    prob = (e * inv).astype(_F)
    lo, hi = qrange(p.dtype)
    if p.dtype == "uint8":
        out = np.trunc((prob + _F(0.5)).astype(_F)).astype(_I64)
    else:
        out = round_half_away(prob).astype(_I64) + p.zo
    return np.clip(out, lo, hi).astype(p.dtype)


# --- RESIZE_NEAREST_NEIGHBOR ------------------------------------------------------------------

RESIZE_IMPLS = ("fixed_8bit", "fixed_uint8")  # LiteRT 2.3 | tflite-runtime 2.14 (int8 nearest: reference)


def prepare_resize(node, ctx):
    """8-bit nearest without align_corners / half_pixel_centers: 16.16 fixed point,
    sc = (in << 16) // out + 1 ; idx = min((o * sc) >> 16, in - 1).  Otherwise the reference.
    ``impl: fixed_uint8`` (tflite-runtime 2.14): only uint8 takes the fixed-point path."""
    p = ref_misc.prepare_resize(node, ctx)
    eight = np.dtype(p.dtype).itemsize == 1
    if impl(ctx, RESIZE_IMPLS, "fixed_8bit") == "fixed_uint8":
        eight = p.dtype == "uint8"
    if p.mode == "nearest" and eight and not p.align and not p.half:
        p = replace(p, fixed_16_16=True)
    if p.mode != "nearest" and p.dtype == "uint8":
        p = replace(p, optimized=True)  # ResizeBilinearGenericSmallChannel<uint8> (ref_misc.resize_bilinear_uint8)
    return p


def _fixed_index(n_out: int, n_in: int) -> np.ndarray:
    sc = (n_in << 16) // n_out + 1
    return np.minimum((np.arange(n_out, dtype=_I64) * sc) >> 16, n_in - 1)


@kernel("Resize", VARIANT, prepare=prepare_resize, impls=RESIZE_IMPLS)
def resize(p, x, roi=None, scales=None, sizes=None):
    if not p.fixed_16_16:
        return ref_misc.resize(p, x)
    oh, ow = p.size
    _, ih, iw, _ = x.shape
    return x[:, _fixed_index(oh, ih)][:, :, _fixed_index(ow, iw)].astype(p.dtype)
