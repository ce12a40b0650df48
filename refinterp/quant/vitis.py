"""Xilinx Vitis-AI DPU fixed-point numerics (documented, not verified against a runtime).

Sources read for understanding (map in docs/arithmetic/README.md): Xilinx/Vitis-AI
src/vai_runtime/vart/cpu-runner/src/ops/conv2d_fix.cpp, eltwise_fix.cpp, pool_fix.cpp,
src/vai_runtime/xir/src/xir/op/built_in_ops.cpp, vai_q_pytorch nndct_fix_kernels_cpu.h,
vai_q_onnx / Quark simulate_dpu.py.

Every tensor is int8 with a power-of-two scale 2^-fix_pos and zero point 0.
DPU_ROUND = round half toward +inf = floor(v + 0.5).
"""
from __future__ import annotations

import math

import numpy as np

LEAKY_ALPHA = 26 / 256  # the only LeakyReLU slope the DPU supports (0.1 -> 0.1015625)
HSIGMOID_MUL, HSIGMOID_SHIFT = 2731, 14  # hard-sigmoid slope 2731/2^14 ~ 1/6


def fix_pos(scale) -> int:
    """fix_pos of a power-of-two scale (scale = 2^-fix_pos); ValueError otherwise."""
    m, e = math.frexp(float(scale))
    if m != 0.5:
        raise ValueError(f"scale {float(scale)!r} is not a power of two")
    return 1 - e


def dpu_round(v) -> np.ndarray:
    """Round half toward +inf on an exact rational given as float64 (exact for |v| < 2^52)."""
    return np.floor(np.asarray(v, np.float64) + 0.5).astype(np.int64)


def rshift_half_up(acc, shift: int) -> np.ndarray:
    """Integer form of DPU_ROUND(acc * 2^-shift): (acc + 2^(shift-1)) >> shift (shift >= 1),
    acc << -shift for shift <= 0."""
    acc = np.asarray(acc, np.int64)
    if shift <= 0:
        return acc << -shift
    return (acc + (np.int64(1) << (shift - 1))) >> shift


def conv_fix(acc, bias_q, fp_in: int, fp_w: int, fp_b: int, fp_out: int, act: str | None = None,
             lo: int = -128, hi: int = 127) -> np.ndarray:
    """conv2d-fix: v = (acc + b * 2^shift_bias) * 2^-shift_cut with shift_bias = fp_in + fp_w - fp_b,
    shift_cut = fp_in + fp_w - fp_out; the activation on the unrounded v (RELU, LEAKYRELU with
    26/256, RELU6 clamp 96 = 6 << 4 only when fp_out <= 4); one DPU_ROUND; int8 saturation.
    Evaluated exactly in float64 (acc < 2^31, shifts <= 16)."""
    v = np.asarray(acc, np.float64)
    if bias_q is not None:
        v = v + np.asarray(bias_q, np.float64) * 2.0 ** (fp_in + fp_w - fp_b)
    v = v * 2.0 ** -(fp_in + fp_w - fp_out)
    v = activation(v, act, fp_out)
    return np.clip(dpu_round(v), lo, hi)


def activation(v, act: str | None, fp_out: int) -> np.ndarray:
    v = np.asarray(v, np.float64)
    if act == "RELU":
        return np.maximum(v, 0)
    if act == "LEAKYRELU":
        return np.where(v < 0, v * LEAKY_ALPHA, v)
    if act == "RELU6":
        v = np.maximum(v, 0)
        return np.minimum(v, 96.0) if fp_out <= 4 else v
    return v


def eltwise_add(xs: list[np.ndarray], fps: list[int], fp_out: int, act: str | None = None) -> np.ndarray:
    """eltwise-fix ADD: y = DPU_ROUND(sum x_i * 2^(fp_out - fp_i)) (single rounding; exact while
    max(fp_i) - min(fp_i) <= 7, the export constraint), activation before rounding, int8 saturation."""
    v = sum(np.asarray(x, np.float64) * 2.0 ** (fp_out - fp) for x, fp in zip(xs, fps))
    return np.clip(dpu_round(activation(v, act, fp_out)), -128, 127)


def leaky_relu_fix(x, fp_in: int, fp_out: int) -> np.ndarray:
    """Standalone LeakyReLU: y = DPU_ROUND(x * (x < 0 ? 26/256 : 1) * 2^(fp_out - fp_in))."""
    v = np.asarray(x, np.float64) * 2.0 ** (fp_out - fp_in)
    return np.clip(dpu_round(np.where(v < 0, v * LEAKY_ALPHA, v)), -128, 127)


def hsigmoid_fix(x, fp_in: int, fp_out: int) -> np.ndarray:
    """hard-sigmoid-fix: t = clamp(x*2731 + 3*2731*2^fp_in, 0, 2^32);
    y = DPU_ROUND(t * 2^-(14 + fp_in - fp_out)), int8 saturation (the 6 clamp comes from it)."""
    t = np.clip(np.asarray(x, np.int64) * HSIGMOID_MUL + 3 * HSIGMOID_MUL * (1 << fp_in), 0, 1 << 32)
    return np.clip(dpu_round(t * 2.0 ** -(HSIGMOID_SHIFT + fp_in - fp_out)), -128, 127)


_AVG_TABLE = {(3, 3): (7, 6), (5, 5): (10, 8), (6, 6): (7, 8), (7, 7): (21, 10), (14, 14): (21, 12)}


def avgpool_factor(kh: int, kw: int) -> tuple[int, int]:
    """(k, n) with sum * k / 2^n replacing sum / (kh*kw) (VART cpu-runner get_avgpool_dpu_factors):
    the table above, else the first s in [0, ceil(log2(kh*kw*128))) minimising |round(2^s/N)/2^s - 1/N|."""
    if (kh, kw) in _AVG_TABLE:
        return _AVG_TABLE[(kh, kw)]
    n_cells = kh * kw
    best, best_err = (1, 0), math.inf
    for s in range(math.ceil(math.log2(n_cells * 128))):
        k = math.floor(2 ** s / n_cells + 0.5)
        err = abs(k / 2 ** s - 1 / n_cells)
        if err < best_err:
            best, best_err = (k, s), err
    return best


def avgpool_fix(window_sum, kh: int, kw: int, fp_in: int, fp_out: int) -> np.ndarray:
    """avgpool-fix: y = DPU_ROUND(f32(f32(sum) * f32(k / 2^n)) * 2^(fp_out - fp_in)), int8."""
    k, n = avgpool_factor(kh, kw)
    t = (np.asarray(window_sum).astype(np.float32) * np.float32(k / 2 ** n)).astype(np.float32)
    return np.clip(dpu_round(t.astype(np.float64) * 2.0 ** (fp_out - fp_in)), -128, 127)


def quantize_fix(x, fp: int) -> np.ndarray:
    """fix(x) = clamp(DPU_ROUND(x * 2^fp), -128, 127) (float32 input, exact power-of-two scaling)."""
    return np.clip(dpu_round(np.asarray(x, np.float32).astype(np.float64) * 2.0 ** fp), -128, 127)
