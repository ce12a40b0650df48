"""Gemm variant ``ort_float``: ONNX Runtime CPU's float32 Gemm with a constant B, which ORT prepacks
(onnxruntime/core/providers/cpu/math/gemm.cc Gemm<float>::PrePack / Compute, gemm_helper.h
GemmBroadcastBias; MLAS sgemm.cpp MlasSgemmPackedOperation).  Numeric contract, float32, for
Y = alpha * A' B' + beta * C with B' = B or B^T constant:

    Y0 = C broadcast to (M, N) as stored (GemmBroadcastBias), then f32(Y0 * beta) when beta is not
         0 or 1 (MlasSgemmMultiplyBeta); no C, or beta 0: nothing (the kernel's zero mode)
    K in blocks of 256; per block an FMA chain acc = fma(a[m,k], b[k,n], acc) in increasing k from +0
    first block:  Y = fma(acc, alpha, Y0) with C,  else f32(acc * alpha)
    later blocks: Y = fma(acc, alpha, Y)

(alpha 1: one addition per block, as in float_sgemm.py).

A run-time B (not prepacked: what ORT's MatMulAddFusion makes of a MatMul with a 2-D run-time B, or a
Gemm fed one) runs MLAS's unpacked SGEMM on the session's intra-op threads, float_sgemm.mlas_sgemm with
C = the broadcast bias and beta 1 (the M1 kernels for one-row segments); beta other than 0 and 1 with a
run-time B, and quantized Gemms, run the generic kernels (``float`` / ``ort``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import is_quantized
from .float_conv import physical_cores
from .float_sgemm import PACKED_STRIDE_K, _sgemm_segment, mlas_sgemm
from ..registry import Delegate, kernel, require

F32 = np.float32


@dataclass(frozen=True)
class OrtPackedGemmPlan:
    b: np.ndarray  # (K, N) float32: B after transB
    trans_a: bool
    alpha: float
    beta: float
    fallback: Any  # Delegate to the generic float Gemm (inputs it does not take: its own errors)

    def describe(self) -> dict:
        return {"executed_by": "MLAS packed-B SGEMM order (constant B)"}


@dataclass(frozen=True)
class OrtSgemmGemmPlan:
    trans_a: bool
    trans_b: bool
    alpha: float
    beta: float           # 0 or 1 (others run the generic kernel)
    threads: int
    fallback: Any

    def describe(self) -> dict:
        return {"executed_by": "MLAS SGEMM order (unpacked B)", "threads": self.threads}


def _prepare(node, ctx):
    quantized = any(is_quantized(t) for t in ctx.inputs if t is not None) or any(is_quantized(t) for t in ctx.outputs)
    fk = require("Gemm", "ort" if quantized else "float")
    d = Delegate(fk, fk.prepare(node, ctx))
    a = ctx.inputs[0] if ctx.inputs else None
    b = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    if quantized or a is None or b is None or a.dtype != "float32" or b.dtype != "float32":
        return d
    if b.const is None:
        if float(node.attrs.get("beta", 1.0)) not in (0.0, 1.0):
            return d
        return OrtSgemmGemmPlan(bool(int(node.attrs.get("transA", 0))), bool(int(node.attrs.get("transB", 0))),
                                float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0)),
                                physical_cores(), d)
    if np.ndim(b.const) != 2:
        return d
    bb = np.asarray(b.const, F32)
    if int(node.attrs.get("transB", 0)):
        bb = bb.T
    return OrtPackedGemmPlan(np.ascontiguousarray(bb), bool(int(node.attrs.get("transA", 0))),
                             float(node.attrs.get("alpha", 1.0)), float(node.attrs.get("beta", 1.0)), d)


@kernel("Gemm", "ort_float", prepare=_prepare)
def ort_gemm(plan, a, b=None, c=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, a, b, c)
    if isinstance(plan, OrtSgemmGemmPlan):
        return _unpacked(plan, a, b, c)
    given = np.asarray(a)
    if given.dtype != F32 or given.ndim != 2 or given.shape[0 if plan.trans_a else 1] != plan.b.shape[0]:
        return plan.fallback.kernel.run(plan.fallback.plan, a, b, c)
    a = np.ascontiguousarray(given.T if plan.trans_a else given)
    m, n = a.shape[0], plan.b.shape[1]
    if c is not None and np.size(c) > 0:
        try:
            np.broadcast_shapes(np.shape(c), (m, n))
        except ValueError:
            return plan.fallback.kernel.run(plan.fallback.plan, given, b, c)
    has_c = c is not None and np.size(c) > 0 and plan.beta != 0.0
    y = np.zeros((m, n), F32)
    if has_c:
        y[:] = np.broadcast_to(np.asarray(c, F32), (m, n))
    if a.shape[1] == 0:  # ORT skips MlasGemm: C as broadcast, beta not applied
        return y
    if has_c and plan.beta != 1.0:
        y = (y * F32(plan.beta)).astype(F32)
    _sgemm_segment(a, plan.b, y, 0, m, 0, n, PACKED_STRIDE_K, has_c, plan.alpha)
    return y


def _unpacked(plan: OrtSgemmGemmPlan, a, b, c):
    """ORT's Gemm with a run-time B: C broadcast into Y, then MlasGemm with beta 1 (0 without C)."""
    a0, b0 = np.asarray(a), np.asarray(b)
    if a0.dtype != F32 or b0.dtype != F32 or a0.ndim != 2 or b0.ndim != 2:
        return plan.fallback.kernel.run(plan.fallback.plan, a, b, c)
    al = a0.T if plan.trans_a else a0
    bl = b0.T if plan.trans_b else b0
    if al.shape[1] != bl.shape[0]:
        return plan.fallback.kernel.run(plan.fallback.plan, a, b, c)
    m, n = al.shape[0], bl.shape[1]
    y = None
    if c is not None and np.size(c) > 0 and plan.beta != 0.0:
        try:
            y = np.ascontiguousarray(np.broadcast_to(np.asarray(c, F32), (m, n)), dtype=F32).copy()
        except ValueError:
            return plan.fallback.kernel.run(plan.fallback.plan, a, b, c)
    if al.shape[1] == 0:
        return y if y is not None else np.zeros((m, n), F32)
    return mlas_sgemm(al, bl, plan.threads, plan.alpha, plan.trans_a, plan.trans_b, c=y)
