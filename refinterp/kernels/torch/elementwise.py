"""PyTorch quantized element-wise ops (variants ``fbgemm`` and ``qnnpack``): Add, Mul, Concat,
HardSwish, Sigmoid, LeakyRelu, Elu on per-tensor quantized tensors (fused QDQ units, QOperator ops,
or IR nodes whose tensors carry QuantParams).

Numeric contracts (checked against torch 2.13.0, tests/conformance/test_torch_quant_*.py):
* "vectorised float" path (ATen Vectorized<quint8>): dq(q) = fma(q, s, f32(-zp * s));
  the float32 function; quantize_vec(v) = RNE(f32(v * f32(1/s_out))) + zp_out (zero point after
  rounding -- unlike quantize_per_tensor), clamp.  Used by fbgemm for Add, HardSwish, Sigmoid,
  LeakyRelu, Elu and by qnnpack for LeakyRelu, Elu.
* Concat (both engines): inputs with the output's (scale, zp) are copied; others are requantized
  with the scalar ATen path: quantize(dequantize(q)) = RNE(fma(f32((q - zp) * s), f32(1/sy), zy)).
* qnnpack Add: q8vadd fixed point (torchq.qnnpack_add: multipliers < 2^22, ties away from zero).
* qnnpack HardSwish / Sigmoid: 256-entry table over the input code: x = f32((code - zx) * xs),
  h = f(x); y = clamp(RNE(f32(h * f32(1/ys)) + zy)) (zero point added in float before rounding).
* Mul (both engines): prod = (a - za) * (b - zb) exact; y = clamp(RNE(f32(f32(prod) *
  f32(f32(sa * sb) / sc))) + zc).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refinterp.quant import torchq
from ..onnxruntime.common import ort_kernel
from ..tflite.common import qparams, qrange

F32 = np.float32
ENGINES = ("fbgemm", "qnnpack")


def dq_vec(q, s, zp) -> np.ndarray:
    return torchq.fma_f32(np.asarray(q).astype(F32), F32(s), F32(F32(-zp) * F32(s)))


def quantize_vec(v, s, zp: int, lo: int, hi: int) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        t = (np.asarray(v, F32) * torchq.inv_scale(s)).astype(F32)
        t = np.nan_to_num(np.clip(t, F32(-2.0 ** 31), F32(2.0 ** 31 - 256)))
    return np.clip(np.rint(t).astype(np.int64) + zp, lo, hi)


@dataclass(frozen=True)
class TorchUnaryPlan:
    xs: float
    zx: int
    ys: float
    zy: int
    lo: int
    hi: int
    dtype: str
    xlo: int
    xhi: int
    alpha: np.float32
    table: np.ndarray | None = None  # qnnpack: output code per input code - xlo


@dataclass(frozen=True)
class TorchBinaryPlan:
    a: tuple[float, int]
    b: tuple[float, int]
    c: tuple[float, int]
    dtype: str
    lo: int
    hi: int
    params: Any = None  # qnnpack Add: its fixed-point parameters


@dataclass(frozen=True)
class TorchConcatPlan:
    axis: int
    ins: list  # (scale, zero point) per input
    ys: float
    zy: int
    lo: int
    hi: int
    dtype: str


def _unary_prepare(node, ctx) -> TorchUnaryPlan:
    xs, zx = qparams(ctx.inputs[0], node, "X")
    ys, zy = qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    return TorchUnaryPlan(xs, zx, ys, zy, lo, hi, ctx.outputs[0].dtype, *qrange(ctx.inputs[0].dtype),
                          F32(node.attrs.get("alpha", 0.01 if node.op == "LeakyRelu" else 1.0)))


def _hardswish(v):
    return (v * np.clip((v + F32(3)).astype(F32), F32(0), F32(6)) / F32(6)).astype(F32)


def _sigmoid(v):
    return (1.0 / (1.0 + np.exp(-np.asarray(v, np.float64)))).astype(F32)


def _leaky(p):
    return lambda v: np.where(v >= 0, v, (v * p.alpha).astype(F32)).astype(F32)


def _elu(p):
    return lambda v: np.where(v > 0, v, (np.float64(p.alpha) * np.expm1(np.asarray(v, np.float64)))
                              .astype(F32)).astype(F32)


_FUNCS = {"HardSwish": lambda p: _hardswish, "Sigmoid": lambda p: _sigmoid, "LeakyRelu": _leaky, "Elu": _elu}


def _float_path(p, fn, x):
    y = fn(dq_vec(np.asarray(x).astype(np.int64), p.xs, p.zx))
    return quantize_vec(y, p.ys, p.zy, p.lo, p.hi).astype(p.dtype)


def _lut_prepare(node, ctx) -> TorchUnaryPlan:
    p = _unary_prepare(node, ctx)
    codes = np.arange(p.xlo, p.xhi + 1, dtype=np.int64)
    h = _FUNCS[node.op](p)(((codes - p.zx).astype(F32) * p.xs).astype(F32))
    t = ((h * torchq.inv_scale(p.ys)).astype(F32) + F32(p.zy)).astype(F32)
    return replace(p, table=np.clip(np.rint(t), p.lo, p.hi).astype(p.dtype))


def _lut_run(p, x):
    return p.table[np.asarray(x).astype(np.int64) - p.xlo]


for _op in ("HardSwish", "Sigmoid", "LeakyRelu", "Elu"):
    ort_kernel(_op, "fbgemm", _unary_prepare)(lambda p, x, _o=_op: _float_path(p, _FUNCS[_o](p), x))
for _op in ("LeakyRelu", "Elu"):
    ort_kernel(_op, "qnnpack", _unary_prepare)(lambda p, x, _o=_op: _float_path(p, _FUNCS[_o](p), x))
for _op in ("HardSwish", "Sigmoid"):
    ort_kernel(_op, "qnnpack", _lut_prepare)(_lut_run)


def _binary_prepare(node, ctx) -> TorchBinaryPlan:
    dt = ctx.outputs[0].dtype
    return TorchBinaryPlan(qparams(ctx.inputs[0], node, "A"), qparams(ctx.inputs[1], node, "B"),
                           qparams(ctx.outputs[0], node, "C"), dt, *qrange(dt))


def _add_prepare(node, ctx) -> TorchBinaryPlan:
    p = _binary_prepare(node, ctx)
    return replace(p, params=torchq.qnnpack_add_params(p.a[0], p.b[0], p.c[0]))


@ort_kernel("Add", "fbgemm", _binary_prepare)
def fbgemm_add(p, a, b):
    (sa, za), (sb, zb), (sc, zc) = p.a, p.b, p.c
    v = (dq_vec(np.asarray(a).astype(np.int64), sa, za) + dq_vec(np.asarray(b).astype(np.int64), sb, zb))
    return quantize_vec(v.astype(F32), sc, zc, p.lo, p.hi).astype(p.dtype)


@ort_kernel("Add", "qnnpack", _add_prepare)
def qnnpack_add(p, a, b):
    (_, za), (_, zb), (_, zc) = p.a, p.b, p.c
    a, b = np.broadcast_arrays(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))
    return torchq.qnnpack_add(a, b, za, zb, zc, p.params, p.lo, p.hi).astype(p.dtype)


def _mul(p, a, b):
    (sa, za), (sb, zb), (sc, zc) = p.a, p.b, p.c
    m = F32(F32(F32(sa) * F32(sb)) / F32(sc))
    prod = (np.asarray(a).astype(np.int64) - za) * (np.asarray(b).astype(np.int64) - zb)
    return np.clip(np.rint((prod.astype(F32) * m).astype(F32)).astype(np.int64) + zc,
                   p.lo, p.hi).astype(p.dtype)


for _e in ENGINES:
    ort_kernel("Mul", _e, _binary_prepare)(_mul)


def _concat_prepare(node, ctx) -> TorchConcatPlan:
    ys, zy = qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    ins = [qparams(t, node, "input") for t in ctx.inputs]
    return TorchConcatPlan(int(node.attrs.get("axis", 1)), ins, ys, zy, lo, hi, ctx.outputs[0].dtype)


def _concat(p, *xs):
    parts = []
    for x, (s, z) in zip(xs, p.ins):
        x = np.asarray(x)
        if F32(s) == F32(p.ys) and z == p.zy:
            parts.append(x.astype(p.dtype))
        else:
            v = torchq.dequantize(x.astype(np.int64), s, z)
            parts.append(torchq.quantize(v, p.ys, p.zy, p.lo, p.hi).astype(p.dtype))
    return np.concatenate(parts, axis=p.axis)


for _e in ENGINES:
    ort_kernel("Concat", _e, _concat_prepare)(_concat)
