"""Erf and the GELU family, variant ``ort_float``: ONNX Runtime CPU float32 as computed on x86-64.

``MlasComputeErf`` (onnxruntime/core/mlas/lib/erf.cpp constants, the FMA3 kernel
x86_64/ErfKernelFma3.S; every multiply-add below one single-rounding FMA)::

    a   = min(|x|, 3.925)
    s   = a * a
    lo  = P5(s) evaluated by Horner FMAs from SMALL_P0, then lo = fma(lo, a, a); lo = 0 if a > 0.921875
    b   = a if a > 0.921875 else 0
    hi  = -(fma(Q6(b), b, b))  with Q6 Horner FMAs from BIG_P0;  hi = max(hi, -88.3762626647949)
    r   = fma(log2(e), hi, 1.5 * 2^23) - 1.5 * 2^23          (round to nearest)
    f   = fma(r, log2_lo, fma(r, log2_hi, hi))
    e   = (Horner FMAs of EXP_P0..P6 in f) * 2^r
    erf = sign(x) | (bits(1 - e) | bits(lo))                 (for a <= 0.921875, 1 - e is +0)

A NaN comes out as itself (quietened), as onnxruntime 1.32 returns it (measured; the FMA3 source's
vminps operand order would give +-1 instead).

Users (onnxruntime 1.32 CPU EP; compiled without FMA contraction, so each other operation rounds once):

* Erf: ``MlasComputeErf(x)``;
* Gelu (opset 20) approximate "none" and com.microsoft.Gelu: ``t = x * f32(1/sqrt 2)``,
  ``y = (0.5 * x) * (erf(t) + 1)`` (providers/cpu/tensor/gelu.cc);
* Gelu approximate "tanh" and com.microsoft.FastGelu without bias: ``u = x * ((C * x) * x + B)``,
  ``y = (0.5 * x) * (MlasComputeTanh(u) + 1)`` with B = f32(sqrt(2/pi)), C = f32(0.044715 sqrt(2/pi));
* com.microsoft.BiasGelu / FastGelu with a bias (contrib_ops/cpu/bert/bias_gelu.cc): ``v = x + bias``,
  ``t = v * f32(1/sqrt 2)`` (or ``v * ((C * v) * v + B)``), ``y = (v * 0.5) * (erf(t) + 1)`` (or tanh).

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_activation.py).  Quantized nodes
and other dtypes go to the op's other kernels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from .common import is_quantized
from .float_activation import mlas_tanh
from .float_sgemm import _fma32
from ..registry import Delegate, get, kernel, require

VARIANT = "ort_float"
_F = np.float32
_SMALL = np.array([-5.99104969e-4, 4.99339588e-3, -2.67667342e-2, 1.12818025e-1, -3.76124859e-1,
                   1.28379151e-1], _F)
_BIG = np.array([1.72948930e-5, -3.83208680e-4, 3.88393435e-3, -2.42545605e-2, 1.06777847e-1,
                 6.34846687e-1, 1.28717512e-1], _F)
_EXP = np.array([1.38319808e-3, 8.37550033e-3, 4.16689515e-2, 1.66664466e-1, 4.99999851e-1, 1.0, 1.0], _F)
_UPPER = _F(3.925)
_SPLIT = _F(0.921875)
_EXP_LOWER = _F(-88.3762626647949)
_LOG2E = _F(1.44269504088896341)
_LOG2_HI = _F(-6.93145752e-1)
_LOG2_LO = _F(-1.42860677e-6)
_ROUND = _F(1.25829120e+7)
_SQRT1_2 = _F(0.70710678118654752440)          # static_cast<float>(M_SQRT1_2)
_TANH_B = _F(0.7978845608028654)               # sqrt(2 / pi)
_TANH_C = _F(0.035677408136300125)             # 0.044715 * sqrt(2 / pi)


@numba.njit(cache=True)
def _erf_parts(a, big, small, sc, bc, ec, upper, split, lower, log2e, hi_c, lo_c, rnd):  # pragma: no cover
    """For |x| values ``a``: big[i] = 1 - e (the large-argument branch), small[i] = the small one."""
    for i in range(a.size):
        v = a[i]
        if v > upper:  # NaN inputs are replaced afterwards (mlas_erf)
            v = upper
        s = np.float32(v * v)
        lo = sc[0]
        for k in range(1, sc.size):
            lo = _fma32(lo, s, sc[k])
        lo = _fma32(lo, v, v)
        b = np.float32(0.0)
        if v > split:
            lo = np.float32(0.0)
            b = v
        h = bc[0]
        for k in range(1, bc.size):
            h = _fma32(h, b, bc[k])
        h = -_fma32(h, b, b)
        if not h > lower:  # vmaxps(h, lower)
            h = lower
        r = np.float32(_fma32(log2e, h, rnd) - rnd)
        f = _fma32(r, hi_c, h)
        f = _fma32(r, lo_c, f)
        e = ec[0]
        for k in range(1, ec.size):
            e = _fma32(e, f, ec[k])
        e = np.float32(e * np.float32(math.ldexp(1.0, int(r))))
        big[i] = np.float32(np.float32(1.0) - e)
        small[i] = lo


def mlas_erf(x: np.ndarray) -> np.ndarray:
    """MlasComputeErf of float32 ``x`` (module docstring), same shape."""
    x = np.ascontiguousarray(x, _F)
    flat = x.reshape(-1)
    big = np.empty_like(flat)
    small = np.empty_like(flat)
    _erf_parts(np.abs(flat), big, small, _SMALL, _BIG, _EXP, _UPPER, _SPLIT, _EXP_LOWER, _LOG2E, _LOG2_HI,
               _LOG2_LO, _ROUND)
    xb = flat.view(np.uint32)
    bits = big.view(np.uint32) | small.view(np.uint32) | (xb & np.uint32(0x80000000))
    bits = np.where(np.isnan(flat), xb | np.uint32(0x00400000), bits)  # NaN: the input NaN, quietened
    return bits.view(_F).reshape(x.shape)


def _gelu_core(v: np.ndarray, tanh: bool) -> np.ndarray:
    """(v * 0.5) * (f(t) + 1) with f = erf(v / sqrt 2) or tanh(v * ((C v) v + B)), float32 roundings."""
    if tanh:
        t = mlas_tanh((v * ((_TANH_C * v).astype(_F) * v + _TANH_B).astype(_F)).astype(_F))
    else:
        t = mlas_erf((v * _SQRT1_2).astype(_F))
    return ((v * _F(0.5)).astype(_F) * (t + _F(1.0)).astype(_F)).astype(_F)


@dataclass(frozen=True)
class MlasErfPlan:
    executed_by: str
    tanh: bool = False


def _prepare_for(op: str, what: str, tanh_attr: bool = False):
    def prepare(node, ctx):
        tensors = [t for t in list(ctx.inputs) + list(ctx.outputs) if t is not None]
        first = ctx.inputs[0] if ctx.inputs else None
        if any(is_quantized(t) for t in tensors) or first is None or str(first.dtype) != "float32":
            k = next(require(op, v) for v in ("ort", "int", "float") if get(op, v) is not None)
            return Delegate(k, k.prepare(node, ctx))
        tanh = tanh_attr and str(node.attr("approximate", "none")) == "tanh"
        return MlasErfPlan(f"MLAS {what}", tanh)
    return prepare


def _delegated(plan, *args):
    return plan.kernel.run(plan.plan, *args) if isinstance(plan, Delegate) else None


@kernel("Erf", VARIANT, prepare=_prepare_for("Erf", "ComputeErf (FMA3)"))
def ort_erf(plan, x):
    out = _delegated(plan, x)
    return out if out is not None else mlas_erf(x)


@kernel("Gelu", VARIANT, prepare=_prepare_for("Gelu", "Gelu (ComputeErf / ComputeTanh)", tanh_attr=True))
def ort_gelu(plan, x):
    out = _delegated(plan, x)
    return out if out is not None else _gelu_core(np.asarray(x, _F), plan.tanh)


@kernel("com.microsoft.Gelu", VARIANT, prepare=_prepare_for("com.microsoft.Gelu", "Gelu (ComputeErf)"))
def ort_ms_gelu(plan, x):
    out = _delegated(plan, x)
    return out if out is not None else _gelu_core(np.asarray(x, _F), False)


@kernel("com.microsoft.BiasGelu", VARIANT, prepare=_prepare_for("com.microsoft.BiasGelu", "BiasGelu (ComputeErf)"))
def ort_bias_gelu(plan, x, bias):
    out = _delegated(plan, x, bias)
    return out if out is not None else _gelu_core((np.asarray(x, _F) + np.asarray(bias, _F)).astype(_F), False)


@kernel("com.microsoft.FastGelu", VARIANT, prepare=_prepare_for("com.microsoft.FastGelu", "FastGelu (ComputeTanh)"))
def ort_fast_gelu(plan, x, bias=None):
    out = _delegated(plan, x, bias) if bias is not None else _delegated(plan, x)
    if out is not None:
        return out
    v = np.asarray(x, _F) if bias is None else (np.asarray(x, _F) + np.asarray(bias, _F)).astype(_F)
    return _gelu_core(v, True)
