"""Float -> stored integer quantization (used for ``compute: float`` nodes' outputs)."""
from __future__ import annotations

import numpy as np

from .fixedpoint import round_half_away


def quantize_float(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, dtype: str) -> np.ndarray:
    """TFLite reference ``AffineQuantize``: clamp(int(round_half_away(float32(x / scale))) + zp).

    ``scale``/``zero_point`` broadcast against ``x`` (per-tensor scalars or per-axis views, see
    ``QuantParams.broadcast``); the division is done in float32; NaN maps to the zero point.
    """
    info = np.iinfo(np.dtype(dtype))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = round_half_away((np.asarray(x, np.float32) / np.asarray(scale, np.float32)).astype(np.float32))
    q = np.nan_to_num(q.astype(np.float64), nan=0.0, posinf=float(info.max), neginf=float(info.min))
    q = np.clip(q, -2.0 ** 62, 2.0 ** 62).astype(np.int64) + np.asarray(zero_point, np.int64)
    return np.clip(q, info.min, info.max).astype(dtype)
