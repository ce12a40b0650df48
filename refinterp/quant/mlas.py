"""ONNX Runtime CPU (MLAS) and onnx.reference integer numerics, vectorised NumPy.

Sources (read for understanding; map in docs/arithmetic/README.md):
onnxruntime/core/mlas/lib/quantize.cpp (MlasQuantizeLinear, MlasRequantizeOutput, MlasFloatToFixedPoint),
qladd.cpp + intrinsics/avx2/qladd_avx2.cpp, qlmul.cpp, qlgavgpool.cpp;
onnxruntime/contrib_ops/cpu/quantization/qlinear_lookup_table.cc, qlinear_softmax.cc;
onnx/reference/ops/op_qlinear_conv.py, op_qlinear_matmul.py.

Conventions: ``acc`` is an int64 array holding int32 values; multipliers are float32 scalars or
per-column float32 arrays broadcasting against ``acc``; results are int64 arrays already clamped to
[lo, hi] (the caller casts to the storage dtype).
"""
from __future__ import annotations

import numpy as np

from .fma import fma_f32

F32 = np.float32


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def requant_mlas(acc, mult, zp: int, lo: int, hi: int) -> np.ndarray:
    """``MlasRequantizeOutput``: f32(f32(acc) * mult), clamp to [lo-zp, hi-zp] in float, RNE, + zp.

    The int32 -> float32 conversion rounds to nearest-even for |acc| > 2^24 (cvtdq2ps).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.asarray(acc).astype(F32) * f32(mult)
        v = np.clip(v, F32(lo - zp), F32(hi - zp))
    return np.rint(v).astype(np.int64) + zp


def requant_onnx_ref(acc, mult, zp: int, lo: int, hi: int) -> np.ndarray:
    """onnx.reference QLinearConv/QLinearMatMul: float64(acc) * float64(f32 mult) + zp, clip, RNE.

    (NumPy promotes int32 * float32 to float64; the zero point is added before rounding.)
    """
    v = np.asarray(acc).astype(np.float64) * f32(mult).astype(np.float64) + float(zp)
    return np.rint(np.clip(v, lo, hi)).astype(np.int64)


def float_to_fixed_point(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``MlasFloatToFixedPoint``: float32 scale -> (Q31 multiplier, shift) with
    scale == multiplier * 2^-(31 + shift) exactly (24-bit mantissa << 7; normal positive scales)."""
    bits = f32(scale).view(np.uint32).astype(np.int64)
    e = bits >> 23
    mult = ((bits & 0x7FFFFF) | 0x800000) << 7
    return mult, 126 - e


def requant_fixed_rndnu(acc, mult, zp: int, lo: int, hi: int) -> np.ndarray:
    """ORT ARM64 ``session.fixed_point_requant_on_arm=1`` (XNNPACK rndnu), documented only:
    t = sat32(acc << pre); t = floor(t*M / 2^31); t = (t + 2^(post-1)) >> post; + zp; saturate."""
    m, shift = float_to_fixed_point(mult)
    post = np.maximum(shift, 1)
    pre = shift - post  # <= 0: left shift by -pre
    t = np.clip(np.asarray(acc, np.int64) << np.minimum(-pre, 31), -(1 << 31), (1 << 31) - 1)
    t = (t * m) >> 31
    t = (t + (np.int64(1) << (post - 1))) >> post
    return np.clip(t + zp, lo, hi)


REQUANT = {"mlas_f32": requant_mlas, "onnx_ref_f64": requant_onnx_ref, "fixed_point_rndnu": requant_fixed_rndnu}


def quantize_linear(x, scale, zp, lo: int, hi: int) -> np.ndarray:
    """``MlasQuantizeLinear``: f32(x / scale), clamp to [lo-zp, hi-zp], RNE, + zp (zp after rounding)."""
    zp = np.asarray(zp, np.int64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        v = f32(x) / f32(scale)
        v = np.clip(v, (lo - zp).astype(F32), (hi - zp).astype(F32))
    v = np.nan_to_num(v, nan=0.0)
    return np.rint(v).astype(np.int64) + zp


def quantization_parameter(x, qmin: int, qmax: int, degenerate_scale=np.float32(1.0)) -> tuple[np.float32, int]:
    """ORT's GetQuantizationParameter (qmath.h; no reduced range, not symmetric), float32 throughout:
    lo = min(0, min(x)), hi = max(0, max(x)); scale = f32((hi - lo) / (qmax - qmin)), ``degenerate_scale`` when
    hi == lo; zp = RNE(clamp(f32(qmin - f32(lo / scale)), qmin, qmax)) (clamp first, then round half even)."""
    x = np.asarray(x, F32)
    hi = F32(max(F32(0), np.max(x))) if x.size else F32(0)
    lo = F32(min(F32(0), np.min(x))) if x.size else F32(0)
    scale = F32(degenerate_scale) if hi == lo else F32(F32(hi - lo) / F32(qmax - qmin))
    zp = int(np.rint(np.clip(F32(F32(qmin) - F32(lo / scale)), qmin, qmax)))
    return scale, zp


def lut(fn, x_scale, x_zp: int, in_dtype: str, y_scale, y_zp: int, out_dtype: str) -> np.ndarray:
    """``QlinearBuildLookupTable``: table over every stored input code (index = code - min):
    table[i] = MlasQuantizeLinear(fn(f32(x_scale * f32(code - x_zp))), y_scale, y_zp)."""
    info, oinfo = np.iinfo(in_dtype), np.iinfo(out_dtype)
    codes = np.arange(int(info.min), int(info.max) + 1, dtype=np.int64)
    v = F32(x_scale) * (codes - x_zp).astype(F32)
    return quantize_linear(fn(f32(v)), y_scale, y_zp, int(oinfo.min), int(oinfo.max))


def qladd_x86(a, b, sa, za: int, sb, zb: int, sc, zc: int, lo: int, hi: int) -> np.ndarray:
    """QLinearAdd, AVX2 kernel of the shipped x86 wheel (FMA contraction):
    rA = f32(sa/sc), rB = f32(sb/sc), Fixed = f32(zc - fma(rA, za, f32(rB*zb))),
    t = fma(a_raw, rA, fma(b_raw, rB, Fixed)); y = sat(RNE(t))."""
    ra, rb = F32(sa) / F32(sc), F32(sb) / F32(sc)
    fixed = F32(F32(zc) - fma_f32(ra, F32(za), F32(rb * F32(zb))))
    t = fma_f32(np.asarray(a, np.int64), ra, fma_f32(np.asarray(b, np.int64), rb, fixed))
    return np.clip(np.rint(t).astype(np.int64), lo, hi)


def qladd_neon(a, b, sa, za: int, sb, zb: int, sc, zc: int, lo: int, hi: int) -> np.ndarray | None:
    """QLinearAdd, ARM NEON fixed point (documented, not run here): Shift = 21 - exponent(max ratio),
    M = lrintf(ratio * 2^Shift), acc = (a-za)*MA + (b-zb)*MB, y = sat(rshift_half_away(acc) + zc).
    Returns None when the ratios leave the fixed-point range (ORT then uses the float helper)."""
    ra, rb = F32(sa) / F32(sc), F32(sb) / F32(sc)
    rmax = max(float(ra), float(rb))
    if not (2.0 ** -14 <= rmax < 256.0):
        return None
    shift = 21 - (np.frexp(F32(rmax))[1] - 1)
    if not 13 <= shift <= 31:
        return None
    ma = int(np.rint(F32(ra * F32(2.0 ** shift))))
    mb = int(np.rint(F32(rb * F32(2.0 ** shift))))
    acc = (np.asarray(a, np.int64) - za) * ma + (np.asarray(b, np.int64) - zb) * mb
    half = np.int64(1) << (shift - 1)
    r = np.where(acc >= 0, (acc + half) >> shift, -((-acc + half) >> shift))
    return np.clip(r + zc, lo, hi)


def qlmul(a, b, sa, za: int, sb, zb: int, sc, zc: int, lo: int, hi: int, fused: bool = False) -> np.ndarray:
    """QLinearMul (qlmul.cpp): prod = (a-za)*(b-zb) exact; ratio = f32(f32(sa*sb)/sc);
    y = sat(RNE(f32(f32(f32(prod) * ratio) + f32(zc))))  (zero point added in float).  ``fused``:
    the aarch64 build, where vaddq(zc, vmulq(ratio, prod)) compiles to one FMA (single rounding)."""
    ratio = F32(F32(F32(sa) * F32(sb)) / F32(sc))
    prod = (np.asarray(a, np.int64) - za) * (np.asarray(b, np.int64) - zb)
    t = fma_f32(prod.astype(F32), ratio, F32(zc)) if fused else (prod.astype(F32) * ratio).astype(F32) + F32(zc)
    return np.clip(np.rint(t).astype(np.int64), lo, hi)


def gap_mlas(acc, n: int, xs, ys, zp: int, lo: int, hi: int) -> np.ndarray:
    """QLinearGlobalAveragePool: acc = sum(x) - x_zp*N (int32); scale = f32(xs / f32(ys * N))."""
    scale = F32(F32(xs) / F32(F32(ys) * F32(n)))
    return requant_mlas(acc, scale, zp, lo, hi)


def avgpool_requant(avg_f32, ys, zp: int, lo: int, hi: int) -> np.ndarray:
    """QLinearAveragePool epilogue: y = sat(RNE(f32(f32(avg / ys) + zp)))  (zero point in float)."""
    t = (f32(avg_f32) / F32(ys)).astype(F32) + F32(zp)
    return np.clip(np.rint(t).astype(np.int64), lo, hi)


def u8s8_pair_sat16(a_raw: np.ndarray, b_raw: np.ndarray) -> np.ndarray:
    """AVX2/AVX512-core ``vpmaddubsw`` inner product (documented; this machine has VNNI):
    a (M, K) raw uint8, b (K, N) raw int8; K indices (2j, 2j+1) summed into a saturating int16,
    the saturated pair sums then added exactly in int32.  Returns int64 (M, N) raw sums."""
    a = np.asarray(a_raw, np.int64)
    b = np.asarray(b_raw, np.int64)
    k = a.shape[1]
    if k % 2:
        a = np.concatenate([a, np.zeros((a.shape[0], 1), np.int64)], axis=1)
        b = np.concatenate([b, np.zeros((1, b.shape[1]), np.int64)], axis=0)
    pair = (a[:, 0::2, None] * b[None, 0::2, :]) + (a[:, 1::2, None] * b[None, 1::2, :])
    return np.clip(pair, -32768, 32767).sum(axis=1)
