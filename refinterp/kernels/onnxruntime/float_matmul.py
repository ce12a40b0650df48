"""MatMul variant ``ort_float``: ONNX Runtime 1.32 CPU ``MatMulNBits`` with 8-bit weights, as the
``dq_matmul_nbits`` pass (passes/qdq.py) makes it from DQ(int8/uint8 constant weight) -> MatMul (or
a Gemm without transposes, alpha 1, whose C is a bias of N values: a third input here).

What ORT 1.32.0 does (measured on x86-64 AVX-512 VNNI; session defaults block_size 32,
accuracy_level 4): the weight is prepacked and the product takes MLAS's CompInt8 path, i.e. the float
activation A is quantized per row and per 32-element block of K:

    amax = max |a| over the block (float32);  sa = f32(amax / 127)
    q    = round_half_even(f32(a * f32(127 / amax)))   (0 when amax == 0)

and, with B stored as uint8 codes bu (int8 weights + 128, zero point + 128),

    y = f32( sum_blocks f32(sa * sb) * dot(q, bu)  +  sum_blocks f32(sa * sum(q)) * f32(-sb * zpu) )

(the second sum is MLAS's block-sum correction for the zero point, an SGEMM added to C), in the
order of MLAS's AVX-512 VNNI kernel: partials of 8 products in 16 float lanes, FMA per 4-block group,
the lanes folded as the kernel folds them (nbits_compint8.py has the exact contract).

A float32 MatMul whose B is computed at run time (e.g. the output of a DequantizeLinear with ORT's
optimizer off, or an activation) follows MLAS's unpacked SGEMM order (float_sgemm.py): with a 2-D B,
one GEMM over every leading row of A (MatMulComputeHelper merges them); with batched B, one GEMM per
batch, MlasGemmBatch splitting ceil(T / batches) threads over each (T from one GEMM's M*N*K).  A
constant 2-D B is prepacked by ORT: MLAS's packed-B order (float_sgemm.mlas_sgemm_packed, K blocks
of 256, no M1 kernels).  Vector products with a run-time B take MLAS's M1 kernels: those, quantized
MatMul nodes (``ort``) and every other case run the generic kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import InputError
from .common import is_quantized
from .float_conv import physical_cores
from .float_sgemm import THREAD_COMPLEXITY, mlas_sgemm, mlas_sgemm_packed
from .nbits_compint8 import compint8_matmul
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
BLOCK = 32  # ORT's default session.qdq_matmulnbits_block_size
_F32 = np.float32


@dataclass(frozen=True)
class OrtNBitsMatMulPlan:
    name: str
    bt: np.ndarray   # (N, blocks * BLOCK) int32: uint8 weight codes, K padded with zeros
    sb: np.ndarray   # (N,) float32 scale per column
    nzs: np.ndarray  # (N,) float32: f32(-sb * zpu), the block-sum factor of the zero point
    k: int

    def describe(self) -> dict:
        return {"executed_by": "MatMulNBits 8-bit CompInt8 (A int8 per 32-block; MLAS AVX-512 VNNI order)",
                "block_size": BLOCK, "K": self.k, "N": int(self.sb.size)}


def _prepare(node, ctx):
    if node.attrs.get("dq_weight"):
        info = ctx.inputs[1]
        w = np.asarray(info.const)
        k, n = w.shape
        shift = 128 if w.dtype == np.int8 else 0
        qp = info.quant
        sb = np.broadcast_to(np.asarray(qp.scale, _F32).ravel(), (n,)).astype(_F32)
        zpu = np.broadcast_to(np.asarray(qp.zero_point, np.int64).ravel(), (n,)) + shift
        nb = -(-k // BLOCK)
        bu = np.zeros((nb * BLOCK, n), np.int64)
        bu[:k] = w.astype(np.int64) + shift
        nzs = (-sb.astype(np.float64) * zpu).astype(_F32)  # one rounding: zpu is a small integer
        return OrtNBitsMatMulPlan(node.name, np.ascontiguousarray(bu.T, np.int32), sb, nzs, k)
    if any(is_quantized(t) for t in ctx.inputs) or any(is_quantized(t) for t in ctx.outputs):
        kk = require("MatMul", "ort")
    else:
        kk = require("MatMul", "float")
    d = Delegate(kk, kk.prepare(node, ctx))
    a, b = (list(ctx.inputs) + [None, None])[:2]
    if kk.variant == "float" and a is not None and b is not None and a.dtype == b.dtype == "float32":
        if b.const is None:
            return OrtSgemmMatMulPlan(node.name, physical_cores(), d)
        if np.ndim(b.const) == 2:
            return OrtPackedMatMulPlan(node.name, np.ascontiguousarray(b.const, _F32), d)
    return d


@dataclass(frozen=True)
class OrtPackedMatMulPlan:
    """A constant 2-D B, prepacked by ORT (MlasGemmPackB): MLAS's packed-B SGEMM order."""
    name: str
    b: np.ndarray
    fallback: Any

    def describe(self) -> dict:
        return {"executed_by": "MLAS packed-B SGEMM order (constant B)"}


@dataclass(frozen=True)
class OrtSgemmMatMulPlan:
    name: str
    threads: int
    fallback: Any  # Delegate to the generic float MatMul

    def describe(self) -> dict:
        return {"executed_by": "MLAS SGEMM order (unpacked B)", "threads": self.threads}


def sgemm_matmul(threads: int, a: np.ndarray, b: np.ndarray, alpha: float = 1.0,
                 trans_a: bool = False, trans_b: bool = False):
    """float32 alpha * a @ b (numpy broadcasting; ``a`` / ``b`` the logical operands, ``trans_*``:
    how ORT hands them to MLAS) in MatMul<float>'s MLAS order, or None where it is not modelled."""
    if a.ndim < 2 or b.ndim < 2:
        return None
    k = a.shape[-1]
    if b.shape[-2] != k:
        return None
    if b.ndim == 2 and not trans_a:  # MatMulComputeHelper folds A's leading dimensions into M
        y = mlas_sgemm(a.reshape(-1, k), b, threads, alpha, trans_a, trans_b)
        return None if y is None else y.reshape(a.shape[:-1] + (b.shape[1],))
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    aa = np.broadcast_to(a, lead + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    bb = np.broadcast_to(b, lead + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    m, n, batches = a.shape[-2], b.shape[-1], aa.shape[0]
    target = min(int(float(m) * float(n) * float(k) / THREAD_COMPLEXITY) + 1, max(1, threads))
    per_gemm = -(-target // batches)
    outs = []
    for i in range(batches):
        y = mlas_sgemm(aa[i], bb[i], per_gemm, alpha, trans_a, trans_b)
        if y is None:
            return None
        outs.append(y)
    return np.stack(outs).reshape(lead + (m, n))


def quantize_a_blocks(a2: np.ndarray, k: int, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """MLAS QuantizeARow_CompInt8: (q (M, blocks, block) int64, sa (M, blocks) float32)."""
    m = a2.shape[0]
    nb = -(-k // block)
    ap = np.zeros((m, nb * block), _F32)
    ap[:, :k] = a2
    ab = ap.reshape(m, nb, block)
    amax = np.max(np.abs(ab), axis=2)
    sa = (amax / _F32(127)).astype(_F32)
    safe = np.where(amax == 0, _F32(1), amax)
    inv = np.where(amax != 0, (_F32(127) / safe).astype(_F32), _F32(0)).astype(_F32)
    q = np.rint((ab * inv[..., None]).astype(_F32)).astype(np.int64)  # RNE, |q| <= 127
    return np.clip(q, -128, 127), sa


@kernel("MatMul", VARIANT, prepare=_prepare)
def ort_nbits_matmul(plan, a, b=None, bias=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, a, b)
    if isinstance(plan, OrtPackedMatMulPlan):
        a = np.asarray(a)
        if a.dtype != _F32 or a.ndim < 1 or a.shape[-1] != plan.b.shape[0]:
            return plan.fallback.kernel.run(plan.fallback.plan, a, b)
        lead = a.shape[:-1] if a.ndim > 1 else ()
        y = mlas_sgemm_packed(a.reshape(-1, a.shape[-1]), plan.b)
        return y.reshape(lead + (plan.b.shape[1],))
    if isinstance(plan, OrtSgemmMatMulPlan):
        y = None
        if np.asarray(a).dtype == _F32 and np.asarray(b).dtype == _F32:
            y = sgemm_matmul(plan.threads, np.asarray(a), np.asarray(b))
        return y if y is not None else plan.fallback.kernel.run(plan.fallback.plan, a, b)
    a = np.asarray(a, _F32)
    if a.ndim < 1 or a.shape[-1] != plan.k:
        raise InputError(f"MatMul '{plan.name}': A has shape {list(a.shape)}, its last dimension must be K={plan.k}")
    lead = a.shape[:-1]
    q, sa = quantize_a_blocks(a.reshape(-1, a.shape[-1]), plan.k)
    y = compint8_matmul(q, plan.bt, sa, plan.sb, plan.nzs, bias)
    return y.reshape(lead + (plan.sb.size,))
