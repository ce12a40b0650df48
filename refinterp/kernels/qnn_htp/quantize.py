"""HTP QuantizeLinear of a float32 tensor to 8 / 16 bits, per tensor: refinterp/quant/htp.py
``quantize_float`` (x times the float32 reciprocal of the scale, exact; 8-bit outputs rounded once to
float16, then half away from zero).  Requantizing an integer input and per-axis scales are refused."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp
from ..registry import kernel
from ..tflite.common import qrange, where
from .common import ARCHS


@dataclass(frozen=True)
class HtpQuantizePlan:
    scale: float
    zp: int
    lo: int
    hi: int
    dtype: str


def _prepare(node, ctx) -> HtpQuantizePlan:
    x, out = ctx.inputs[0], ctx.outputs[0]
    if x is None or x.dtype != "float32":
        raise UnsupportedOpError(f"{where(node)}: QuantizeLinear of a {getattr(x, 'dtype', None)} input is not "
                                 "characterised on the HTP")
    s, z = ctx.const(1), ctx.const(2) if len(ctx.inputs) > 2 else None
    if s is None or np.asarray(s).size != 1 or (z is not None and np.asarray(z).size != 1):
        raise UnsupportedOpError(f"{where(node)}: the HTP rule is measured for constant per-tensor scale and "
                                 "zero point only")
    dtype = out.dtype if out.dtype in ("uint8", "int8", "uint16", "int16") else None
    if dtype is None:
        raise UnsupportedOpError(f"{where(node)}: QuantizeLinear to {out.dtype} is not characterised on the HTP")
    lo, hi = qrange(dtype)
    return HtpQuantizePlan(float(np.asarray(s).ravel()[0]), int(np.asarray(z).ravel()[0]) if z is not None else 0,
                           lo, hi, dtype)


@kernel("QuantizeLinear", tuple(ARCHS), prepare=_prepare, raw_inputs=True)
def htp_quantize_linear(p: HtpQuantizePlan, x, scale=None, zp=None):
    return htp.quantize_float(np.asarray(x, np.float32), p.scale, p.zp, p.lo, p.hi).astype(p.dtype)
