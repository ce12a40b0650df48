"""Sigmoid / Tanh variant ``ort_float``: ONNX Runtime CPU float32 activations as MLAS computes them on
x86-64 (``MlasComputeLogistic`` / ``MlasComputeTanh``: onnxruntime/core/mlas/lib/logistic.cpp,
tanh.cpp, the FMA3 kernels LogisticKernelFma3.S / TanhKernelFma3.S).

Numeric contract (float32; every multiply-add a single-rounding FMA):

* Tanh: ``v = clamp(x, -9, 9)``, ``s = v*v``; ``p = s*a13 + a11``, then ``p = p*s + c`` for
  c in a9, a7, a5, a3, a1; ``p = p*v``; ``q = s*b6 + b4``, then ``q = q*s + c`` for c in b2, b0;
  ``y = p / q``.
* Sigmoid: ``v = clamp(x, -18, 18)``, the same rational form with a9..a1 and b10..b0;
  ``y = max(p / q + 0.5, 0)`` -- clamped below only, not to [0, 1] as the generic C++ kernel is: the
  x86 FMA3 kernel returns 1.0000001 at x = 17.844 (measured).

Constants: MLAS's ``MlasTanhConstants`` / ``MlasLogisticConstants`` (Eigen's coefficients).  Bit-exact
with onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py).  Quantized nodes are handed
to the backend's integer kernel (``ort``, else ``int``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .common import is_quantized
from .float_sgemm import _fma32
from ..registry import Delegate, get, kernel, require

VARIANT = "ort_float"
_F = np.float32
_TANH_P = np.array([-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                    1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03], _F)
_TANH_Q = np.array([1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03], _F)
_SIG_P = np.array([4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                   2.48287947061529e-01], _F)
_SIG_Q = np.array([6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
                   1.16817656904453e-01, 9.93151921023180e-01], _F)


@numba.njit(cache=True)
def _rational(x, out, lim, pc, qc, sigmoid):  # pragma: no cover - compiled
    for i in range(x.size):
        v = x[i]
        if v < -lim:
            v = -lim
        if v > lim:
            v = lim
        s = np.float32(v * v)
        p = _fma32(s, pc[0], pc[1])
        for k in range(2, pc.size):
            p = _fma32(p, s, pc[k])
        p = np.float32(p * v)
        q = _fma32(s, qc[0], qc[1])
        for k in range(2, qc.size):
            q = _fma32(q, s, qc[k])
        y = np.float32(p / q)
        if sigmoid:  # clamped below at 0 only (the FMA3 kernel: 1.0000001 at x = 17.844)
            y = np.float32(y + np.float32(0.5))
            if y < 0:
                y = np.float32(0.0)
        out[i] = y


def mlas_tanh(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, _F)
    out = np.empty_like(x)
    _rational(x.reshape(-1), out.reshape(-1), _F(9.0), _TANH_P, _TANH_Q, False)
    return out


def mlas_sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, _F)
    out = np.empty_like(x)
    _rational(x.reshape(-1), out.reshape(-1), _F(18.0), _SIG_P, _SIG_Q, True)
    return out


_FN = {"Tanh": mlas_tanh, "Sigmoid": mlas_sigmoid}


@dataclass(frozen=True)
class MlasActivationPlan:
    executed_by: str


def _prepare_for(op: str):
    def prepare(node, ctx):
        first_in = ctx.inputs[0] if ctx.inputs else None
        if is_quantized(first_in) or any(is_quantized(t) for t in ctx.outputs) or \
                first_in is None or str(first_in.dtype) != "float32":
            k = next(require(op, v) for v in ("ort", "int", "float") if get(op, v) is not None)
            return Delegate(k, k.prepare(node, ctx))
        return MlasActivationPlan(f"MLAS {op} (FMA3 rational approximation)")
    return prepare


def _register(op: str) -> None:
    def run(plan, x):
        if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
            return plan.kernel.run(plan.plan, x)
        return _FN[op](x)
    kernel(op, VARIANT, prepare=_prepare_for(op))(run)


for _op in _FN:
    _register(_op)
