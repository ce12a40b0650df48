"""Log variant ``ort_float``: ONNX Runtime 1.32's CPU Log on float32, an Eigen array expression run
over ORT's parallel-for blocks (onnxruntime/core/providers/cpu/math/element_wise_ops.h functors::Log,
cost 15 cycles; core/common/threadpool.cc ParallelFor; Eigen's plog_float in
GenericPacketMathFunctions.h, 4-float SSE packets, no FMA).

Numeric contract, per element (float32):

* packet path: (m, e) = frexp(x) (m in [0.5, 1)); if m < sqrt(1/2): e -= 1, t = m + m - 1, else
  t = m - 1; p = t * ((t * p3 + p2) * t + p1), q = ((t * q3 + q2) * t + q1) * t + 1 (every product
  and sum rounded separately), r = p / q; y = e * ln2 + r (rounded twice); +-0 -> -inf, +inf ->
  +inf, negative or NaN -> the NaN with every bit set;
* scalar path: libm ``logf``.  They differ on ~10% of inputs.

Which path an element takes: ORT's parallel-for blocks for a functor of cost 15 and the packet
spans inside them (ort_parallel.py).

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from .float_conv import physical_cores
from .ort_parallel import packet_spans
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
_COST = 15.0  # functors::Log::Cost()
_P = np.array([1.0000000190281136, 1.0000000190281063, 0.18256296349849254], _F)
_Q = np.array([1.4999999999999927, 0.59923249590823520, 0.049616247954120038], _F)
_NAN = np.array([0xFFFFFFFF], np.uint32).view(_F)  # por(x, invalid mask): every bit set


@numba.njit(cache=True)
def _packet_log(v, p, q, nan):  # pragma: no cover - compiled
    if v != v or v < 0:
        return nan
    if v == 0:
        return np.float32(-np.inf)
    if v == np.inf:
        return v
    m, e = math.frexp(np.float64(v))  # v is a float32: m exact in float32 (subnormals too)
    t = np.float32(m)
    ef = np.float32(e)
    if t < np.float32(0.707106781186547524):
        ef = np.float32(ef - np.float32(1.0))
        t = np.float32(np.float32(t - np.float32(1.0)) + t)
    else:
        t = np.float32(t - np.float32(1.0))
    pp = np.float32(np.float32(t * p[2]) + p[1])
    pp = np.float32(np.float32(t * pp) + p[0])
    pp = np.float32(t * pp)
    qq = np.float32(np.float32(t * q[2]) + q[1])
    qq = np.float32(np.float32(t * qq) + q[0])
    qq = np.float32(np.float32(t * qq) + np.float32(1.0))
    r = np.float32(pp / qq)
    return np.float32(np.float32(ef * np.float32(0.693147180559945309417)) + r)


@numba.njit(cache=True)
def _log_block(x, out, s, lo, hi, e, p, q, nan):  # pragma: no cover - compiled
    for i in range(s, e):
        if i < lo or i >= hi:
            out[i] = math.log(x[i])  # llvm.log.f32: libm logf
        else:
            out[i] = _packet_log(x[i], p, q, nan)


def ort_log_values(x: np.ndarray, threads: int) -> np.ndarray:
    x = np.ascontiguousarray(x, _F)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    for s, lo, hi, e in packet_spans(flat.size, threads, _COST):
        _log_block(flat, out, s, lo, hi, e, _P, _Q, _NAN[0])
    return out.reshape(x.shape)


@dataclass(frozen=True)
class OrtLogPlan:
    threads: int
    generic: Any
    executed_by: str = "ORT Log: Eigen plog_float SSE packets, libm logf at block edges"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    return OrtLogPlan(physical_cores(), d) if ok else d


@kernel("Log", VARIANT, prepare=_prepare)
def ort_log(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x)
    return ort_log_values(x, plan.threads)
