"""Shared prepare-time helpers of the TFLite integer kernels (every folder under kernels/tflite/): tensor quant params as the C++ sees them (float32 scale, int32 zero point), the fused
activation clamp (``CalculateActivationRangeQuantized``) and the requantization rounding knob."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.ir import Node, TensorInfo
from refinterp.quant import Rounding, requantize, round_half_away
from refinterp.quant.params import activation_range as _activation_range
from refinterp.quant.params import qrange, quantize_bound  # noqa: F401  (the kernels' shared names)


def where(node: Node) -> str:
    return f"node '{node.name}' ({node.source_op or node.op})"


def qparams(t: TensorInfo | None, node: Node, what: str) -> tuple[np.float32, int]:
    """(float32 scale, int zero point) of a per-tensor quantized integer tensor."""
    if t is None or t.quant is None or np.dtype(t.dtype).kind not in "iu":
        raise UnsupportedOpError(f"{where(node)}: {what} tensor '{getattr(t, 'name', '?')}' is not a "
                                 f"quantized integer tensor")
    if t.quant.scale.size != 1:
        raise UnsupportedOpError(f"{where(node)}: {what} tensor '{t.name}' is per-axis quantized; "
                                 f"this op needs per-tensor parameters")
    return np.float32(t.quant.scale[0]), int(t.quant.zero_point[0])


def check_dtype(t: TensorInfo, node: Node, allowed: tuple[str, ...]) -> str:
    if t.dtype not in allowed:
        raise UnsupportedOpError(f"{where(node)}: tensor '{t.name}' has dtype {t.dtype}; the TFLite "
                                 f"integer kernel supports {', '.join(allowed)}")
    return t.dtype


def checked_log2(scale) -> tuple[bool, int]:
    """``CheckedLog2`` (float32, logf): (log2 within 1e-3 of an integer, rounded log2)."""
    from refinterp.quant.lut import logf

    f32 = np.float32
    l2 = f32(logf(scale) * f32(f32(1.0) / logf(2.0)))
    r = f32(round_half_away(l2))
    return bool(abs(float(f32(l2 - r))) < 1e-3), int(r)


def activation_range(act: str | None, scale: np.float32, zp: int, dtype: str, node: Node) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized``: the fused activation folded into the output clamp."""
    return _activation_range(act, scale, zp, dtype, where(node))


def accumulator_settings(ctx: Any) -> Mapping[str, Any]:
    """The ``accumulator`` setting alone (bits, overflow), read-only: what a plan keeps for run time."""
    return MappingProxyType({"accumulator": dict((ctx.settings or {}).get("accumulator") or {})})


def rounding(ctx: Any) -> Rounding:
    """The scheme's integer requantization rounding for this node (default: gemmlowp double)."""
    r = Rounding.parse(((ctx.settings or {}).get("requant") or {}).get("rounding", "double"))
    if r.is_float:
        raise UnsupportedOpError(f"{where(ctx.node)}: requant rounding '{r.value}' is a float form; "
                                 f"this kernel needs an integer multiplier form")
    return r


def float_contract(ctx: Any) -> bool:
    """True when the scheme says the backend's float prepare code fuses ``a * b + c`` (``float_contract: fma``)."""
    return (ctx.settings or {}).get("float_contract", "none") == "fma"


def impl(ctx: Any, allowed: tuple[str, ...], default: str) -> str:
    v = (ctx.settings or {}).get("impl", default)
    if v not in allowed:
        raise UnsupportedOpError(f"{where(ctx.node)}: impl '{v}' is not one of {', '.join(allowed)}")
    return v


def real_multiplier(num: tuple, den: tuple, double: bool) -> float:
    """A kernel's real multiplier prod(num) / prod(den) as the backend's Prepare forms it: float32
    (LiteRT: ``a * b / (c * d)`` written on float scales, each product and the quotient rounded to
    float32, left to right) or double (``double: True``; TFLite Micro, which evaluates even its
    float32-written quotients in double)."""
    if double:
        return float(np.prod([float(v) for v in num])) / float(np.prod([float(v) for v in den]))

    def f32_product(vs):
        p = np.float32(vs[0])
        for v in vs[1:]:
            p = np.float32(p * np.float32(v))
        return p

    return float(np.float32(f32_product(num) / f32_product(den)))


def mbqm(x, M, shift, r: Rounding) -> np.ndarray:
    """MultiplyByQuantizedMultiplier in the scheme's rounding (int32-valued x)."""
    return requantize(np.asarray(x, np.int64), M, shift, r)


def lookup(table: np.ndarray, x: np.ndarray, lo: int, dtype: str) -> np.ndarray:
    """Apply a full-range table (``table[v - lo]``) to stored integers."""
    return table[x.astype(np.int64) - lo].astype(dtype)
