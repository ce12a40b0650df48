"""Pow variant ``ort_float``: ONNX Runtime 1.32's CPU Pow on a float32 base
(onnxruntime/core/providers/cpu/math/element_wise_ops.cc, PowImpl), x86-64 glibc.

Numeric contract (base float32):

* an exponent with a single element equal to 2 or 3: ``x * x`` / ``(x * x) * x`` in float32 (ORT's
  shortcut; libm's powf rounds x^3 differently on ~30% of inputs);
* otherwise, a float32 exponent: libm ``powf(x, y)`` per element (glibc's powf is not correctly
  rounded: it differs from a float64 pow rounded to float32 on ~0.03% of inputs, and numpy's own
  float32 power, which may take SVML, differs on more);
* a float64 or integer exponent: C++ promotes to double, ``(float) pow((double) x, (double) y)``.

Numba compiles ``x ** y`` on float32 / float64 scalars to llvm.pow, which resolves to libm's
powf / pow: the same functions ORT calls.  Bit-exact with onnxruntime 1.32.0
(tests/conformance/test_ort_float_activation.py).  Other bases run the generic kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import float32_node_or_delegate
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32


@numba.njit(cache=True)
def _powf(x, y, out):  # pragma: no cover - compiled
    for i in range(out.size):
        out[i] = x[i] ** y[i]


@numba.njit(cache=True)
def _pow_double(x, y, out):  # pragma: no cover - compiled
    for i in range(out.size):
        out[i] = np.float32(np.float64(x[i]) ** y[i])


@dataclass(frozen=True)
class OrtPowPlan:
    generic: Any  # Delegate to the generic float Pow (other base dtypes)
    executed_by: str = "ORT Pow: x*x / x*x*x shortcuts, else libm powf (float exponent) or pow (others)"


def _prepare(node, ctx):
    d, ok = float32_node_or_delegate(node, ctx)
    return OrtPowPlan(d) if ok else d


@kernel("Pow", VARIANT, prepare=_prepare)
def ort_pow(plan, x, y):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, y)
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != _F or y.dtype.kind not in "fiu" or y.dtype == np.float16:
        return plan.generic.kernel.run(plan.generic.plan, x, y)
    if y.size == 1 and float(y.ravel()[0]) in (2.0, 3.0):
        sq = (x * x).astype(_F)
        out = sq if float(y.ravel()[0]) == 2.0 else (sq * x).astype(_F)
        return np.broadcast_to(out, np.broadcast_shapes(x.shape, y.shape)).copy()
    xb, yb = np.broadcast_arrays(x, y)
    out = np.empty(xb.shape, _F)
    if y.dtype == _F:
        _powf(np.ascontiguousarray(xb).ravel(), np.ascontiguousarray(yb).ravel(), out.reshape(-1))
    else:
        _pow_double(np.ascontiguousarray(xb).ravel(), np.ascontiguousarray(yb, np.float64).ravel(), out.reshape(-1))
    return out
