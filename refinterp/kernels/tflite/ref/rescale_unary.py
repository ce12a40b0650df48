"""TFLite integer PRELU and ABS (variant ``tflite_ref``): rescaling ops with their own multipliers.

PRELU, ``reference/prelu.h`` ``BroadcastPrelu4DSlow``.

With d = q - zx (8-bit: [-255, 255]) and a = q_alpha - z_alpha ([-255, 255]; |d * a| < 2^17)::

    d >= 0:  out = clamp(MBQM(d,     M1, e1) + zo, qmin, qmax)     M1 ~ sx / so
    d <  0:  out = clamp(MBQM(d * a, M2, e2) + zo, qmin, qmax)     M2 ~ sx * s_alpha / so

``activations.cc`` (PreluPrepare) forms both real multipliers in float32 arithmetic
(``input->params.scale / output->params.scale``; ``input * alpha / output`` left to right) before
QuantizeMultiplier; TFLite Micro (``impl: float64``) forms them in double, which moves about 1 in 6000
int16 codes by one (measured: tests/conformance/test_tflite_tflm_multipliers.py).  The TFLite Micro
wheel evaluates even its float32-written quotients (``SetAbsOutputMultiplier``, LEAKY_RELU's) in
double: as if built with excess precision / fast-math.  int8 / uint8 with alpha of the same type;
int16 (16x8) with an int8 alpha (|d * a| < 2^23).  Alpha broadcasts
against the input (NumPy rules, as the 4-D slow broadcast).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.quant.fixedpoint import quantize_multiplier
from ..common import check_dtype, impl, mbqm, qparams, qrange, real_multiplier, rounding, where
from refinterp.errors import UnsupportedOpError
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_ref"
_F = np.float32
PRELU_IMPLS = ("float32", "float64")  # how the two real multipliers are formed (module docstring)


@dataclass(frozen=True)
class PReluPlan:
    zx: int
    za: int
    zo: int
    m1: int
    e1: int
    m2: int
    e2: int
    dtype: str
    rounding: str


@dataclass(frozen=True)
class AbsPlan:
    zx: int
    zo: int
    m: int | None  # None: equal scales, codes only shifted
    e: int | None
    dtype: str
    rounding: str


def _prepare(node, ctx) -> PReluPlan:
    x, alpha, y = ctx.inputs[0], ctx.inputs[1] if len(ctx.inputs) > 1 else None, ctx.outputs[0]
    if alpha is None:
        raise UnsupportedOpError(f"{where(node)}: PRELU needs an alpha input")
    dt = check_dtype(x, node, ("int8", "uint8", "int16"))
    if alpha.dtype != ("int8" if dt == "int16" else dt) or y.dtype != dt:
        # LiteRT runs int16 PRELU with an int16 alpha by reading the alpha buffer as int8 bytes
        # (alpha[i] = byte i): refused here rather than reproduced
        raise UnsupportedOpError(f"{where(node)}: dtypes {x.dtype}, alpha {alpha.dtype} -> {y.dtype} are not "
                                 f"supported (int8 / uint8 need alpha of the same type, int16 an int8 alpha)")
    sx, zx = qparams(x, node, "input")
    sa, za = qparams(alpha, node, "alpha")
    so, zo = qparams(y, node, "output")
    double = impl(ctx, PRELU_IMPLS, "float32") == "float64"
    M1, e1 = quantize_multiplier(real_multiplier((sx,), (so,), double))
    M2, e2 = quantize_multiplier(real_multiplier((sx, sa), (so,), double))
    return PReluPlan(zx, za, zo, M1, e1, M2, e2, dt, rounding(ctx).value)


@kernel("PRelu", VARIANT, prepare=_prepare, impls=PRELU_IMPLS)
def qprelu(p, x, alpha):
    d = np.asarray(x).astype(np.int64) - p.zx
    a = np.asarray(alpha).astype(np.int64) - p.za
    r = p.rounding
    pos = mbqm(d, p.m1, p.e1, r)
    neg = mbqm(d * a, p.m2, p.e2, r)
    lo, hi = qrange(p.dtype)
    return np.clip(np.where(d >= 0, pos, neg) + p.zo, lo, hi).astype(p.dtype)


def _prepare_abs(node, ctx):
    """ABS, ``elementwise.cc`` (AbsEval, int8 / int16; int16 zero points 0)::

        v = |q - zx|                                   (int8: <= 255, int16: <= 32768)
        out = clamp(v + zo, qmin, qmax)                 if float32 sx == so
        out = clamp(MBQM(v, M, e) + zo, qmin, qmax)     M ~ float32(sx / so) otherwise
                                                        (``impl: float64``, TFLite Micro: sx / so in double)
    """
    x, y = ctx.inputs[0], ctx.outputs[0]
    dt = check_dtype(x, node, ("int8", "int16"))
    if y.dtype != dt:
        raise UnsupportedOpError(f"{where(node)}: mixed dtypes {x.dtype} -> {y.dtype} are not supported")
    sx, zx = qparams(x, node, "input")
    so, zo = qparams(y, node, "output")
    if dt == "int16" and (zx or zo):
        raise UnsupportedOpError(f"{where(node)}: int16 ABS needs zero points of 0")
    if sx == so:
        M, e = None, None
    else:
        M, e = quantize_multiplier(real_multiplier((sx,), (so,), impl(ctx, PRELU_IMPLS, "float32") == "float64"))
    return AbsPlan(zx, zo, M, e, dt, rounding(ctx).value)


@kernel("Abs", VARIANT, prepare=_prepare_abs, impls=PRELU_IMPLS)
def qabs(p, x):
    v = np.abs(np.asarray(x).astype(np.int64) - p.zx)
    if p.m is not None:
        v = mbqm(v, p.m, p.e, p.rounding)
    lo, hi = qrange(p.dtype)
    return np.clip(v + p.zo, lo, hi).astype(p.dtype)
