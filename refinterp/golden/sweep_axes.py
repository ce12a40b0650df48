"""Scenario names and the value generators of the sweeps (see sweep.py for the scenario list).

``Act`` describes the activation type being swept: int8 (asymmetric, any zero point) or int16
(TFLite 16x8: symmetric activations with zero point 0, int8 weights, int64 conv/FC bias).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPATIAL = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "odd_channels",
           "pad_same", "pad_valid", "stride2", "stride3", "dilation2", "relu", "relu6", "relu_n1_to_1")
ELEMENTWISE = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "odd_channels",
               "broadcast_row", "broadcast_scalar", "scale_ratio", "relu", "relu6")
FC = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "odd_channels", "relu",
      "relu6")
POOL = ("zp_random", "zp_min", "zp_max", "saturate", "ties", "odd_channels", "pad_same", "pad_valid",
        "stride2", "stride3", "filter_1x1", "filter_full", "relu6")
SOFTMAX = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "all_codes",
           "beta_small", "beta_large", "odd_channels", "single_class")
LOGISTIC = ("all_codes", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "zp_random", "ties")


@dataclass(frozen=True)
class Act:
    dtype: str  # "int8" or "int16"

    @property
    def lo(self) -> int:
        return int(np.iinfo(self.dtype).min)

    @property
    def hi(self) -> int:
        return int(np.iinfo(self.dtype).max)

    @property
    def symmetric(self) -> bool:
        return self.dtype == "int16"

    @property
    def bias_dtype(self) -> str:
        return "int64" if self.dtype == "int16" else "int32"

    @property
    def prob_params(self) -> tuple[float, int]:
        """TFLite's required output params of LOGISTIC / SOFTMAX."""
        return (1.0 / 32768, 0) if self.dtype == "int16" else (1.0 / 256, -128)

    def zp(self, rng, sc: str) -> int:
        if self.symmetric:
            return 0
        return {"zp_min": self.lo, "zp_max": self.hi}.get(sc, int(rng.integers(self.lo, self.hi + 1)))

    def data(self, rng, shape, sc: str) -> np.ndarray:
        lo, hi = self.lo, self.hi
        if sc == "saturate":
            return rng.choice(np.array([lo, lo + 1, hi - 1, hi]), size=shape).astype(self.dtype)
        if self.symmetric and sc == "zp_min":  # no zero point to sweep: sweep the lower half instead
            hi = 0
        if self.symmetric and sc == "zp_max":
            lo = 0
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(self.dtype)

    def all_codes(self, rng, rows: int = 1) -> np.ndarray:
        """Every code once per row (int8: 256 values; int16: 4096 codes spread over the full range)."""
        if self.dtype == "int8":
            codes = np.arange(-128, 128)
        else:
            codes = np.unique(np.concatenate([np.arange(-32768, 32768, 16), np.arange(-64, 64), [32767]]))
        return np.stack([rng.permutation(codes) for _ in range(rows)]).astype(self.dtype)


def act_of(sc: str) -> str | None:
    return {"relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}.get(sc)


def pow2(rng, lo: int, hi: int) -> float:
    return float(2.0 ** -int(rng.integers(lo, hi + 1)))


def channels(rng, sc: str, default: tuple[int, ...] = (4, 8, 16)) -> int:
    return int(rng.choice((1, 3, 5, 7, 17) if sc == "odd_channels" else default))


def geometry(rng, sc: str):
    """(padding, strides, dilations, kernel) for a spatial op."""
    if sc in ("pad_valid", "pad_same"):
        pad = "VALID" if sc == "pad_valid" else "SAME_UPPER"
    else:
        pad = str(rng.choice(["SAME_UPPER", "VALID"]))
    s = 2 if sc == "stride2" else 3 if sc == "stride3" else int(rng.choice([1, 1, 2]))
    d = 2 if sc == "dilation2" else 1
    k = (int(rng.choice([1, 2, 3, 5])), int(rng.choice([1, 3])))
    return pad, (s, s), (d, d), k


def out_scale(rng, sc: str, acc_scale: float, typical_acc: float, q: Act) -> float:
    """Output scale: ``typical_acc`` (a typical |accumulator|) maps to about the output range, except
    scale_tiny (everything rounds to the zero point), scale_huge (effective scale > 1: saturates) and
    ties (a power-of-two effective scale: exact .5 cases are frequent)."""
    if sc == "scale_tiny":
        return float(acc_scale * 2.0 ** 20 * (256 if q.dtype == "int16" else 1))
    if sc == "scale_huge":
        return float(acc_scale * 0.75)
    if sc == "ties":
        return float(acc_scale * 2.0 ** int(rng.integers(1, 6)))
    return float(acc_scale * typical_acc * rng.uniform(1.0, 3.0) / q.hi)


def in_scale(rng, sc: str, q: Act) -> float:
    """Input scale of LOGISTIC / SOFTMAX: the real input range is what these kernels are sensitive to."""
    r = 128.0 / (q.hi + 1)  # int16 codes are 256x finer for the same real range
    if sc == "scale_tiny":
        return float(rng.uniform(1e-4, 1e-3) * r)
    if sc == "scale_huge":
        return float(rng.uniform(0.5, 2.0) * r)
    if sc == "ties":
        return pow2(rng, 2, 6) * r
    return float(rng.uniform(0.01, 0.15) * r)
