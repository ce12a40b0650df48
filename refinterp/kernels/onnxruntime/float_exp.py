"""Exp variant ``ort_float``: ONNX Runtime 1.32's CPU Exp on float32, ``MlasComputeExp``
(onnxruntime/core/mlas/lib/compute.cpp, MlasExpConstants), x86-64.

Numeric contract (float32, every ``fma`` one rounding; the constants of float_softmax.py):

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

from .common import is_quantized
from .float_sgemm import _fma32
from .float_softmax import _BIAS, _LOG2HI, _LOG2LO, _LOG2R, _LOWER, _POLY
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"
_F = np.float32
_UPPER = _F(88.7228391)  # MlasExpConstants.UpperRange


@numba.njit(cache=True)
def _exp(x, out, lower, upper, bias, log2r, log2hi, log2lo, poly):  # pragma: no cover - compiled
    for i in range(x.size):
        v = x[i]
        if v < lower:
            v = lower
        if v > upper:
            v = upper
        b = _fma32(v, log2r, bias)
        m = np.float32(b - bias)
        v = _fma32(m, log2hi, v)
        v = _fma32(m, log2lo, v)
        p = poly[0]
        for c in range(1, 7):
            p = _fma32(p, v, poly[c])
        out[i] = np.float32(np.float64(p) * 2.0 ** np.float64(m))  # exact product, one rounding


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
    fk = require("Exp", "float")
    d = Delegate(fk, fk.prepare(node, ctx))
    x = ctx.inputs[0] if ctx.inputs else None
    if x is None or str(x.dtype) != "float32" or is_quantized(x) or any(is_quantized(t) for t in ctx.outputs if t):
        return d
    return OrtExpPlan(d)


@kernel("Exp", VARIANT, prepare=_prepare)
def ort_exp(plan, x):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != _F:
        return plan.generic.kernel.run(plan.generic.plan, x)
    return mlas_exp(x)
