"""Element-wise / pooling / quantize kernels of the documented (not runtime-verified) schemes.

* Add: ``dpu`` y = DPU_ROUND(sum x_i * 2^(fp_out - fp_i)) (one rounding); ``glow_cpu`` two
  independent integer transforms l = T(a - za, sa/sc), r = T(b - zb, sb/sc), y = clip(l + r + zc);
  ``glow_interp`` L = round(f32((a - za) * f32(sa / 2^-15))), R likewise,
  y = clip(round(f32(f32((L + R) * f32(2^-15 / sc)) + zc))) (std::round, half away);
  ``tvm_qnn`` y = clip(rq(a - za, sa/sc) + rq(b - zb, sb/sc) + zc) (two roundings, ``impl``).
* dpu LeakyRelu: DPU_ROUND(x * 2^(fp_out - fp_in) * (x < 0 ? 26/256 : 1)) (alpha fixed to 26/256).
* dpu AveragePool (no padding) / GlobalAveragePool: sum * k / 2^n (vitis.avgpool_factor), DPU_ROUND.
* dpu QuantizeLinear: clamp(DPU_ROUND(x * 2^fp)).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from refinterp.errors import UnsupportedOpError
from refinterp.quant import glow, tvmqnn, vitis
from ..float import quantize as float_quantize
from ..onnxruntime.common import ort_kernel
from ..tflite.common import qparams, qrange, where
from .gemm import TVM_IMPLS
from ..registry import kernel

F32 = np.float32


def _fp(node, s) -> int:
    try:
        return vitis.fix_pos(s)
    except ValueError as e:
        raise UnsupportedOpError(f"{where(node)}: {e} (the DPU uses power-of-two scales)") from None


@dataclass(frozen=True)
class DocAddPlan:
    a: tuple[float, int]  # (scale, zero point) of A, B, C
    b: tuple[float, int]
    c: tuple[float, int]
    dtype: str
    rounding: str  # tvm_qnn: the requantize rounding
    lo: int
    hi: int
    fps: tuple[int, int] = (0, 0)  # dpu: input fix positions
    fo: int = 0  # dpu: output fix position
    ta: tuple = ()  # glow_cpu: scale transforms of A and B
    tb: tuple = ()


@dataclass(frozen=True)
class DpuUnaryPlan:
    fi: int  # fix positions
    fo: int
    dtype: str
    node: Any
    k: tuple = ()  # pooling window and strides
    s: tuple = ()


def _add_prepare(node, ctx) -> DocAddPlan:
    """tvm_qnn: the scheme's ``impl`` picks the rounding."""
    impl = (ctx.settings or {}).get("impl") or "upward"
    if impl not in TVM_IMPLS:
        raise UnsupportedOpError(f"{where(node)}: impl '{impl}' is not one of {', '.join(TVM_IMPLS)}")
    return _add_params(node, ctx, impl)


def _add_params(node, ctx, impl: str = "upward") -> DocAddPlan:
    """The quantization of A, B and C (dpu / glow kernels: no setting read)."""
    dt = ctx.outputs[0].dtype
    return DocAddPlan(qparams(ctx.inputs[0], node, "A"), qparams(ctx.inputs[1], node, "B"),
                      qparams(ctx.outputs[0], node, "C"), dt, TVM_IMPLS[impl], *qrange(dt))


def _ints(a, b):
    return np.broadcast_arrays(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))


def _dpu_add_prepare(node, ctx) -> DocAddPlan:
    p = _add_params(node, ctx)
    if p.a[1] or p.b[1] or p.c[1]:
        raise UnsupportedOpError(f"{where(node)}: the DPU needs zero points 0")
    return replace(p, fps=(_fp(node, p.a[0]), _fp(node, p.b[0])), fo=_fp(node, p.c[0]))


@ort_kernel("Add", "dpu", _dpu_add_prepare)
def dpu_add(p, a, b):
    return vitis.eltwise_add(list(_ints(a, b)), list(p.fps), p.fo).astype(p.dtype)


def _glow_add_prepare(node, ctx) -> DocAddPlan:
    p = _add_params(node, ctx)
    sc = F32(p.c[0])
    return replace(p, ta=tuple(glow.scale_transform(float(F32(p.a[0]) / sc))),
                   tb=tuple(glow.scale_transform(float(F32(p.b[0]) / sc))))


@ort_kernel("Add", "glow_cpu", _glow_add_prepare)
def glow_cpu_add(p, a, b):
    a, b = _ints(a, b)
    y = glow.transform(a - p.a[1], *p.ta) + glow.transform(b - p.b[1], *p.tb) + p.c[1]
    return np.clip(y, p.lo, p.hi).astype(p.dtype)


_LARGE = F32(2.0 ** -15)


@ort_kernel("Add", "glow_interp", _add_params)
def glow_interp_add(p, a, b):
    a, b = _ints(a, b)
    la = glow.round_half_away(((a - p.a[1]).astype(F32) * F32(F32(p.a[0]) / _LARGE)).astype(F32))
    lb = glow.round_half_away(((b - p.b[1]).astype(F32) * F32(F32(p.b[0]) / _LARGE)).astype(F32))
    return glow.interp_requant(la + lb, F32(_LARGE / F32(p.c[0])), p.c[1], p.lo, p.hi).astype(p.dtype)


@ort_kernel("Add", "tvm_qnn", _add_prepare, tuple(TVM_IMPLS))
def tvm_add(p, a, b):
    a, b = _ints(a, b)
    sc = np.float64(F32(p.c[0]))
    y = (tvmqnn.requantize(a - p.a[1], float(np.float64(F32(p.a[0])) / sc), p.rounding)
         + tvmqnn.requantize(b - p.b[1], float(np.float64(F32(p.b[0])) / sc), p.rounding) + p.c[1])
    return np.clip(y, p.lo, p.hi).astype(p.dtype)


def _dpu_unary_prepare(node, ctx) -> DpuUnaryPlan:
    (xs, zx), (ys, zy) = qparams(ctx.inputs[0], node, "X"), qparams(ctx.outputs[0], node, "Y")
    if zx or zy:
        raise UnsupportedOpError(f"{where(node)}: the DPU needs zero points 0")
    p = DpuUnaryPlan(_fp(node, xs), _fp(node, ys), ctx.outputs[0].dtype, node)
    if node.op in ("AveragePool", "GlobalAveragePool"):
        pads = tuple(node.attrs.get("pads") or (0, 0, 0, 0))
        if any(pads) or (node.attrs.get("layout") or "NCHW") != "NCHW":
            raise UnsupportedOpError(f"{where(node)}: only unpadded NCHW pooling is modelled for the DPU")
        p = replace(p, k=tuple(node.attrs.get("kernel_shape") or ()), s=tuple(node.attrs.get("strides") or (1, 1)))
    return p


@ort_kernel("LeakyRelu", "dpu", _dpu_unary_prepare)
def dpu_leaky_relu(p, x):
    return vitis.leaky_relu_fix(np.asarray(x).astype(np.int64), p.fi, p.fo).astype(p.dtype)


@ort_kernel("AveragePool", "dpu", _dpu_unary_prepare)
def dpu_avgpool(p, x):
    (kh, kw), (sh, sw) = p.k, p.s
    s = sliding_window_view(np.asarray(x).astype(np.int64), (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw].sum(axis=(-1, -2))
    return vitis.avgpool_fix(s, kh, kw, p.fi, p.fo).astype(p.dtype)


@ort_kernel("GlobalAveragePool", "dpu", _dpu_unary_prepare)
def dpu_gap(p, x):
    x = np.asarray(x).astype(np.int64)
    kh, kw = x.shape[2], x.shape[3]
    return vitis.avgpool_fix(x.sum(axis=(2, 3), keepdims=True), kh, kw, p.fi, p.fo).astype(p.dtype)


@kernel("QuantizeLinear", "dpu", prepare=float_quantize.ql_prepare, raw_inputs=True)
def dpu_quantize(plan, x, scale, zp=None):
    dt, lo, hi = plan.target
    s = np.asarray(scale, np.float32)
    if s.size != 1 or np.dtype(dt) != np.int8 or (zp is not None and np.any(np.asarray(zp))):
        return float_quantize.quantize_linear(plan, x, scale, zp)
    return vitis.quantize_fix(x, vitis.fix_pos(s.reshape(-1)[0])).astype(dt)
