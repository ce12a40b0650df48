"""Per-node quantization parameters computed the way TFLite's Prepare computes them.

Precision matters for bit-exactness: every helper names the C++ expression it reproduces.
Scales come from the flatbuffer as float32 (``QuantParams.scale`` is float32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError, UnsupportedOpError
from .fixedpoint import quantize_multipliers, round_half_away, wrap_int32
from .requant import Rounding, requantize, requantize_float


def qrange(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def quantize_bound(f: float, scale: np.float32, zp: int) -> int:
    """``zp + int(TfLiteRound(f / scale))`` with the division in float32."""
    return int(zp) + int(round_half_away(np.float32(np.float32(f) / np.float32(scale))))


def activation_range(act: str | None, scale, zero_point, dtype: str, where: str = "") -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` (kernel_util.cc): fused activation -> clamp bounds."""
    lo, hi = qrange(dtype)
    s = np.float32(np.asarray(scale, np.float32).ravel()[0])
    z = int(np.asarray(zero_point).ravel()[0])
    if act in (None, "NONE"):
        return lo, hi
    if act == "RELU":
        return max(lo, quantize_bound(0.0, s, z)), hi
    if act == "RELU6":
        return max(lo, quantize_bound(0.0, s, z)), min(hi, quantize_bound(6.0, s, z))
    if act == "RELU_N1_TO_1":
        return max(lo, quantize_bound(-1.0, s, z)), min(hi, quantize_bound(1.0, s, z))
    raise UnsupportedOpError(f"fused activation {act} is not supported on a quantized node", where or None)


def per_channel_scales(qp, n: int, where: str) -> np.ndarray:
    """Filter scales as float32[n] (a per-tensor scale repeated)."""
    s = np.asarray(qp.scale, np.float32).ravel()
    if s.size == 1:
        return np.repeat(s, n)
    if s.size != n:
        raise ModelError(f"{s.size} filter scales for {n} output channels", where or None)
    return s


def effective_scale_double(s_in, s_w: np.ndarray, s_out) -> np.ndarray:
    """``double(s_in) * double(s_w[c]) / double(s_out)`` (PopulateConvolutionQuantizationParams)."""
    return (np.float64(np.float32(s_in)) * np.asarray(s_w, np.float32).astype(np.float64)
            / np.float64(np.float32(s_out)))


def effective_scale_f32_product(s_in, s_w: np.ndarray, s_out) -> np.ndarray:
    """``double(float(s_in * s_w)) / double(s_out)`` (GetQuantizedConvolutionMultipler)."""
    prod = (np.float32(s_in) * np.asarray(s_w, np.float32)).astype(np.float32)
    return prod.astype(np.float64) / np.float64(np.float32(s_out))


def rounding_of(settings: dict[str, Any], default: str = "double") -> Rounding:
    """The scheme's ``requant.rounding`` for this node (plain-dict settings from the scheme)."""
    return Rounding.parse((settings.get("requant") or {}).get("rounding", default))


def channel_block_of(settings: dict[str, Any], where: str = "") -> tuple[int, Rounding | None]:
    """``requant.channel_block`` / ``requant.block_rounding`` -> (block, rounding) or (0, None)."""
    rq = settings.get("requant") or {}
    block, r = rq.get("channel_block"), rq.get("block_rounding")
    if (block is None) != (r is None):
        raise ModelError("requant.channel_block and requant.block_rounding must be given together",
                         where or None)
    return (0, None) if block is None else (int(block), Rounding.parse(r))


def xnn_scale_f32(s_in, s_w: np.ndarray, s_out) -> np.ndarray:
    """XNNPACK fp32 requantization scale ``(float)((float)(s_in * s_w[c]) / s_out)`` (all float32;
    xnn_init_qs8_conv_minmax_fp32 / qs8_qc8w params), returned as float64 holding float32 values."""
    prod = (np.float32(s_in) * np.asarray(s_w, np.float32)).astype(np.float32)
    return (prod / np.float32(s_out)).astype(np.float32).astype(np.float64)


@dataclass(frozen=True)
class Requant:
    """acc -> clamp(rescale(acc) + zo, lo, hi) stored as ``dtype``.

    ``M``/``shift``/``scale`` are per-tensor (shape ()) or per-channel (shape (C,), broadcast along
    the last axis of the accumulator, see refinterp/quant/requant.py).
    """

    rounding: Rounding
    M: np.ndarray
    shift: np.ndarray
    scale: np.ndarray  # the real multiplier (float64); used by the float forms and for display
    zo: int
    lo: int
    hi: int
    dtype: str
    # Channel blocks (last axis): c < block*floor(C/block) use ``block_rounding``, the tail
    # ``rounding`` (LiteRT OPT vectorised Quantize / MultiplyByQuantizedMultiplier4Rows).
    block: int = 0
    block_rounding: Rounding | None = None

    @classmethod
    def build(cls, eff: np.ndarray, rounding: Rounding, zo: int, lo: int, hi: int, dtype: str,
              block: int = 0, block_rounding: Rounding | None = None) -> "Requant":
        eff = np.asarray(eff, np.float64)
        M, sh = quantize_multipliers(eff)
        if rounding.is_float or block_rounding is None:
            block, block_rounding = 0, None
        return cls(rounding, M.reshape(eff.shape), sh.reshape(eff.shape), eff, int(zo), lo, hi, dtype,
                   int(block), block_rounding)

    def rescale(self, acc: np.ndarray) -> np.ndarray:
        """The rescaled accumulator before the zero point and the clamp."""
        if self.rounding.is_float:
            y = requantize_float(acc, self.scale, self.rounding)
            if self.rounding is Rounding.FLOAT64_HALF_AWAY:
                y = wrap_int32(y)  # static_cast<int32_t> of the rounded double
            return y
        y = requantize(acc, self.M, self.shift, self.rounding)
        acc = np.asarray(acc)
        n_blk = self.block * (acc.shape[-1] // self.block) if self.block and acc.ndim else 0
        if n_blk:
            C = acc.shape[-1]
            M = np.broadcast_to(self.M, (C,))[:n_blk]
            sh = np.broadcast_to(self.shift, (C,))[:n_blk]
            y[..., :n_blk] = requantize(acc[..., :n_blk], M, sh, self.block_rounding)
        return y

    def __call__(self, acc: np.ndarray) -> np.ndarray:
        return np.clip(self.rescale(acc) + self.zo, self.lo, self.hi).astype(self.dtype)

    def describe(self) -> dict[str, Any]:
        d = {"rounding": self.rounding.value, "multiplier": self.M.tolist(), "shift": self.shift.tolist(),
             "scale": self.scale.tolist(), "zero_point": self.zo, "clamp": [self.lo, self.hi]}
        if self.block:
            d["channel_blocks"] = f"channels < {self.block}*floor(C/{self.block}): {self.block_rounding.value}"
        return d


def accumulate_overflow(acc: np.ndarray, settings: dict[str, Any]) -> np.ndarray:
    """Apply the scheme's ``accumulator`` width/overflow to an exact int64 accumulator.

    Only used for int32 accumulators (8-bit paths); 64-bit or absent settings leave ``acc`` exact.
    """
    a = settings.get("accumulator") or {}
    if int(a.get("bits", 64)) != 32:
        return acc
    if a.get("overflow", "wrap") == "saturate":
        return np.clip(acc, -(1 << 31), (1 << 31) - 1)
    return wrap_int32(acc)
