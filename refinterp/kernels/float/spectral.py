"""Audio front ends inside models: TFLite RFFT2D / COMPLEX_ABS / REAL / IMAG, ONNX DFT / STFT /
HannWindow / HammingWindow / BlackmanWindow / MelWeightMatrix.  Float only (``float`` variant; these
ops carry no quantization in any runtime), every scheme.

Numeric contract: TFLite RFFT2D is computed in float64 (NumPy's pocketfft) and rounded once to
complex64, as LiteRT transforms in double (Ooura's rdft2d); ONNX DFT / STFT transform in the input's
precision (float32 signals in single precision, as NumPy >= 2 and ORT do).  Results agree with the
runtimes within float tolerance, not bit for bit.

ONNX conventions (operator spec): a signal's last dimension is 1 (real) or 2 (real, imaginary);
DFT's ``axis`` is an attribute up to opset 19 (default 1) and an input from opset 20 (default -2);
``onesided`` keeps the first ``n // 2 + 1`` bins; ``inverse`` divides by ``n`` (and with ``onesided``
is the real inverse of a one-sided spectrum, default length ``2 * (bins - 1)``).  STFT frames
``(len - frame_length) // frame_step + 1`` windows of ``frame_length`` (the window's length when a
window is given), multiplies by the window and transforms each frame.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import ModelError
from ..registry import kernel


def _int(v, default=None):
    if v is None:
        return default
    a = np.asarray(v).reshape(-1)
    return default if a.size == 0 else int(a[0])


# -- TFLite ------------------------------------------------------------------------------------
@kernel("RFFT2D", "float")
def _rfft2d(plan, x, fft_length):
    """``[..., H, W]`` float32 -> ``[..., fh, fw // 2 + 1]`` complex64 (inputs cropped / zero padded)."""
    fh, fw = (int(v) for v in np.asarray(fft_length).reshape(-1)[:2])
    if fh <= 0 or fw <= 0:
        raise ModelError(f"RFFT2D fft_length must be positive, got {[fh, fw]}")
    y = np.fft.rfft2(np.asarray(x, np.float64), s=(fh, fw), axes=(-2, -1))
    return y.astype(np.complex64)


@kernel("ComplexAbs", "float")
def _complex_abs(plan, x):
    x = np.asarray(x)
    return np.abs(x.astype(np.complex128)).astype(np.float64 if x.dtype == np.complex128 else np.float32)


@kernel("Real", "float")
def _real(plan, x):
    return np.real(x).copy()


@kernel("Imag", "float")
def _imag(plan, x):
    return np.imag(x).copy()


# -- ONNX --------------------------------------------------------------------------------------
def _as_complex(x: np.ndarray) -> np.ndarray:
    """Complex values of a real / (real, imaginary) signal, in the input's precision (NumPy >= 2
    transforms complex64 in single precision, as ONNX's reference data was made)."""
    ct = np.complex64 if x.dtype in (np.float32, np.float16) else np.complex128
    if x.shape[-1] == 1:
        return x[..., 0].astype(ct)
    if x.shape[-1] == 2:
        z = np.empty(x.shape[:-1], ct)
        z.real, z.imag = x[..., 0], x[..., 1]
        return z
    raise ModelError(f"a DFT signal's last dimension must be 1 or 2, got {x.shape[-1]}")


def _pairs(z: np.ndarray, dtype) -> np.ndarray:
    return np.stack([np.real(z), np.imag(z)], axis=-1).astype(dtype)


@dataclass(frozen=True)
class DftPlan:
    axis_attr: int | None  # None: the axis input (opset 20) or -2
    inverse: int = 0
    onesided: int = 0


@dataclass(frozen=True)
class WindowPlan:
    dtype: Any
    periodic: int = 1
    op: str = ""


def _prepare_dft(node, ctx) -> DftPlan:
    a = node.attrs
    return DftPlan(a.get("axis"), int(a.get("inverse", 0)), int(a.get("onesided", 0)))


@kernel("DFT", "float", prepare=_prepare_dft)
def _dft(plan, x, dft_length=None, axis=None):
    x = np.asarray(x)
    ax = plan.axis_attr if plan.axis_attr is not None else _int(axis, -2)
    ax = int(ax) % x.ndim
    if ax == x.ndim - 1:
        raise ModelError("DFT axis cannot be the last (real / imaginary) dimension")
    z = _as_complex(x)  # the signal axis keeps its index (the pair dimension was last)
    inverse, onesided = plan.inverse, plan.onesided
    n = _int(dft_length)
    if inverse and onesided:
        n = n if n is not None else 2 * (z.shape[ax] - 1)
        return np.fft.irfft(z, n=n, axis=ax)[..., np.newaxis].astype(x.dtype)
    n = n if n is not None else z.shape[ax]
    y = np.fft.ifft(z, n=n, axis=ax) if inverse else np.fft.fft(z, n=n, axis=ax)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=ax)
    return _pairs(y, x.dtype)


def _prepare_stft(node, ctx) -> DftPlan:
    return DftPlan(None, onesided=int(node.attrs.get("onesided", 1)))


@kernel("STFT", "float", prepare=_prepare_stft)
def _stft(plan, signal, frame_step, window=None, frame_length=None):
    x = np.asarray(signal)
    z = _as_complex(x)  # [batch, length]
    step = _int(frame_step)
    w = None if window is None else np.asarray(window).reshape(-1).astype(z.real.dtype)
    n = _int(frame_length, w.size if w is not None else None)
    if n is None or step is None or n <= 0 or step <= 0:
        raise ModelError("STFT needs a positive frame_step and a window or frame_length")
    if w is not None and w.size != n:
        raise ModelError(f"STFT window of {w.size} values for frame_length {n}")
    frames = (z.shape[-1] - n) // step + 1
    if frames <= 0:
        raise ModelError(f"STFT signal of {z.shape[-1]} samples is shorter than frame_length {n}")
    idx = np.arange(frames)[:, None] * step + np.arange(n)[None, :]
    f = z[..., idx]  # [batch, frames, n]
    if w is not None:
        f = f * w
    y = np.fft.fft(f, n=n, axis=-1)
    if plan.onesided:
        y = y[..., :n // 2 + 1]
    return _pairs(y, x.dtype)


_ONNX_FLOAT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64, 2: np.uint8, 3: np.int8, 4: np.uint16,
                     5: np.int16, 6: np.int32, 7: np.int64, 12: np.uint32, 13: np.uint64}


def _prepare_window(node, ctx):
    code = int(node.attrs.get("output_datatype", 1))
    if code not in _ONNX_FLOAT_TYPES:
        raise ModelError(f"node '{node.name}' ({node.op}): output_datatype {code} is not supported")
    return WindowPlan(_ONNX_FLOAT_TYPES[code], int(node.attrs.get("periodic", 1)), node.op)


_WINDOWS = {"HannWindow": ((0.5, -0.5, 0.0)), "HammingWindow": ((25 / 46, -(1 - 25 / 46), 0.0)),
            "BlackmanWindow": ((0.42, -0.5, 0.08))}


def _window(plan, size):
    n = _int(size)
    if n is None or n < 0:
        raise ModelError(f"{plan.op} size must be a non-negative integer")
    a0, a1, a2 = _WINDOWS[plan.op]
    denom = n if plan.periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    ang = 2 * np.pi * k / denom if denom > 0 else np.zeros(n)
    return (a0 + a1 * np.cos(ang) + a2 * np.cos(2 * ang)).astype(plan.dtype)


for _op in _WINDOWS:
    kernel(_op, "float", prepare=_prepare_window)(_window)


def _prepare_mel(node, ctx):
    code = int(node.attrs.get("output_datatype", 1))
    if code not in _ONNX_FLOAT_TYPES:
        raise ModelError(f"node '{node.name}' (MelWeightMatrix): output_datatype {code} is not supported")
    return WindowPlan(_ONNX_FLOAT_TYPES[code])


@kernel("MelWeightMatrix", "float", prepare=_prepare_mel)
def _mel(plan, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """Triangular filters ``[dft_length // 2 + 1, num_mel_bins]`` on the mel scale
    (2595 log10(1 + f / 700)); band edges at spectrogram bins floor((dft_length + 1) f / sample_rate)."""
    bins, n, rate = _int(num_mel_bins), _int(dft_length), _int(sample_rate)
    lo, hi = float(np.asarray(lower_edge_hertz).reshape(-1)[0]), float(np.asarray(upper_edge_hertz).reshape(-1)[0])
    mel_lo = 2595 * np.log1p(lo / 700) / np.log(10)
    mel_hi = 2595 * np.log1p(hi / 700) / np.log(10)
    step = (mel_hi - mel_lo) / (bins + 2)
    mels = np.arange(bins + 2) * step + mel_lo
    edges = (((n + 1) * (700 * np.expm1(mels / 2595 * np.log(10)))) // rate).astype(np.int64)
    out = np.zeros((n // 2 + 1, bins))
    for i in range(bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return out.astype(plan.dtype)
