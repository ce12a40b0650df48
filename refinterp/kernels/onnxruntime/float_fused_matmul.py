"""com.microsoft.FusedMatMul variant ``ort_float``: ONNX Runtime 1.32's CPU kernel (a MatMul<float>
with alpha, transA, transB), as ORT's MatmulTransposeFusion / MatMulScaleFusion make it from an
exporter's Transpose -> MatMul -> Mul / Div by a constant (passes/ort_matmul.py).

Numeric contract (float32): y = alpha * op(A) @ op(B) with op a swap of the last two axes (ignored
for 1-D operands), in MLAS's SGEMM order (float_sgemm.py): one FMA chain per output and K block,
the first block stored as fl(acc * alpha), later ones fma(acc, alpha, C) -- alpha is applied once
per K block, never to the finished sum, so alpha * (A @ B) rounds differently from the unfused
MatMul then Mul / Div.  A constant 2-D B is prepacked (MlasGemmPackB, transB applied when packing):
MLAS's packed-B order with K blocks of 256.  A run-time B takes MlasGemmBatch with ORT's thread
split; with alpha 1 the M1 kernels are taken as for MatMul (the row M1 kernel is not modelled: such
nodes run the generic kernel).  transBatchA / transBatchB move an operand's axis 0 behind its batch
axes first (ORT passes strides, MLAS computes each product the same).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import MS
from .contrib import swap_last_two, trans_batch
from .float_conv import physical_cores
from .float_matmul import VARIANT, sgemm_matmul
from .float_sgemm import mlas_sgemm_packed
from ..registry import Delegate, kernel, require

_F32 = np.float32


@dataclass(frozen=True)
class OrtFusedMatMulPlan:
    name: str
    alpha: float
    trans_a: bool
    trans_b: bool
    trans_batch_a: bool
    trans_batch_b: bool
    threads: int
    packed_b: np.ndarray | None  # op(B) of a constant 2-D B, (K, N) float32
    fallback: Any                # Delegate to the generic FusedMatMul

    def describe(self) -> dict:
        order = "MLAS packed-B SGEMM order (constant B)" if self.packed_b is not None else "MLAS SGEMM order"
        return {"executed_by": f"FusedMatMul, {order}", "alpha": self.alpha, "transA": int(self.trans_a),
                "transB": int(self.trans_b), "threads": self.threads}


def _prepare(node, ctx):
    kk = require(MS + "FusedMatMul", "float")
    d = Delegate(kk, kk.prepare(node, ctx))
    a, b = (list(ctx.inputs) + [None, None])[:2]
    if a is None or b is None or a.dtype != "float32" or b.dtype != "float32" or a.quant is not None \
            or b.quant is not None:
        return d
    ta, tb = bool(int(node.attrs.get("transA", 0))), bool(int(node.attrs.get("transB", 0)))
    alpha = float(_F32(node.attrs.get("alpha", 1.0)))
    tba, tbb = bool(int(node.attrs.get("transBatchA", 0))), bool(int(node.attrs.get("transBatchB", 0)))
    packed = None
    if b.const is not None and np.ndim(b.const) == 2 and not (tba or tbb):
        packed = np.ascontiguousarray(np.asarray(b.const, _F32).T if tb else b.const, _F32)
    return OrtFusedMatMulPlan(node.name, alpha, ta, tb, tba, tbb, physical_cores(), packed, d)


@kernel(MS + "FusedMatMul", VARIANT, prepare=_prepare)
def ort_fused_matmul(plan, a, b):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, a, b)
    a0, b0 = np.asarray(a), np.asarray(b)
    a, b = trans_batch(a0, plan.trans_batch_a), trans_batch(b0, plan.trans_batch_b)
    y = None
    if a.dtype == _F32 and b.dtype == _F32 and a.ndim >= 2:
        ta = plan.trans_a
        aa = swap_last_two(a, ta)
        if plan.packed_b is not None and aa.shape[-1] == plan.packed_b.shape[0]:
            y = mlas_sgemm_packed(aa.reshape(-1, aa.shape[-1]), plan.packed_b, plan.alpha)
            y = y.reshape(aa.shape[:-1] + (plan.packed_b.shape[1],))
        elif plan.packed_b is None and b.ndim >= 2:
            y = sgemm_matmul(plan.threads, aa, swap_last_two(b, plan.trans_b), plan.alpha, ta, plan.trans_b)
    return y if y is not None else plan.fallback.kernel.run(plan.fallback.plan, a0, b0)
