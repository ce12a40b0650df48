"""Elu / Selu / Celu / Softplus / Mish / Softsign variant ``ort_float``: ONNX Runtime 1.32's CPU
activation functors on float32 (onnxruntime/core/providers/cpu/activation/activations.h), Eigen array
expressions run over ORT's parallel-for blocks like Log (ort_parallel.py: per block, SSE packets of
4 from the first 16-byte boundary, scalar code before it and after the last whole packet; the
partition uses each functor's cost: Elu 30, Selu 4, Celu 1, Softplus 15, Softsign 1 cycles).

Numeric contract (float32, every product and sum rounded; no FMA):

* E(x): packets take Eigen's pexp_float -- m = floor(fl(x * log2e) + 1/2) after x = min(x, 88.723),
  r = fl(m * -0.693359375 + x), r = fl(m * 2.12194440e-4 + r), a degree-6 polynomial in r evaluated
  as even / odd halves in r^2, y * 2^m by Eigen's pldexp (three multiplications by 2^floor(m/4), then
  one by the rest), then max(that, x); x < -104 gives 0 -- and the scalar code libm's expf;
* Elu: x >= 0 ? x : alpha * (E(x) - 1);  Selu: x > 0 ? gamma * x : (gamma * alpha) * (E(x) - 1);
  Celu: max(x, 0) + min(alpha * (E(x / alpha) - 1), 0);  Softplus: x > 0 ? x + L(E(-x)) : L(E(x)) with
  L = Eigen's generic_plog1p on packets (x * (plog(1 + x) / ((1 + x) - 1)), x where 1 + x == 1) and
  libm log1pf in scalar code; Mish: ORT runs its function body, x * MlasComputeTanh(Softplus(x));
  Softsign: (1 / (1 + |x|)) * x (Eigen's
  inverse() then a product: two roundings; IEEE operations only, so the packet / scalar split does
  not matter).

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py).  Other dtypes run
the generic kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from .float_activation import mlas_tanh
from .float_conv import physical_cores
from .float_log import _NAN, _P as _LP, _Q as _LQ, _packet_log
from .ort_parallel import packet_spans
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
_COST = {"Elu": 30.0, "Selu": 4.0, "Celu": 1.0, "Softsign": 1.0, "Softplus": 15.0, "Mish": 15.0}
_OPS = {"Elu": 0, "Selu": 1, "Celu": 2, "Softsign": 3, "Softplus": 4, "Mish": 4}
_P = np.array([0.49999988079071044921875, 0.16666518151760101318359375, 4.166965186595916748046875e-2,
               8.36894474923610687255859375e-3, 1.37449637986719608306884765625e-3], _F)  # p2..p6


@numba.njit(cache=True)
def _pow2(e):  # pragma: no cover - compiled
    return np.float32(2.0 ** e)  # exact: |e| <= 127 here


@numba.njit(cache=True)
def _pexp(v, p):  # pragma: no cover - compiled
    if v < np.float32(-104.0):
        return np.float32(0.0)
    x = min(v, np.float32(88.723))
    m = np.float32(math.floor(np.float32(np.float32(x * np.float32(1.44269504088896341)) + np.float32(0.5))))
    r = np.float32(np.float32(m * np.float32(-0.693359375)) + x)
    r = np.float32(np.float32(m * np.float32(2.12194440e-4)) + r)
    r2 = np.float32(r * r)
    pe = np.float32(np.float32(r2 * p[4]) + p[2])
    po = np.float32(np.float32(r2 * p[3]) + p[1])
    pe = np.float32(np.float32(r2 * pe) + p[0])
    pl = np.float32(r + np.float32(1.0))
    y = np.float32(np.float32(r * po) + pe)
    y = np.float32(np.float32(r2 * y) + pl)
    e = int(m)
    b = e >> 2
    c = _pow2(b)
    out = np.float32(np.float32(np.float32(y * c) * c) * c)
    out = np.float32(out * _pow2(e - 3 * b))
    if v != v or v > out:
        return v
    return out


@numba.njit(cache=True)
def _plog1p(x):  # pragma: no cover - compiled
    """Eigen's generic_plog1p on packets: x where 1 + x rounds to 1 or log(1 + x) overflows, else
    x * (log(1 + x) / ((1 + x) - 1))."""
    if x != x:
        return _NAN[0]  # measured: a NaN leaves ORT's packet log1p with every bit set
    xp1 = np.float32(x + np.float32(1.0))
    if xp1 == np.float32(1.0):
        return x
    log1 = _packet_log(xp1, _LP, _LQ, _NAN[0])
    if xp1 == log1:
        return x
    return np.float32(x * np.float32(log1 / np.float32(xp1 - np.float32(1.0))))


@numba.njit(cache=True)
def _one(op, v, a, g, packet, p):  # pragma: no cover - compiled
    if op == 4:  # Softplus: x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))
        u = np.float32(-v) if v > 0 else v
        if packet:
            t = _plog1p(_pexp(u, p))
        else:
            t = np.float32(math.log1p(np.float32(math.exp(u))))  # libm log1pf(expf(u))
        return np.float32(v + t) if v > 0 else t
    if op == 3:
        return np.float32(np.float32(np.float32(1.0) / np.float32(np.float32(1.0) + abs(v))) * v)
    u = np.float32(v / a) if op == 2 else v
    ex = _pexp(u, p) if packet else np.float32(math.exp(u))  # scalar: libm expf
    em1 = np.float32(ex - np.float32(1.0))
    if op == 0:
        return v if v >= 0 else np.float32(a * em1)
    if op == 1:
        return np.float32(g * v) if v > 0 else np.float32(np.float32(g * a) * em1)
    return np.float32(max(v, np.float32(0.0)) + min(np.float32(a * em1), np.float32(0.0)))


@numba.njit(cache=True)
def _block(op, x, out, s, lo, hi, e, a, g, p):  # pragma: no cover - compiled
    for i in range(s, e):
        out[i] = _one(op, x[i], a, g, lo <= i < hi, p)


@dataclass(frozen=True)
class OrtEigenUnaryPlan:
    op: str
    alpha: float
    gamma: float
    threads: int
    generic: Any
    executed_by: str = "ORT activation functor: Eigen SSE packets, libm at ORT's block edges"


_DEFAULTS = {"Elu": (1.0, 0.0), "Selu": (1.67326319217681884765625, 1.05070102214813232421875), "Celu": (1.0, 0.0),
             "Softsign": (0.0, 0.0), "Softplus": (0.0, 0.0), "Mish": (0.0, 0.0)}


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    if not ok:
        return d
    a, g = _DEFAULTS[node.op]
    return OrtEigenUnaryPlan(node.op, float(_F(node.attrs.get("alpha", a))), float(_F(node.attrs.get("gamma", g))),
                             physical_cores(), d)


@kernel(tuple(_OPS), VARIANT, prepare=_prepare)
def ort_eigen_unary(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    op = _OPS[plan.op]
    for s, lo, hi, e in packet_spans(flat.size, plan.threads, _COST[plan.op]):
        _block(op, flat, out, s, lo, hi, e, _F(plan.alpha), _F(plan.gamma), _P)
    if plan.op == "Mish":  # ORT runs Mish's function body: Softplus, Tanh (MLAS), Mul
        out = (mlas_tanh(out) * flat).astype(_F)  # tanh first: a NaN keeps its payload, as in ORT
    return out.reshape(x.shape)
