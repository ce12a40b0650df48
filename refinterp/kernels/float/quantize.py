"""Quantize / dequantize kernels: ONNX QuantizeLinear / DequantizeLinear and TFLite QUANTIZE /
DEQUANTIZE.  All take stored integers as they are (``raw_inputs``).

Numeric contracts
* QuantizeLinear (ONNX, = onnx.reference): ``q = clip(rint(x / scale) + zp, qmin, qmax)`` with the
  division in NumPy's promotion of x and scale (float32 / float32 stays float32; ``precision``
  overrides), rint = round half to even.  int4/uint4 are stored in int8/uint8 with [-8, 7] / [0, 15].
* DequantizeLinear (ONNX): ``(float32(q) - zp) * scale`` (NumPy promotion: an int32 zero point makes
  the subtraction float64), cast to ``output_dtype`` or the scale's dtype.
* Quantize (TFLite): float -> int ``clamp(round_half_away(float32(x) / float32(scale)) + zp)``;
  int -> int dequantizes with the input params (float32) and quantizes with the output params.
* Dequantize (TFLite): ``float32(float64(scale) * (q - zp))``; float16 -> float32 is a plain cast.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.ir import Node, QuantParams, dequantize
from refinterp.settings import fast_kernels
from ..onnxruntime.quantize_fast import fast_dequantize, fast_quantize
from ..registry import PrepareContext, kernel
from ..int.shape import where

# Quantized integer targets: TensorProto code / dtype name -> (storage dtype, qmin, qmax).
_TARGETS = {
    "uint8": (np.uint8, 0, 255), "int8": (np.int8, -128, 127),
    "uint16": (np.uint16, 0, 65535), "int16": (np.int16, -32768, 32767),
    "int32": (np.int32, -2 ** 31, 2 ** 31 - 1),
    "uint4": (np.uint8, 0, 15), "int4": (np.int8, -8, 7),
    "uint2": (np.uint8, 0, 3), "int2": (np.int8, -2, 1),
}
_ONNX_CODES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 21: "uint4", 22: "int4",
               25: "uint2", 26: "int2", 1: "float32", 10: "float16", 11: "float64"}
_SUB_BYTE = ("int4", "uint4", "int2", "uint2")
_FAST = fast_kernels()


def _dtype_name(info) -> str | None:
    return None if info is None or not info.dtype else str(info.dtype)


def _onnx_target(node: Node, ctx: PrepareContext) -> str:
    """Output type of QuantizeLinear: zero point's type, else output_dtype, else uint8.

    Sub-byte types are recognised from the TensorInfo dtype names the loader writes
    ("int4", "uint4", ...) on the zero point or the output.
    """
    zp_info = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    out_info = ctx.outputs[0] if ctx.outputs else None
    for name in (_dtype_name(zp_info), _dtype_name(out_info)):
        if name in _SUB_BYTE:
            return name
    if zp_info is not None:
        return np.dtype(zp_info.dtype).name if zp_info.dtype not in _TARGETS else zp_info.dtype
    code = int(node.attr("output_dtype", 0) or 0)
    if code:
        if code not in _ONNX_CODES:
            raise UnsupportedOpError(f"{where(node)}: QuantizeLinear output_dtype {code} is not supported")
        return _ONNX_CODES[code]
    name = _dtype_name(out_info)
    return name if name in _TARGETS else "uint8"


def reshape_param(v: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """Scale / zero point shaped to broadcast against x: scalar, per-axis or blocked (ONNX)."""
    if v.ndim == 0:
        return v
    if v.size == 1:
        return v.reshape(-1)[0]
    axis %= len(shape)
    if not block:
        view = [1] * len(shape)
        view[axis] = v.size
        return v.reshape(view)
    rep = np.repeat(v, block, axis=axis)
    return np.take(rep, np.arange(shape[axis]), axis=axis)


@dataclass(frozen=True)
class QuantizeLinearPlan:
    axis: int
    block: int  # block_size (0: per tensor / per axis)
    target: tuple  # (storage dtype, qmin, qmax)
    precision: np.dtype | None  # the division's dtype (ONNX ``precision``), None: that of x


@dataclass(frozen=True)
class DequantizeLinearPlan:
    axis: int
    block: int
    out: np.dtype | None  # output_dtype, None: the scale's


@dataclass(frozen=True)
class TfliteQuantizePlan:
    out_q: QuantParams
    target: tuple  # (storage dtype, qmin, qmax)
    in_q: QuantParams | None  # requantize from this when the input is integer


@dataclass(frozen=True)
class TfliteDequantizePlan:
    q: QuantParams | None


def ql_prepare(node: Node, ctx: PrepareContext) -> QuantizeLinearPlan:
    target = _onnx_target(node, ctx)
    if target not in _TARGETS:
        raise UnsupportedOpError(f"{where(node)}: QuantizeLinear to {target} is not supported")
    prec = int(node.attr("precision", 0) or 0)
    if prec and prec not in (1, 10, 11):
        raise UnsupportedOpError(f"{where(node)}: QuantizeLinear precision {prec} is not supported")
    return QuantizeLinearPlan(int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0), _TARGETS[target],
                              np.dtype(_ONNX_CODES[prec]) if prec else None)


@kernel("QuantizeLinear", "float", prepare=ql_prepare, raw_inputs=True)
def quantize_linear(plan, x, scale, zp=None):
    y = fast_quantize(plan, x, scale, zp) if _FAST else None  # None: not covered (NumPy path)
    if y is not None:
        return y
    dt, lo, hi = plan.target
    s = reshape_param(np.asarray(scale), x.shape, plan.axis, plan.block)
    if plan.precision is not None:
        v = x.astype(plan.precision) / np.asarray(s).astype(plan.precision)
    else:
        v = x / s
    with np.errstate(invalid="ignore"):
        r = np.rint(v).astype(np.float64)
        r = np.where(np.isnan(r), -2.0 ** 31, r)  # NaN behaves like the x86 int32 conversion
    if zp is not None:
        r = r + reshape_param(np.asarray(zp), x.shape, plan.axis, plan.block).astype(np.float64)
    return np.clip(r, lo, hi).astype(dt)


def dql_prepare(node: Node, ctx: PrepareContext) -> DequantizeLinearPlan:
    code = int(node.attr("output_dtype", 0) or 0)
    out = None
    if code:
        if code not in (1, 10, 11):
            raise UnsupportedOpError(f"{where(node)}: DequantizeLinear output_dtype {code} is not supported")
        out = np.dtype(_ONNX_CODES[code])
    return DequantizeLinearPlan(int(node.attr("axis", 1)), int(node.attr("block_size", 0) or 0), out)


@kernel("DequantizeLinear", "float", prepare=dql_prepare, raw_inputs=True)
def dequantize_linear(plan, x, scale, zp=None):
    scale = np.asarray(scale)
    if x.dtype.kind == "f":  # produced by a float-compute node: already the real value
        return x.astype(plan.out if plan.out is not None else scale.dtype, copy=False)
    y = fast_dequantize(plan, x, scale, zp) if _FAST else None
    if y is not None:
        return y
    dx = x.astype(np.float32)
    if zp is not None:
        dx = dx - reshape_param(np.asarray(zp), x.shape, plan.axis, plan.block)
    y = dx * reshape_param(scale, x.shape, plan.axis, plan.block)
    return np.asarray(y).astype(plan.out if plan.out is not None else scale.dtype)


# -- TFLite QUANTIZE / DEQUANTIZE --------------------------------------------------------------

def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + v.dtype.type(0.5))


def _tfl_quantize_prepare(node: Node, ctx: PrepareContext) -> TfliteQuantizePlan:
    out = ctx.outputs[0]
    if out.quant is None:
        raise UnsupportedOpError(f"{where(node)}: Quantize output '{out.name}' has no quantization")
    name = str(out.dtype)
    if name not in _TARGETS:
        raise UnsupportedOpError(f"{where(node)}: Quantize to {name} is not supported")
    src = ctx.inputs[0] if ctx.inputs else None
    return TfliteQuantizePlan(out.quant, _TARGETS[name], src.quant if src is not None and src.quant is not None else None)


@kernel("Quantize", "float", prepare=_tfl_quantize_prepare, raw_inputs=True)
def _tfl_quantize(plan, x):
    dt, lo, hi = plan.target
    if x.dtype.kind in "iu":
        in_q: QuantParams | None = plan.in_q
        x = dequantize(x, in_q) if in_q is not None else x.astype(np.float32)
    x = x.astype(np.float32, copy=False)
    s, z = plan.out_q.broadcast(x.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = _round_half_away((x / s.astype(np.float32)).astype(np.float32))
    r = v.astype(np.float64) + z
    return np.clip(np.nan_to_num(r, nan=lo), lo, hi).astype(dt)


def _tfl_dequantize_prepare(node: Node, ctx: PrepareContext) -> TfliteDequantizePlan:
    src = ctx.inputs[0] if ctx.inputs else None
    return TfliteDequantizePlan(None if src is None else src.quant)


@kernel("Dequantize", "float", prepare=_tfl_dequantize_prepare, raw_inputs=True)
def _tfl_dequantize(plan, x):
    if x.dtype.kind == "f" or plan.q is None:
        return x.astype(np.float32)
    s, z = plan.q.broadcast(x.shape)
    return (s.astype(np.float64) * (x.astype(np.int64) - z)).astype(np.float32)
