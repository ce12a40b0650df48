"""Element-wise arithmetic, comparison and logic kernels (ONNX semantics, NumPy broadcasting).

Every kernel keeps the dtype of its first data input (ONNX's type constraint ``T``); comparisons
return bool.  float16 inputs of transcendental functions are evaluated in float32 and rounded
back to float16 once.  Integer overflow wraps (two's complement), as in ONNX Runtime.
"""
from __future__ import annotations

import math

import numba
from dataclasses import dataclass

import numpy as np

from refinterp.ir import Node
from ..registry import PrepareContext, kernel

_BOTH = ("float", "int")


def _wide(x: np.ndarray) -> np.ndarray:
    """float16 -> float32 for evaluation; other dtypes unchanged."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _keep(y: np.ndarray, like: np.ndarray) -> np.ndarray:
    return np.asarray(y).astype(like.dtype, copy=False)


@numba.njit(cache=True)
def _erf_loop(flat, out):  # pragma: no cover - compiled
    for i in range(flat.size):
        out[i] = math.erf(flat[i])


def erf(x: np.ndarray) -> np.ndarray:
    """libm erf evaluated in float64 and rounded to the input's float dtype."""
    flat = np.ascontiguousarray(x, dtype=np.float64).ravel()
    out = np.empty_like(flat)
    _erf_loop(flat, out)
    return out.reshape(np.shape(x)).astype(x.dtype if x.dtype.kind == "f" else np.float32)


# -- binary arithmetic -----------------------------------------------------------------------

def _add(plan, a, b):
    return _keep(np.add(a, b), a)


def _sub(plan, a, b):
    return _keep(np.subtract(a, b), a)


def _mul(plan, a, b):
    return _keep(np.multiply(a, b), a)


def _div(plan, a, b):
    if a.dtype.kind in "iub":
        # Integer quotient truncated toward zero (C semantics); a zero divisor yields 0.
        b = np.asarray(b, dtype=a.dtype)
        safe = np.where(b == 0, 1, b)
        q = np.floor_divide(a, safe)
        r = np.remainder(a, safe)
        q = q + ((r != 0) & ((a < 0) ^ (safe < 0))).astype(q.dtype)
        return _keep(np.where(b == 0, 0, q), a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _keep(np.divide(a, b), a)


def _pow(plan, a, b):
    with np.errstate(all="ignore"):
        if a.dtype.kind in "iu":
            # Integer base: evaluate in float64 (exact below 2**53) so negative exponents work.
            y = np.power(a.astype(np.float64), np.asarray(b, dtype=np.float64))
            return _keep(np.trunc(np.nan_to_num(y)), a)
        return _keep(np.power(_wide(a), b), a)


def _mod(plan, a, b):
    fmod = int(plan.attr("fmod", 0))
    # fmod=1: sign of the dividend (C fmod); fmod=0: sign of the divisor (Python %), floats too.
    with np.errstate(divide="ignore", invalid="ignore"):
        if fmod:
            return _keep(np.fmod(a, b), a)
        return _keep(np.mod(a, b), a)


def _floor_div(plan, a, b):
    """TFLite FLOOR_DIV: floats floor(a / b) (the quotient rounded in the input type first); integers
    floor division (a zero divisor is the runtime's error, here 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if np.asarray(a).dtype.kind == "f":
            return _keep(np.floor(np.divide(a, b)), a)
        return _keep(np.floor_divide(a, np.where(b == 0, 1, b)), a)


def _squared_difference(plan, a, b):
    d = np.subtract(a, b)
    return _keep(d * d, a)


for _op, _fn in (("Add", _add), ("Sub", _sub), ("Mul", _mul), ("Div", _div), ("Pow", _pow),
                 ("Mod", _mod), ("SquaredDifference", _squared_difference), ("FloorDiv", _floor_div)):
    kernel(_op, "float")(_fn)


# -- variadic ----------------------------------------------------------------------------------

def _fold(fn):
    def run(plan, *xs):
        xs = [x for x in xs if x is not None]
        y = xs[0]
        for x in xs[1:]:
            y = fn(y, x)
        return _keep(np.broadcast_to(y, np.broadcast_shapes(*[x.shape for x in xs])).copy(), xs[0])
    return run


kernel("Max", "float")(_fold(np.maximum))   # NaN propagates (np.maximum), as ONNX Runtime does
kernel("Min", "float")(_fold(np.minimum))
kernel("Sum", "float")(_fold(np.add))


@kernel("Mean", "float")
def _mean(plan, *xs):
    xs = [x for x in xs if x is not None]
    y = _fold(np.add)(plan, *xs)
    if y.dtype.kind in "iu":
        return _keep(y // len(xs), xs[0])
    return _keep(y / y.dtype.type(len(xs)), xs[0])


# -- unary ------------------------------------------------------------------------------------

def _unary(fn, wide: bool = True):
    def run(plan, x):
        with np.errstate(all="ignore"):
            return _keep(fn(_wide(x) if wide else x), x)
    return run


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _reciprocal(x):
    if x.dtype.kind in "iu":
        return np.where(x == 0, 0, 1 // np.where(x == 0, 1, x))
    return np.reciprocal(x)


def _erf(x):
    return erf(x) if x.dtype.kind == "f" else erf(x.astype(np.float64))


_UNARY = {
    "Abs": (np.abs, False), "Neg": (np.negative, False), "Sqrt": (np.sqrt, True),
    "Exp": (np.exp, True), "Log": (np.log, True), "Erf": (_erf, False),
    "Floor": (np.floor, False), "Ceil": (np.ceil, False),
    "Round": (np.rint, False),  # round half to even
    "Reciprocal": (_reciprocal, False), "Sign": (np.sign, False), "Rsqrt": (_rsqrt, True),
    "Square": (np.square, False), "Sin": (np.sin, True), "Cos": (np.cos, True),
    "Tan": (np.tan, True), "Asin": (np.arcsin, True), "Acos": (np.arccos, True),
    "Atan": (np.arctan, True), "Sinh": (np.sinh, True), "Cosh": (np.cosh, True),
    "Asinh": (np.arcsinh, True), "Acosh": (np.arccosh, True), "Atanh": (np.arctanh, True),
}
for _op, (_fn, _w) in _UNARY.items():
    kernel(_op, "float")(_unary(_fn, _w))


@kernel("IsNaN", "float")
def _isnan(plan, x):
    return np.isnan(x)


@dataclass(frozen=True)
class IsInfPlan:
    neg: int
    pos: int


def _isinf_prepare(node: Node, ctx: PrepareContext) -> IsInfPlan:
    return IsInfPlan(int(node.attr("detect_negative", 1)), int(node.attr("detect_positive", 1)))


@kernel("IsInf", "float", prepare=_isinf_prepare)
def _isinf(plan, x):
    return np.isinf(x) & (((x > 0) & bool(plan.pos)) | ((x < 0) & bool(plan.neg)))


# -- comparison and logic ---------------------------------------------------------------------

_CMP = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
        "GreaterOrEqual": np.greater_equal, "NotEqual": np.not_equal,
        "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


def _cmp(fn):
    def run(plan, a, b):
        return np.asarray(fn(a, b), dtype=bool)
    return run


for _op, _fn in _CMP.items():
    kernel(_op, "float")(_cmp(_fn))


@kernel("Not", "float")
def _not(plan, x):
    return np.logical_not(x)


_BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}


def _bitwise(fn):
    def run(plan, a, b):
        return _keep(fn(a, np.asarray(b, dtype=a.dtype)), a)
    return run


for _op, _fn in _BITWISE.items():
    kernel(_op, "float")(_bitwise(_fn))


@kernel("BitwiseNot", "float")
def _bitwise_not(plan, x):
    return np.invert(x)


@kernel("Where", _BOTH)
def _where(plan, cond, x, y):
    return _keep(np.where(cond.astype(bool), x, y), x)


@dataclass(frozen=True)
class ShiftPlan:
    left: bool


def _bitshift_prepare(node: Node, ctx: PrepareContext) -> ShiftPlan:
    return ShiftPlan(str(node.attr("direction", "LEFT")).upper() == "LEFT")


@kernel("BitShift", "float", prepare=_bitshift_prepare)
def _bitshift(plan, a, b):
    b = np.asarray(b, dtype=a.dtype)
    return _keep(np.left_shift(a, b) if plan.left else np.right_shift(a, b), a)
