"""Conversions between a dump's stored values and the model's tensors (real values, codes, LSBs)."""
from __future__ import annotations

import numpy as np

from ..ir import QuantParams, TensorInfo, dequantize


def same_quant(a: QuantParams | None, b: QuantParams | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.scale.shape != b.scale.shape or a.zero_point.shape != b.zero_point.shape:
        return False
    return bool(np.allclose(a.scale, b.scale, rtol=1e-6, atol=0) and np.array_equal(a.zero_point, b.zero_point))


def is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iub"


def to_real(a: np.ndarray, qp: QuantParams | None) -> np.ndarray:
    """float64 real values: integer codes are dequantized when ``qp`` is known."""
    if is_int(a) and a.dtype.kind != "b" and qp is not None:
        return dequantize(a, qp).astype(np.float64)
    return np.asarray(a, dtype=np.float64)


def quantize_to(real: np.ndarray, info: TensorInfo) -> np.ndarray:
    """Real values -> the model tensor's integer codes: round half to even, saturate to the dtype."""
    dt = np.dtype(info.dtype)
    s, z = info.quant.broadcast(real.shape)
    with np.errstate(all="ignore"):
        q = np.rint(np.asarray(real, np.float64) / s) + z
    lim = np.iinfo(dt)
    return np.clip(np.nan_to_num(q, nan=0.0), lim.min, lim.max).astype(dt)


def to_stored(a: np.ndarray, dev_qp: QuantParams | None, info: TensorInfo) -> np.ndarray:
    """A device value in the form the model stores this tensor (codes for quantized tensors)."""
    dt = np.dtype(info.dtype)
    if dt.kind in "iu" and info.quant is not None:
        if is_int(a) and (dev_qp is None or same_quant(dev_qp, info.quant)):
            return a.astype(dt)
        return quantize_to(to_real(a, dev_qp), info)
    if dt.kind == "f":
        return to_real(a, dev_qp).astype(dt)
    return np.asarray(a).astype(dt)


def lsb_error(ref: np.ndarray, dev: np.ndarray, ref_real: np.ndarray, dev_real: np.ndarray,
              codes_comparable: bool, qp: QuantParams) -> np.ndarray:
    """(device - reference) in LSBs of the tensor's own scale (per channel for per-axis tensors)."""
    if codes_comparable:
        return dev.astype(np.int64) - ref.astype(np.int64)
    s, _ = qp.broadcast(ref_real.shape)
    with np.errstate(all="ignore"):
        return (dev_real - ref_real) / s.astype(np.float64)
