"""Exp variant ``ort_float``: ONNX Runtime 1.32's CPU Exp on float32, ``MlasComputeExp``
(onnxruntime/core/mlas/lib/compute.cpp, MlasExpConstants), x86-64.

Numeric contract (float32, every ``fma`` one rounding; MlasExpConstants, below):

* ``v = min(max(x, -103.9720840454), 88.7228391)`` (NaN stays NaN);
* ``m = fma(v, 1/ln2, 1.5 * 2^23) - 1.5 * 2^23`` (nearest integer), ``r = fma(m, -ln2_hi, v)``,
  ``r = fma(m, -ln2_lo, r)``;
* ``p = poly_0``, then ``p = fma(p, r, c)`` for c in poly_1..poly_4, 1, 1; ``y = p * 2^m`` with one
  rounding (subnormal results included).

NumPy's float32 exp differs on ~39% of normal inputs.  Bit-exact with onnxruntime 1.32.0
(tests/conformance/test_ort_float_activation.py).  Other dtypes run the generic kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from .float_sgemm import _fma32
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
# MlasExpConstants (compute.cpp), shared with Softmax (float_softmax.py)
_LOWER = _F(-103.9720840454)  # LowerRange: the AVX-512F kernels clamp here (vscalefps reaches subnormals)
_UPPER = _F(88.7228391)       # UpperRange
_BIAS = _F(12582912.0)        # MLAS_ROUNDING_BIAS_MAGIC, 1.5 * 2^23
_LOG2R = _F(1.44269504088896341)
_LOG2HI = _F(-6.93145752e-1)
_LOG2LO = _F(-1.42860677e-6)
_POLY = np.array([float.fromhex("0x1.694000p-10"), float.fromhex("0x1.125edcp-7"),
                  float.fromhex("0x1.555b5ap-5"), float.fromhex("0x1.555450p-3"),
                  float.fromhex("0x1.fffff6p-2"), 1.0, 1.0], _F)


@numba.njit(cache=True)
def exp_core(v, bias, log2r, log2hi, log2lo, poly):  # pragma: no cover - compiled
    """exp(v) for an already clamped float32 v: the reduction, the FMA polynomial and the scaling."""
    b = _fma32(v, log2r, bias)
    m = np.float32(b - bias)
    v = _fma32(m, log2hi, v)
    v = _fma32(m, log2lo, v)
    p = poly[0]
    for c in range(1, 7):
        p = _fma32(p, v, poly[c])
    return np.float32(np.float64(p) * 2.0 ** np.float64(m))  # exact product, one rounding


@numba.njit(cache=True)
def _exp(x, out, lower, upper, bias, log2r, log2hi, log2lo, poly):  # pragma: no cover - compiled
    for i in range(x.size):
        v = x[i]
        if v < lower:
            v = lower
        if v > upper:
            v = upper
        out[i] = exp_core(v, bias, log2r, log2hi, log2lo, poly)


def mlas_exp(x: np.ndarray) -> np.ndarray:
    """float32 exp of ``x`` in MlasComputeExp's arithmetic (module docstring)."""
    x = np.ascontiguousarray(x, _F)
    out = np.empty_like(x)
    if x.size:
        _exp(x.reshape(-1), out.reshape(-1), _LOWER, _UPPER, _BIAS, _LOG2R, _LOG2HI, _LOG2LO, _POLY)
    return out


@dataclass(frozen=True)
class OrtExpPlan:
    generic: Any
    executed_by: str = "MlasComputeExp (float32 FMA polynomial)"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    return OrtExpPlan(d) if ok else d


@kernel("Exp", VARIANT, prepare=_prepare)
def ort_exp(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x)
    return mlas_exp(x)
