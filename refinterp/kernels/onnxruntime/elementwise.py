"""ONNX Runtime CPU integer element-wise ops (variant ``ort``): QLinearAdd, QLinearMul,
QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearWhere (and their QDQ fusions).

Numeric contracts (refinterp/quant/mlas.py has the formulas):
* Add: ``impl`` ``fma_x86`` (default; AVX2 kernel with FMA, raw stored a/b, zero points folded in a
  float32 constant, RNE) or ``neon_fixed`` (ARM64 fixed point 2^-Shift, ties away; documented).
* Mul: exact int32 product of zero-point-corrected values, float32 ratio f32(f32(sa*sb)/sc), zero
  point added in float32 before RNE; ``impl`` ``neon_fma`` (ARM64): product and zero point in one FMA.
* Sigmoid / LeakyRelu: 256-entry table indexed by the stored byte; the function evaluated in
  float32 on f32(xs * (code - zx)) and quantized with MlasQuantizeLinear (divide, RNE, zp after).
  Sigmoid is evaluated exactly (float64, rounded to float32); ORT's MlasComputeLogistic is a
  polynomial with ~1e-7 relative error that could flip an exact quantization tie.
* Concat: inputs with the output's (scale, zp) are copied; the others go through an identity table.
* ``int8_as_uint8`` node attribute (set by the fuse_qdq_x86 pass): Add / Mul compute on the codes
  + 128 with zero points + 128 and subtract 128 from the result (ORT x86 re-encodes int8 QDQ as uint8).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import mlas
from refinterp.settings import fast_kernels
from ..tflite.common import qparams, qrange, where
from .common import ort_kernel
from .elementwise_fast import fast_ort_add

ADD_IMPLS = ("fma_x86", "neon_fixed")
MUL_IMPLS = ("sse", "neon_fma")
_FAST = fast_kernels()


@dataclass(frozen=True)
class BinaryPlan:
    a: tuple[float, int]  # (scale, zero point) of A, B and C
    b: tuple[float, int]
    c: tuple[float, int]
    lo: int
    hi: int
    dtype: str
    impl: str
    shift: int  # 128: int8 tensors computed as uint8 (``int8_as_uint8``)


@dataclass(frozen=True)
class LutPlan:
    table: np.ndarray  # output code per input code - lo
    lo: int


@dataclass(frozen=True)
class ConcatPlan:
    tables: list  # per input: None (copied) or (table, lo)
    dtype: str
    axis: int = 0


def _binary_prepare(node, ctx) -> BinaryPlan:
    a = qparams(ctx.inputs[0], node, "A")
    b = qparams(ctx.inputs[1], node, "B")
    c = qparams(ctx.outputs[0], node, "C")
    lo, hi = qrange(ctx.outputs[0].dtype)
    if node.attrs.get("int8_as_uint8") and ctx.outputs[0].dtype == "int8":  # see passes/qdq.py
        a, b, c = (a[0], a[1] + 128), (b[0], b[1] + 128), (c[0], c[1] + 128)
        lo, hi = 0, 255
    allowed = ADD_IMPLS if node.op == "Add" else MUL_IMPLS
    impl = (ctx.settings or {}).get("impl", allowed[0])
    if impl not in allowed:
        raise UnsupportedOpError(f"{where(node)}: impl '{impl}' is not one of {', '.join(allowed)}")
    return BinaryPlan(a, b, c, lo, hi, ctx.outputs[0].dtype, impl,
                      128 if lo == 0 and ctx.outputs[0].dtype == "int8" else 0)


def _binary_args(p, a, b):
    (sa, za), (sb, zb), (sc, zc) = p.a, p.b, p.c
    a, b = np.broadcast_arrays(np.asarray(a).astype(np.int64) + p.shift, np.asarray(b).astype(np.int64) + p.shift)
    return (a, b, sa, za, sb, zb, sc, zc, p.lo, p.hi)


@ort_kernel("Add", "ort", _binary_prepare, ADD_IMPLS)
def ort_add(p, a, b):
    y = fast_ort_add(p, a, b) if _FAST else None  # None: not covered, the NumPy path below
    if y is not None:
        return y
    args = _binary_args(p, a, b)
    y = mlas.qladd_neon(*args) if p.impl == "neon_fixed" else None
    if y is None:
        y = mlas.qladd_x86(*args)
    return (y - p.shift).astype(p.dtype)


@ort_kernel("Mul", "ort", _binary_prepare, MUL_IMPLS)
def ort_mul(p, a, b):
    return (mlas.qlmul(*_binary_args(p, a, b), fused=p.impl == "neon_fma") - p.shift).astype(p.dtype)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(np.float32)


def _lut_prepare(fn_of_node):
    def prepare(node, ctx) -> LutPlan:
        xt, yt = ctx.inputs[0], ctx.outputs[0]
        xs, zx = qparams(xt, node, "X")
        ys, zy = qparams(yt, node, "Y")
        table = mlas.lut(fn_of_node(node), xs, zx, xt.dtype, ys, zy, yt.dtype)
        return LutPlan(table.astype(yt.dtype), qrange(xt.dtype)[0])
    return prepare


def _leaky(node):
    alpha = np.float32(node.attrs.get("alpha", 0.01))
    return lambda v: np.where(v >= 0, v, (alpha * v).astype(np.float32)).astype(np.float32)


@ort_kernel("Sigmoid", "ort", _lut_prepare(lambda node: _sigmoid))
def ort_sigmoid(p, x):
    return p.table[np.asarray(x).astype(np.int64) - p.lo]


@ort_kernel("LeakyRelu", "ort", _lut_prepare(_leaky))
def ort_leaky_relu(p, x):
    return p.table[np.asarray(x).astype(np.int64) - p.lo]


def _concat_prepare(node, ctx) -> ConcatPlan:
    yt = ctx.outputs[0]
    ys, zy = qparams(yt, node, "Y")
    tables = []
    for t in ctx.inputs:
        xs, zx = qparams(t, node, "input")
        same = np.float32(xs) == np.float32(ys) and zx == zy and t.dtype == yt.dtype
        tables.append(None if same else (mlas.lut(lambda v: v, xs, zx, t.dtype, ys, zy, yt.dtype)
                                         .astype(yt.dtype), qrange(t.dtype)[0]))
    return ConcatPlan(tables, yt.dtype, int(node.attrs.get("axis", 1)))


@ort_kernel("Concat", "ort", _concat_prepare)
def ort_concat(p, *xs):
    parts = []
    for x, t in zip(xs, p.tables):
        x = np.asarray(x)
        parts.append(x.astype(p.dtype) if t is None else t[0][x.astype(np.int64) - t[1]])
    return np.concatenate(parts, axis=p.axis)


def _where_prepare(node, ctx) -> ConcatPlan:
    return _concat_prepare(node, type(ctx)(ctx.node, ctx.inputs[1:3], ctx.outputs, ctx.settings))


@ort_kernel("Where", "ort", _where_prepare)
def ort_where(p, cond, x, y):
    """QLinearWhere (qlinear_where.cc): x and y are mapped to the output's (scale, zp) through
    identity tables (or copied when their params equal the output's), then selected."""
    vals = []
    for v, t in zip((x, y), p.tables):
        v = np.asarray(v)
        vals.append(v.astype(p.dtype) if t is None else t[0][v.astype(np.int64) - t[1]])
    return np.where(np.asarray(cond, bool), vals[0], vals[1]).astype(p.dtype)
