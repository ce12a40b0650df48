"""Activation kernels (float variant; ONNX semantics and attribute defaults).

Outputs keep the input dtype.  float16 inputs are evaluated in float32 and rounded once; float32
inputs are evaluated in float32 (as ONNX Runtime and LiteRT do), float64 in float64.
Integer inputs (ONNX Relu/Clip/LeakyRelu... accept them) stay integer where the op is piecewise
linear with integer breakpoints.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from refinterp.errors import InputError
from refinterp.ir import Node
from .elementwise import erf
from ..registry import AttrPlan, PrepareContext, kernel


def _wide(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float16:
        return x.astype(np.float32)
    if x.dtype.kind in "iub":
        return x.astype(np.float32)
    return x


def _back(y: np.ndarray, like: np.ndarray) -> np.ndarray:
    return np.asarray(y).astype(like.dtype, copy=False)


def _c(v: float, x: np.ndarray):
    """Python float attribute as a scalar of x's evaluation dtype (no float64 promotion)."""
    return x.dtype.type(v)


def _attrs(**defaults):
    def prepare(node: Node, ctx: PrepareContext) -> AttrPlan:
        return AttrPlan(MappingProxyType({k: node.attr(k, d) for k, d in defaults.items()}))
    return prepare


@kernel("Relu", "float")
def _relu(plan, x):
    return _back(np.maximum(x, x.dtype.type(0)), x)


@kernel("Relu6", "float")
def _relu6(plan, x):
    return _back(np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6)), x)


@kernel("ReluN1To1", "float")
def _relu_n1_to_1(plan, x):
    return _back(np.minimum(np.maximum(x, x.dtype.type(-1)), x.dtype.type(1)), x)


@kernel("LeakyRelu", "float", prepare=_attrs(alpha=0.01))
def _leaky_relu(plan, x):
    w = _wide(x)
    return _back(np.where(w < 0, w * _c(plan.attr("alpha"), w), w), x)


@kernel("PRelu", "float")
def _prelu(plan, x, slope):
    # ONNX PRelu broadcasts slope unidirectionally to x; TFLite PRELU alpha broadcasts the same way.
    y = np.where(x < 0, x * slope.astype(x.dtype, copy=False), x)
    return _back(np.broadcast_to(y, x.shape) if y.shape != x.shape else y, x)


def _sigmoid_eval(w: np.ndarray) -> np.ndarray:
    # Split on sign so exp never overflows: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise.
    e = np.exp(-np.abs(w))
    one = w.dtype.type(1)
    return np.where(w >= 0, one / (one + e), e / (one + e))


@kernel("Sigmoid", "float")
def _sigmoid(plan, x):
    return _back(_sigmoid_eval(_wide(x)), x)


@kernel("Tanh", "float")
def _tanh(plan, x):
    return _back(np.tanh(_wide(x)), x)


@kernel("HardSigmoid", "float", prepare=_attrs(alpha=0.2, beta=0.5))
def _hard_sigmoid(plan, x):
    w = _wide(x)
    y = np.clip(w * _c(plan.attr("alpha"), w) + _c(plan.attr("beta"), w), 0, 1)
    return _back(y, x)


@kernel("HardSwish", "float")
def _hard_swish(plan, x):
    w = _wide(x)
    return _back(w * np.clip(w * _c(1.0 / 6.0, w) + _c(0.5, w), 0, 1), x)


@kernel("Gelu", "float", prepare=_attrs(approximate="none"))
def _gelu(plan, x):
    w = _wide(x)
    half = _c(0.5, w)
    if str(plan.attr("approximate")) == "tanh":
        inner = _c(np.sqrt(2.0 / np.pi), w) * (w + _c(0.044715, w) * w * w * w)
        return _back(half * w * (_c(1.0, w) + np.tanh(inner)), x)
    return _back(half * w * (_c(1.0, w) + erf(w * _c(1.0 / np.sqrt(2.0), w))), x)


@kernel("Elu", "float", prepare=_attrs(alpha=1.0))
def _elu(plan, x):
    w = _wide(x)
    with np.errstate(over="ignore"):
        return _back(np.where(w > 0, w, _c(plan.attr("alpha"), w) * np.expm1(np.minimum(w, 0))), x)


@kernel("Selu", "float", prepare=_attrs(alpha=1.67326319217681884765625,
                                        gamma=1.05070102214813232421875))
def _selu(plan, x):
    w = _wide(x)
    neg = _c(plan.attr("alpha"), w) * np.expm1(np.minimum(w, 0))
    return _back(_c(plan.attr("gamma"), w) * np.where(w > 0, w, neg), x)


@kernel("Celu", "float", prepare=_attrs(alpha=1.0))
def _celu(plan, x):
    w = _wide(x)
    a = _c(plan.attr("alpha"), w)
    return _back(np.maximum(w, 0) + np.minimum(0, a * np.expm1(np.minimum(w, 0) / a)), x)


@kernel("ThresholdedRelu", "float", prepare=_attrs(alpha=1.0))
def _thresholded_relu(plan, x):
    w = _wide(x)
    return _back(np.where(w > _c(plan.attr("alpha"), w), w, 0), x)


@kernel("Softplus", "float")
def _softplus(plan, x):
    w = _wide(x)
    return _back(np.logaddexp(w.dtype.type(0), w), x)  # log(1 + e^x) without overflow


@kernel("Softsign", "float")
def _softsign(plan, x):
    w = _wide(x)
    return _back(w / (w.dtype.type(1) + np.abs(w)), x)


@kernel("Mish", "float")
def _mish(plan, x):
    w = _wide(x)
    return _back(w * np.tanh(np.logaddexp(w.dtype.type(0), w)), x)


@kernel("Swish", "float", prepare=_attrs(alpha=1.0))
def _swish(plan, x):
    w = _wide(x)
    return _back(w * _sigmoid_eval(w * _c(plan.attr("alpha"), w)), x)


@kernel("SwiGLU", "float", prepare=_attrs(alpha=1.0))
def _swiglu(plan, a, b):
    """Swish_alpha(a) * b (opset 28); a and b of one shape, no broadcasting."""
    if a.shape != b.shape:
        raise InputError(f"SwiGLU: A {list(a.shape)} and B {list(b.shape)} must have the same shape")
    w = _wide(a)
    return _back(w * _sigmoid_eval(w * _c(plan.attr("alpha"), w)) * _wide(b), a)


@kernel("Shrink", "float", prepare=_attrs(bias=0.0, lambd=0.5))
def _shrink(plan, x):
    w = _wide(x)
    lam, bias = _c(plan.attr("lambd"), w), _c(plan.attr("bias"), w)
    return _back(np.where(w < -lam, w + bias, np.where(w > lam, w - bias, 0)), x)


@kernel("Clip", "float")
def _clip(plan, x, lo=None, hi=None):
    # min > max yields max everywhere (the bounds are applied as max-then-min, like ONNX Runtime).
    y = x
    if lo is not None and lo.size:
        y = np.maximum(y, lo.astype(x.dtype).reshape(()))
    if hi is not None and hi.size:
        y = np.minimum(y, hi.astype(x.dtype).reshape(()))
    return _back(y, x)


@dataclass(frozen=True)
class SoftmaxPlan:
    axis: int
    beta: float


def _softmax_prepare(node: Node, ctx: PrepareContext) -> SoftmaxPlan:
    return SoftmaxPlan(int(node.attr("axis", -1)), float(node.attr("beta", 1.0)))


def _shifted(plan, x):
    w = _wide(x)
    if plan.beta != 1.0:
        w = w * _c(plan.beta, w)
    ax = plan.axis % max(x.ndim, 1) if x.ndim else None
    m = np.max(w, axis=ax, keepdims=True) if w.size else w
    return w - m, ax


@kernel("Softmax", "float", prepare=_softmax_prepare)
def _softmax(plan, x):
    z, ax = _shifted(plan, x)
    e = np.exp(z)
    return _back(e / np.sum(e, axis=ax, keepdims=True), x)


@kernel("LogSoftmax", "float", prepare=_softmax_prepare)
def _log_softmax(plan, x):
    z, ax = _shifted(plan, x)
    return _back(z - np.log(np.sum(np.exp(z), axis=ax, keepdims=True)), x)
