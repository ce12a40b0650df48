"""LiteRT dynamic-range FULLY_CONNECTED and BATCH_MATMUL (variants ``tflite_hybrid_ref`` / ``_opt``).

FULLY_CONNECTED (``fully_connected.cc EvalHybridDense`` -> ``MatrixBatchVectorMultiplyAccumulate``,
SSE/AVX2 form; the reference and optimized resolvers run the same code)::

    q, s[b], z[b] = per-row quantization of x[b, :]  (hybrid_quant; asymmetric iff the
                    asymmetric_quantize_inputs option is set, else symmetric with z = 0)
    acc[b, o] = sum_k w[o, k] * q[b, k] - z[b] * sum_k w[o, k]             exact int32
    scale[b, o] = f32(sw[o] * s[b])   per-channel (more than one filter scale)
                = f32(s[b] * sw)      per-tensor
    y[b, o] = clamp(f32(bias[o] + f32(f32(acc) * scale[b, o])))           (bias absent: 0)

BATCH_MATMUL (``batch_matmul.cc EvalHybrid`` -> ``reference_ops::BatchMatMul`` hybrid overload, both
resolvers): rows of the float LHS (over the contraction axis) are quantized as above, the int8 RHS
is constant, per-channel scales run along its output columns; with several batch dims LiteRT
reads another row's scale / zero point (``_scale_rows``)::

    t = int32(f32(f32(sum_k q*w) - f32(rowsum[n]) * f32(z[row])))        (truncation toward 0)
    y = f32(0 + f32(scale) * f32(t)),  scale = f32(s[row] * sw[n]) / f32(s[row] * sw)

Integer sums: int64 matmul, exact; |acc| < 2^31 for K < 2^17.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError, UnsupportedOpError
from refinterp.quant.fixedpoint import wrap_int32
from .common import F32, act_range, clamp, filter_of, float_bias
from . import blockwise
from .quantize import quantize_rows
from ...registry import kernel

VARIANTS = ("tflite_hybrid_ref", "tflite_hybrid_opt")


@dataclass(frozen=True)
class HybridFCPlan:
    name: str
    w: np.ndarray          # int64 [O, K]
    row_sums: np.ndarray   # int64 [O]
    scales: np.ndarray     # float32 [O] (per-channel) or [1]
    per_channel: bool
    bias: np.ndarray | None
    asymmetric: bool
    keep_num_dims: bool
    lo: np.float32
    hi: np.float32

    def describe(self) -> dict:
        return {"input_quantization": "asymmetric per row" if self.asymmetric else "symmetric per row",
                "filter_scales": "per-channel" if self.per_channel else "per-tensor"}


def _prepare_fc(node, ctx) -> HybridFCPlan:
    w, sw, pc = filter_of(node, ctx)
    if w.ndim != 2:
        raise ModelError(f"node '{node.name}' (FullyConnected): filter rank {w.ndim}, expected 2")
    if pc and sw.size != w.shape[0]:
        raise ModelError(f"node '{node.name}' (FullyConnected): {sw.size} filter scales for "
                         f"{w.shape[0]} output channels")
    w64 = w.astype(np.int64)
    lo, hi = act_range(node)
    return HybridFCPlan(node.name, w64, w64.sum(axis=1), sw, pc, float_bias(node, ctx, 2, w.shape[0]),
                        bool(node.attrs.get("asymmetric_quantize_inputs", False)),
                        bool(node.attrs.get("keep_num_dims", False)), lo, hi)


def wrap32(a: np.ndarray) -> np.ndarray:
    """int32 wrap of an integer array, as int32 (``quant.fixedpoint.wrap_int32`` returns int64)."""
    return wrap_int32(a).astype(np.int32)


def _prepare_fc_ref(node, ctx):
    if node.attrs.get("blockwise"):
        blockwise.refuse(node, "this runtime has no blockwise path (LiteRT 2.3's reference resolver and "
                               "tflite-runtime 2.14's optimized one on aarch64 output zeros: "
                               "tests/conformance/test_corpus_litert_testdata.py)")
    return _prepare_fc(node, ctx)


def _prepare_fc_opt(node, ctx):
    return blockwise.prepare_opt(node, ctx) if node.attrs.get("blockwise") else _prepare_fc(node, ctx)


@kernel("FullyConnected", "tflite_hybrid_ref", prepare=_prepare_fc_ref)
@kernel("FullyConnected", "tflite_hybrid_opt", prepare=_prepare_fc_opt)
def hybrid_fully_connected(plan: HybridFCPlan, x, w=None, b=None, scales=None):
    if isinstance(plan, blockwise.BlockwiseFCPlan):
        return blockwise.run_opt(plan, x)
    x = np.asarray(x, F32)
    k = plan.w.shape[1]
    if x.size % k:
        raise ModelError(f"node '{plan.name}' (FullyConnected): input size {x.size} not a multiple of {k}")
    rows = x.reshape(-1, k)
    q, s, z = quantize_rows(rows, plan.asymmetric)
    acc = q.astype(np.int64) @ plan.w.T - z.astype(np.int64)[:, None] * plan.row_sums[None, :]
    acc = wrap32(acc)
    if plan.per_channel:
        scale = (plan.scales[None, :] * s[:, None]).astype(F32)
    else:
        scale = np.broadcast_to((s * plan.scales[0]).astype(F32)[:, None], acc.shape)
    y = (acc.astype(F32) * scale).astype(F32)
    if plan.bias is not None:
        y = (plan.bias[None, :] + y).astype(F32)
    y = clamp(y, plan.lo, plan.hi)
    o = plan.w.shape[0]
    return y.reshape(x.shape[:-1] + (o,)) if plan.keep_num_dims else y.reshape(-1, o)


@dataclass(frozen=True)
class HybridBMMPlan:
    name: str
    w: np.ndarray          # int64 [..., N, K] (contraction last; leading dims all 1)
    row_sums: np.ndarray   # int64 [..., N]
    scales: np.ndarray     # float32 [N] or [1]
    per_channel: bool
    asymmetric: bool
    adj_x: bool
    rhs_rank: int

    def describe(self) -> dict:
        return {"input_quantization": "asymmetric per row" if self.asymmetric else "symmetric per row",
                "filter_scales": "per-channel" if self.per_channel else "per-tensor"}


def _prepare_bmm(node, ctx) -> HybridBMMPlan:
    w, sw, pc = filter_of(node, ctx)
    if w.ndim < 2:
        raise ModelError(f"node '{node.name}' (BatchMatMul): RHS rank {w.ndim} < 2")
    if any(d != 1 for d in w.shape[:-2]):
        # LiteRT indexes the hybrid row sums with the same summed batch offset as the scales
        # (below) and computes them for only part of the weight matrices: not modelled.
        raise UnsupportedOpError(f"node '{node.name}' (BatchMatMul): hybrid RHS with batch dims "
                                 f"{tuple(w.shape[:-2])} is not supported")
    wt = w if node.attrs.get("adj_y") else np.swapaxes(w, -1, -2)  # [..., N, K]
    if pc and sw.size != wt.shape[-2]:
        raise ModelError(f"node '{node.name}' (BatchMatMul): {sw.size} RHS scales for "
                         f"{wt.shape[-2]} output columns")
    w64 = np.ascontiguousarray(wt).astype(np.int64)
    return HybridBMMPlan(node.name, w64, w64.sum(axis=-1), sw, pc,
                         bool(node.attrs.get("asymmetric_quantize_inputs", False)),
                         bool(node.attrs.get("adj_x", False)), w.ndim)


def _scale_rows(plan: HybridBMMPlan, lead: tuple, m: int) -> np.ndarray:
    """Index of the quantization row whose scale / zero point LiteRT applies to each LHS row.

    ``reference_ops::BatchMatMul`` (hybrid) advances the scale and offset pointers by ``M`` per
    non-broadcast batch dimension index, not by the flattened batch: with batch dims (B0, B1, B2)
    the row (b0, b1, b2, j) uses row ``(b0 + b1 + b2) * M + j`` (summing only dims != 1).  Exact
    for one batch dim.  Before that, ``Eval`` folds the last LHS batch dim into the rows when
    adj_x is false and both operands have rank > 2 with RHS dim -3 == 1.
    """
    if not plan.adj_x and plan.rhs_rank > 2 and len(lead) > 0:
        lead_c, m_c = lead[:-1], lead[-1] * m
    else:
        lead_c, m_c = lead, m
    if len(lead_c) > 3:
        raise UnsupportedOpError(f"node '{plan.name}' (BatchMatMul): more than 3 batch dims")
    dims = (1,) * (3 - len(lead_c)) + tuple(lead_c)
    grid = np.indices(dims).reshape(3, -1)
    moving = np.array([d != 1 for d in dims], np.int64)[:, None]
    base = (grid * moving).sum(axis=0) * m_c
    return (base[:, None] + np.arange(m_c)[None, :]).reshape(-1)


@kernel("BatchMatMul", VARIANTS, prepare=_prepare_bmm)
def hybrid_batch_matmul(plan: HybridBMMPlan, a, b=None):
    a = np.asarray(a, F32)
    if plan.adj_x:
        a = np.swapaxes(a, -1, -2)
    k = plan.w.shape[-1]
    if a.shape[-1] != k:
        raise ModelError(f"node '{plan.name}' (BatchMatMul): contraction {a.shape[-1]} != {k}")
    lead, m = a.shape[:-2], a.shape[-2]
    q, s, z = quantize_rows(a.reshape(-1, k), plan.asymmetric)
    sel = _scale_rows(plan, lead, m)
    s, z = s[sel].reshape(lead + (m, 1)), z[sel].reshape(lead + (m, 1))
    q = q.reshape(a.shape).astype(np.int64)
    tot = wrap32(np.matmul(q, np.swapaxes(plan.w, -1, -2)))  # [..., M, N]
    corr = (plan.row_sums.astype(F32)[..., None, :] * z.astype(F32)).astype(F32)
    tot = np.trunc((tot.astype(F32) - corr).astype(F32)).astype(np.int32)
    scale = (s * plan.scales).astype(F32) if plan.per_channel else (s * plan.scales[0]).astype(F32)
    return (scale * tot.astype(F32)).astype(F32) + F32(0)
