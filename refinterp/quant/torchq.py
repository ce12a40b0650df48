"""PyTorch quantized CPU engines (FBGEMM / x86 / oneDNN, QNNPACK) integer numerics, vectorised NumPy.

Sources read for understanding (map in docs/arithmetic/README.md): pytorch/FBGEMM
include/fbgemm/QuantUtils.h, include/fbgemm/OutputProcessing-inl.h, src/QuantUtilsAvx2.cc;
pytorch/pytorch aten/src/ATen/native/quantized/cpu/{qconv.cpp, qlinear.cpp, qadd.cpp, qmul.cpp,
qpool.cpp, qhardswish.cpp, qsigmoid.cpp, kernels/QuantizedOpKernels.cpp, AffineQuantizerBase.cpp},
aten/src/ATen/native/quantized/cpu/qnnpack/src/{requantization, q8vadd, q8avgpool}.
Every formula below was checked against torch 2.13.0 (tests/conformance/test_torch_quant_*.py),
except ``qnnpack_avgpool*`` (original QNNPACK q8avgpool; torch 2.13 runs NCHW avg_pool2d through
the ATen kernel on every engine, so it is not exercised by the verified schemes).

Conventions: ``acc`` int64 arrays holding int32 values; scales float32; results int64 already
clamped to [lo, hi] (the caller casts to the storage dtype).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def fma_f32(a, b, c) -> np.ndarray:
    """float32 fused multiply-add a*b + c with one rounding.  The float64 product of two float32 is
    exact (48 bits) and adding an integer zero point (< 2^16) stays exact in float64 whenever the
    result is not far below 2^-20 (where no float32 tie can occur), so only the final cast rounds."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(F32)


def inv_scale(scale) -> np.ndarray:
    """PyTorch's reciprocal ``1.0f / scale`` in float32 (quantize multiplies by it, never divides)."""
    return (F32(1.0) / f32(scale)).astype(F32)


def quantize(x, scale, zp, lo: int, hi: int) -> np.ndarray:
    """``quantize_per_tensor`` (any engine, x86 build with FMA):
    q = clamp(RNE(fma(x, f32(1/scale), zp)), lo, hi) -- the zero point is added in float32 before
    rounding (observed: the zero-point-after-rounding form differs at ties with odd zp)."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = fma_f32(f32(x), inv_scale(scale), np.asarray(zp, np.float64))
    v = np.nan_to_num(np.clip(v, F32(lo), F32(hi)), nan=0.0)
    return np.rint(v).astype(np.int64)


def dequantize(q, scale, zp) -> np.ndarray:
    """``dequantize``: f32(f32(q - zp) * scale)."""
    return (np.asarray(q, np.int64) - np.asarray(zp, np.int64)).astype(F32) * f32(scale)


def act_times_w(x_scale, w_scale) -> np.ndarray:
    """f32(input_scale * weight_scale[c]) (qconv.cpp / qlinear.cpp, both engines)."""
    return (F32(x_scale) * f32(w_scale)).astype(F32)


# -- FBGEMM (engines 'fbgemm', 'x86', 'onednn' on this machine) ---------------------------------------

def fbgemm_bias(bias_f32, aw, per_channel: bool) -> np.ndarray:
    """Float bias brought to the accumulator domain (OutputProcessing-inl.h): per-tensor multiplies
    by the float32 of the double reciprocal 1.0/aw; per-channel divides in float32."""
    b = f32(bias_f32)
    if per_channel:
        return (b / f32(aw)).astype(F32)
    recip = F32(1.0 / np.float64(f32(aw).ravel()[0]))
    return (b * recip).astype(F32)


def fbgemm_requant(acc, bias_acc, mult, zp: int, lo: int, hi: int) -> np.ndarray:
    """``ReQuantizeOutput`` with a float bias: f = f32(f32(acc) + bias_acc); y = f32(f * mult);
    q = clamp(RNE(y) + zp, lo, hi) (the int16 pack saturation before adding zp cannot change an
    8-bit result).  ``mult`` = f32(aw / out_scale)."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.asarray(acc).astype(F32)
        if bias_acc is not None:
            f = (f + f32(bias_acc)).astype(F32)
        y = (f * f32(mult)).astype(F32)
        y = np.clip(y, F32(-2.0 ** 31), F32(2.0 ** 31 - 256))
    return np.clip(np.rint(y).astype(np.int64) + zp, lo, hi)


# -- QNNPACK (PyTorch's fork; engine 'qnnpack') --------------------------------------------------------

def qnnpack_requant_scale(x_scale, w_scale, y_scale) -> np.ndarray:
    """requantization_scale[c] = f32(f32(w_scale[c] * x_scale) * f32(1 / y_scale))."""
    return (act_times_w(x_scale, w_scale) * inv_scale(y_scale)).astype(F32)


def qnnpack_bias(bias_f32, aw) -> np.ndarray:
    """Prepack quantizes the float bias once to int32 with scale aw, zp 0 (quantize_per_tensor /
    per_channel: RNE of f32(b * f32(1/aw)))."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = (f32(bias_f32) * inv_scale(aw)).astype(F32)
    return np.rint(np.clip(v, F32(-2.0 ** 31), F32(2.0 ** 31 - 128))).astype(np.int64)


def qnnpack_requant(acc, rscale, zp: int, lo: int, hi: int) -> np.ndarray:
    """fp32 requantization (SSE2 / AArch64 vcvtnq): q = clamp(RNE(f32(f32(acc) * rscale)) + zp)."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = (np.asarray(acc).astype(F32) * f32(rscale)).astype(F32)
        y = np.clip(y, F32(-2.0 ** 31), F32(2.0 ** 31 - 256))
    return np.clip(np.rint(y).astype(np.int64) + zp, lo, hi)


def rshift_half_away(acc, shift) -> np.ndarray:
    """Arithmetic right shift rounding to nearest, ties away from zero (QNNPACK remainder trick)."""
    acc = np.asarray(acc, np.int64)
    shift = np.asarray(shift, np.int64)
    mask = (np.int64(1) << shift) - 1
    rem = (acc & mask) - (acc < 0).astype(np.int64)
    return (acc >> shift) + (rem > (mask >> 1)).astype(np.int64)


def qnnpack_add_params(sa, sb, sc) -> tuple[int, int, int]:
    """q8vadd parameters: ratios f32(sa/sc), f32(sb/sc) in [2^-14, 2^8); shift = 21 - exponent of
    the larger ratio; multipliers lrintf(ratio * 2^shift) (< 2^22)."""
    ra, rb = F32(F32(sa) / F32(sc)), F32(F32(sb) / F32(sc))
    rmax = max(float(ra), float(rb))
    if not 2.0 ** -14 <= rmax < 256.0:
        raise ValueError(f"QNNPACK add: scale ratio {rmax} outside [2^-14, 256)")
    shift = 21 - (int(np.frexp(np.float64(F32(rmax)))[1]) - 1)
    ma = int(np.rint(F32(ra * F32(2.0 ** shift))))
    mb = int(np.rint(F32(rb * F32(2.0 ** shift))))
    return ma, mb, shift


def qnnpack_add(a, b, za: int, zb: int, zc: int, params, lo: int, hi: int, relu: bool = False) -> np.ndarray:
    """acc = a*Ma + b*Mb - (Ma*za + Mb*zb) (int32, |acc| < 2^31 by the range check);
    y = clamp(rshift_half_away(acc, shift) + zc); ReLU fused as a lower clamp at zc."""
    ma, mb, shift = params
    acc = np.asarray(a, np.int64) * ma + np.asarray(b, np.int64) * mb - (ma * za + mb * zb)
    y = rshift_half_away(acc, shift) + zc
    return np.clip(y, max(lo, zc) if relu else lo, hi)


def qnnpack_avgpool_params(x_scale, y_scale, n: int) -> tuple[int, int]:
    """q8avgpool: scale = f32(x_scale / (y_scale * N)) in [2^-32, 256) ... here f32(xs / f32(ys*N));
    multiplier = 24-bit mantissa, shift = 127 + 23 - biased exponent."""
    scale = F32(F32(x_scale) / F32(F32(y_scale) * F32(n)))
    bits = int(np.asarray(scale, F32).view(np.uint32))
    return (bits & 0x7FFFFF) | 0x800000, 127 + 23 - (bits >> 23)


def qnnpack_avgpool(acc, mult: int, shift: int, zp: int, lo: int, hi: int) -> np.ndarray:
    """acc = sum(x) - N*zx (int32); y = clamp(((acc*M - (acc<0)) + 2^(shift-1)) >> shift + zp):
    exact 24-bit multiplier, ties away from zero."""
    acc = np.asarray(acc, np.int64)
    p = acc * mult - (acc < 0).astype(np.int64)
    y = (p + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(y + zp, lo, hi)


# -- reduce_range (observers) -------------------------------------------------------------------------

def activation_qparams(x_min: float, x_max: float, reduce_range: bool = False,
                       dtype: str = "quint8") -> tuple[np.float32, int]:
    """MinMax observer affine qparams (torch.ao.quantization.observer, per-tensor affine): the range
    is widened to include 0, quant range [0, 255] or [0, 127] with ``reduce_range`` (what
    ``get_default_qconfig('fbgemm' | 'x86')`` uses so that the AVX2 u8*s8 pair sum stays below 2^15):
    scale = max((max - min) / (qmax - qmin), eps); zp = clamp(qmin - round(min / scale))."""
    qmin, qmax = (0, 255) if dtype == "quint8" else (-128, 127)
    if reduce_range:
        qmin, qmax = qmin // 2, qmax // 2
    lo, hi = min(float(x_min), 0.0), max(float(x_max), 0.0)
    eps = float(np.finfo(np.float32).eps)
    scale = np.float32(max((np.float32(hi) - np.float32(lo)) / np.float32(qmax - qmin), eps))
    zp = qmin - int(np.round(np.float32(lo) / scale))
    return scale, int(min(max(zp, qmin), qmax))


# -- oneDNN (engines 'onednn' and 'x86' with symmetric weights) ---------------------------------------

def onednn_requant(acc, x_scale, w_scale, bias_f, y_scale, zp: int, lo: int, hi: int) -> np.ndarray:
    """oneDNN int8 conv epilogue with per-argument scales (observed on torch 2.13):
    f = f32(f32(f32(acc) * xs) * ws[c]); f = f32(f + bias_f); y = f32(f * f32(1/ys));
    q = clamp(RNE(f32(y + zp))) -- the source and weight scales are applied one after the other
    (not as their product) and the output zero point is added in float before rounding.
    Equivalent on 3.2M tie-prone elements: ws before xs, or dividing by ys instead of multiplying by
    its reciprocal; the product form f32(acc) * f32(xs*ws) and zp-after-rounding both differ."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = ((np.asarray(acc).astype(F32) * F32(x_scale)).astype(F32) * f32(w_scale)).astype(F32)
        if bias_f is not None:
            f = (f + f32(bias_f)).astype(F32)
        y = ((f * inv_scale(y_scale)).astype(F32) + F32(zp)).astype(F32)
    return np.clip(np.rint(np.nan_to_num(np.clip(y, F32(-2.0 ** 31), F32(2.0 ** 31)))), lo, hi).astype(np.int64)
