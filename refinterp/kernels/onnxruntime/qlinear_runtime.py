"""QLinearConv / QLinearMatMul whose scales or zero points are graph inputs (computed or fed at run
time, as in ONNX's own node conformance cases): the loader keeps such a node as
``QLinearConvRuntime`` / ``QLinearMatMulRuntime`` with its original nine / eight inputs, and the
parameters are read per run.

``float`` and ``onnx_ref`` (onnx.reference, the spec's arithmetic): acc = int32 sums of
(x - x_zp) (w - w_zp) (+ bias for Conv), then ``acc * (x_scale * w_scale / y_scale)`` in the scales'
own NumPy types (float32 scales: the multiplier is float32, the product float64; float16 scales:
float16 multiplier), ``+ y_zp``, clip to the output type, round half to even.

``ort`` (ONNX Runtime CPU): the multiplier in float32, then ``MlasRequantizeOutput``
(``quant/mlas.py``: float32(acc) * multiplier, clamp, round half to even, + y_zp).
Per-channel weight scales / zero points (Conv: axis 0 of W; MatMul: the last axis of B) are
applied per output channel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import InputError
from refinterp.quant import mlas
from ..float import conv as float_conv
from ..registry import kernel


@dataclass(frozen=True)
class RuntimeQPlan:
    where: str
    conv: Any  # the float Conv geometry (QLinearConvRuntime), else None
    ort: bool  # MLAS requantization (ONNX Runtime) instead of the onnx.reference formula


def _int(v, zp):
    a = np.asarray(v).astype(np.int32)
    return a if zp is None else a - np.asarray(zp).astype(np.int32)


def _acc_conv(plan, x, xz, w, wz, bias):
    wz_arr = None if wz is None else np.asarray(wz).astype(np.int32)
    wi = np.asarray(w).astype(np.int32)
    if wz_arr is not None:
        wi = wi - (wz_arr.reshape((-1,) + (1,) * (wi.ndim - 1)) if wz_arr.size > 1 else wz_arr.reshape(()))
    xi = _int(x, xz)
    # float64 sums of int32 products are exact below 2^53
    acc = float_conv.run_plan(plan.conv, xi.astype(np.float64), wi.astype(np.float64))
    if bias is not None:
        acc = acc + np.asarray(bias, np.float64).reshape((1, -1) + (1,) * (acc.ndim - 2))
    return acc.astype(np.int64).astype(np.int32)


def _acc_matmul(a, az, b, bz):
    return np.matmul(_int(a, az).astype(np.int64), _int(b, bz).astype(np.int64)).astype(np.int32)


def _channel(scale, ndim: int, axis: int):
    s = np.asarray(scale)
    if s.size <= 1:
        return s.reshape(())
    shape = [1] * ndim
    shape[axis] = s.size
    return s.reshape(shape)


def _finish(plan, acc, xs, ws, ys, yz, fallback_dtype, axis):
    dtype = np.asarray(yz).dtype if yz is not None else np.dtype(fallback_dtype)
    info = np.iinfo(dtype)
    ws = _channel(ws, acc.ndim, axis)
    zp = np.asarray(yz).astype(np.int64).reshape(()) if yz is not None else np.int64(0)
    if plan.ort:
        mult = (np.float32(np.asarray(xs).reshape(())) * np.asarray(ws, np.float32)) / np.float32(
            np.asarray(ys).reshape(()))
        return mlas.requant_mlas(acc, mult, int(zp), int(info.min), int(info.max)).astype(dtype)
    r = acc * (np.asarray(xs) * ws / np.asarray(ys))
    if yz is not None:
        r = r + np.asarray(yz)
    return np.clip(np.rint(r), info.min, info.max).astype(dtype)


def _prepare_variant(ort: bool):
    def prepare(node, ctx) -> RuntimeQPlan:
        conv = float_conv.prepare_node(node, ctx) if node.op == "QLinearConvRuntime" else None
        return RuntimeQPlan(f"node '{node.name}' ({node.source_op or node.op})", conv, ort)
    return prepare


def _conv_run(plan, x, xs, xz, w, ws, wz, ys, yz, bias=None):
    if np.asarray(ws).size > 1 and np.asarray(ws).size != np.shape(w)[0]:
        raise InputError(f"{plan.where}: {np.asarray(ws).size} weight scales for {np.shape(w)[0]} output channels")
    return _finish(plan, _acc_conv(plan, x, xz, w, wz, bias), xs, ws, ys, yz, np.asarray(x).dtype, 1)


def _matmul_run(plan, a, as_, az, b, bs, bz, ys, yz):
    acc = _acc_matmul(a, az, b, bz)
    return _finish(plan, acc, as_, bs, ys, yz, np.asarray(a).dtype, acc.ndim - 1)


for _variants, _ort in ((("float", "onnx_ref"), False), ("ort", True)):
    kernel("QLinearConvRuntime", _variants, prepare=_prepare_variant(_ort), raw_inputs=True)(_conv_run)
    kernel("QLinearMatMulRuntime", _variants, prepare=_prepare_variant(_ort), raw_inputs=True)(_matmul_run)
