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

import numpy as np

from ..quant import lut
from ..quant.fixedpoint import round_half_away, wrap_int32
from ..quant.requant import mbqm_upward
from . import qmisc, qsoftmax
from ._qtflite import check_dtype, qparams, qrange
from .registry import kernel

VARIANT = "tflite_opt"
_F = np.float32
_I64 = np.int64
BLOCK = 8
REQUANT_BLOCK = 16


def _block_mask(n: int) -> np.ndarray:
    """True for flat indices handled by the 8-wide vector loop."""
    return np.arange(n) < BLOCK * (n // BLOCK)


def _to_int32(r: np.ndarray) -> np.ndarray:
    """float -> int32 as x86 converts it (cvtps2dq / cvttsd2si, also NEON_2_SSE's
    ``vcvtnq_s32_f32``): out-of-range and NaN give INT32_MIN, in either direction."""
    r = np.asarray(r, np.float64)
    ok = np.isfinite(r) & (r >= -2.0 ** 31) & (r < 2.0 ** 31)
    return np.where(ok, np.where(ok, r, 0).astype(_I64), -(1 << 31))


# --- QUANTIZE ---------------------------------------------------------------------------------

def _prepare_quantize(node, ctx):
    """float32 -> int8/uint8/int16, per tensor: blocks q = clamp(wrap(rint(f * float32(1/double(s)))
    + zp)); tail q = clamp(wrap(int32(round_half_away(double(f) / double(s))) + zp)).
    8-bit -> 8-bit requantize (``Requantize<int8/uint8, int8/uint8>``): blocks of 16 use
    ``MultiplyByQuantizedMultiplier4Rows`` (SRDHM then a half-up rounding shift, "upward"), the
    tail the reference MultiplyByQuantizedMultiplier; other requantizations are the reference."""
    p = qmisc._prepare_quantize(node, ctx)
    if p["float"]:
        p = dict(p, opt_blocks=True, reciprocal=_F(1.0 / float(p["scale"])))
    elif ctx.inputs[0].dtype in ("int8", "uint8") and p["dtype"] in ("int8", "uint8"):
        p = dict(p, requant_blocks=REQUANT_BLOCK)
    return p


@kernel("Quantize", VARIANT, prepare=_prepare_quantize)
def _quantize(p, x):
    if p.get("requant_blocks"):
        ref = qmisc._quantize(p, x)
        lo, hi = qrange(p["dtype"])
        up = np.clip(mbqm_upward(x.astype(_I64) - p["zx"], p["multiplier"], p["shift"]) + p["zo"], lo, hi)
        n = ref.size
        mask = (np.arange(n) < REQUANT_BLOCK * (n // REQUANT_BLOCK)).reshape(ref.shape)
        return np.where(mask, up, ref).astype(p["dtype"])
    if not p.get("opt_blocks"):
        return qmisc._quantize(p, x)
    lo, hi = qrange(p["dtype"])
    f = np.asarray(x, _F)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        blk = _to_int32(np.rint((f * p["reciprocal"]).astype(_F)))
        tail = _to_int32(round_half_away(f.astype(np.float64) / float(p["scale"])))
    q = np.where(_block_mask(f.size).reshape(f.shape), blk, tail)
    return np.clip(wrap_int32(q + p["zo"]), lo, hi).astype(p["dtype"])


# --- DEQUANTIZE -------------------------------------------------------------------------------

def _prepare_dequantize(node, ctx):
    """Per-tensor 8/16-bit: blocks f = float32(float32(q) * float32(s)) + float32(-zp * double(s))
    (separate multiply and add: no FMA on x86); tail = reference float32(double(s) * (q - zp)).
    Per-channel and float16 inputs use the reference kernel."""
    p = qmisc._prepare_dequantize(node, ctx)
    t = ctx.inputs[0]
    if not p["f16"] and t.dtype in ("int8", "uint8", "int16") and t.quant.scale.size == 1:
        s, z = float(t.quant.scale[0]), int(t.quant.zero_point[0])
        p = dict(p, opt_blocks=True, scale=_F(s), zero_times_scale=_F(-z * s))
    return p


@kernel("Dequantize", VARIANT, prepare=_prepare_dequantize)
def _dequantize(p, x):
    ref = qmisc._dequantize(p, x)
    if not p.get("opt_blocks"):
        return ref
    blk = (np.asarray(x).astype(_F) * p["scale"]).astype(_F) + p["zero_times_scale"]
    return np.where(_block_mask(ref.size).reshape(ref.shape), blk.astype(_F), ref).astype(_F)


# --- SOFTMAX ----------------------------------------------------------------------------------

def _prepare_softmax(node, ctx):
    """8-bit input: float table[255 - v] = expf(float32(-sx * beta) * v), v = 0..255 (libm expf).
    Per row: m = max(q); e = table[255 - m + q]; sum = sequential float32 sum of e;
    inv = 1.0f / (sum * so); out = clamp(round_half_away(e * inv) + zo) — uint8 output:
    int(e * inv + 0.5f) (x86 ``QuantizeSoftmaxOutput<uint8_t>``, no zero point).
    int16 input: the reference int16 kernel (the optimized kernel calls it)."""
    dt = check_dtype(ctx.inputs[0], node, ("int8", "uint8", "int16"))
    if dt == "int16":
        return qsoftmax._prepare(node, ctx)
    p = qsoftmax._prepare(node, ctx)  # validates axis / dtypes
    sx, _ = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    beta = _F(node.attrs.get("beta", 1.0))
    s = _F(-sx * beta)
    table = np.array([lut.expf(_F(s * _F(v))) for v in range(256)], _F)[::-1].copy()
    return {"float_lut": True, "table": table, "inv_scale_of": _F(so), "zo": zo, "dtype": p["dtype"]}


@kernel("Softmax", VARIANT, prepare=_prepare_softmax)
def _softmax(p, x):
    if not p.get("float_lut"):
        return qsoftmax._softmax(p, x)
    q = np.asarray(x).astype(_I64)
    e = p["table"][255 - q.max(axis=-1, keepdims=True) + q]
    total = np.cumsum(e, axis=-1, dtype=_F)[..., -1:]  # sequential float32 sum
    inv = (_F(1.0) / (total * p["inv_scale_of"]).astype(_F)).astype(_F)
    prob = (e * inv).astype(_F)
    lo, hi = qrange(p["dtype"])
    if p["dtype"] == "uint8":
        out = np.trunc((prob + _F(0.5)).astype(_F)).astype(_I64)
    else:
        out = round_half_away(prob).astype(_I64) + p["zo"]
    return np.clip(out, lo, hi).astype(p["dtype"])


# --- RESIZE_NEAREST_NEIGHBOR ------------------------------------------------------------------

def _prepare_resize(node, ctx):
    """8-bit nearest without align_corners / half_pixel_centers: 16.16 fixed point,
    sc = (in << 16) // out + 1 ; idx = min((o * sc) >> 16, in - 1).  Otherwise the reference."""
    p = qmisc._prepare_resize(node, ctx)
    eight = np.dtype(p["dtype"]).itemsize == 1
    if p["mode"] == "nearest" and eight and not p["align"] and not p["half"]:
        p = dict(p, fixed_16_16=True)
    return p


def _fixed_index(n_out: int, n_in: int) -> np.ndarray:
    sc = (n_in << 16) // n_out + 1
    return np.minimum((np.arange(n_out, dtype=_I64) * sc) >> 16, n_in - 1)


@kernel("Resize", VARIANT, prepare=_prepare_resize)
def _resize(p, x, roi=None, scales=None, sizes=None):
    if not p.get("fixed_16_16"):
        return qmisc._resize(p, x)
    oh, ow = p["size"]
    _, ih, iw, _ = x.shape
    return x[:, _fixed_index(oh, ih)][:, :, _fixed_index(ow, iw)].astype(p["dtype"])
