"""Shared helpers for spatial kernels: layout, padding and window geometry.

Every spatial float kernel computes in one internal layout, channels-last ``(N, *spatial, C)``;
``layout`` only decides how the input is moved into it and the result moved back.
Spatial attributes (kernel_shape, strides, dilations, pads) are in spatial order whatever the layout;
``pads`` is ONNX's ``[b_1..b_n, e_1..e_n]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError


def to_channels_last(x: np.ndarray, layout: str) -> np.ndarray:
    return x if layout == "NHWC" else np.moveaxis(x, 1, -1)


def from_channels_last(y: np.ndarray, layout: str) -> np.ndarray:
    return y if layout == "NHWC" else np.ascontiguousarray(np.moveaxis(y, -1, 1))


def compute_dtype(x: np.ndarray) -> np.dtype:
    """float64 stays float64; float32/float16 compute in float32 (float16 only rounded at the end)."""
    return np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)


def out_dtype(x: np.ndarray) -> np.dtype:
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)


def ints(v, n: int, default: int) -> list[int]:
    """An int-list attribute of length ``n`` (``default`` repeated when absent)."""
    if v is None:
        return [default] * n
    v = [int(a) for a in np.asarray(v).ravel()]
    if len(v) == 1 and n > 1:
        v = v * n
    return v


@dataclass(frozen=True)
class Window:
    """Resolved window geometry for ``n`` spatial dims."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]  # explicit / SAME padding only (ceil_mode overflow not included)
    out: tuple[int, ...]

    @property
    def extent(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def resolve_window(in_sizes, kernel, strides, dilations, pads, auto_pad: str = "NOTSET",
                   ceil_mode: bool = False, where: str = "") -> Window:
    """ONNX padding rules.

    SAME_*: out = ceil(in / s), total = max((out-1)*s + extent - in, 0); SAME_UPPER puts the odd cell
    at the end (TFLite SAME), SAME_LOWER at the beginning.  NOTSET: ``pads``; VALID: no padding.
    ceil_mode: out = ceil((in + pads - extent) / s) + 1, minus one if the last window would start in
    the end padding (ONNX / ORT rule).
    """
    n = len(in_sizes)
    kernel, strides, dilations = list(kernel), list(strides), list(dilations)
    auto_pad = (auto_pad or "NOTSET").upper()
    pb, pe, out = [], [], []
    for i in range(n):
        ext = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sizes[i] // strides[i])
            total = max((o - 1) * strides[i] + ext - in_sizes[i], 0)
            small = total // 2
            b = small if auto_pad == "SAME_UPPER" else total - small
            pb.append(b)
            pe.append(total - b)
        elif auto_pad == "VALID":
            pb.append(0)
            pe.append(0)
        elif auto_pad == "NOTSET":
            p = ints(pads, 2 * n, 0) if pads is not None else [0] * (2 * n)
            pb.append(p[i])
            pe.append(p[i + n])
        else:
            raise ModelError(f"unknown auto_pad '{auto_pad}'", where or None)
        span = in_sizes[i] + pb[i] + pe[i] - ext
        if span < 0:
            raise ModelError(f"window {ext} larger than padded input {in_sizes[i] + pb[i] + pe[i]}",
                             where or None)
        if ceil_mode and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-span // strides[i]) + 1
            if (o - 1) * strides[i] >= in_sizes[i] + pb[i]:
                o -= 1
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sizes[i] // strides[i])
        else:
            o = span // strides[i] + 1
        out.append(o)
    return Window(tuple(kernel), tuple(strides), tuple(dilations), tuple(pb), tuple(pe), tuple(out))


def pad_channels_last(x: np.ndarray, w: Window, value: float = 0.0) -> np.ndarray:
    """Pad spatial dims of ``x`` (N, *S, C) so every window of ``w`` (incl. ceil_mode) fits."""
    cfg = [(0, 0)]
    for i, s in enumerate(x.shape[1:-1]):
        need = (w.out[i] - 1) * w.strides[i] + w.extent[i]
        end = max(need - s - w.pad_begin[i], 0)
        cfg.append((w.pad_begin[i], end))
    cfg.append((0, 0))
    if all(a == 0 and b == 0 for a, b in cfg):
        return x
    return np.pad(x, cfg, mode="constant", constant_values=value)


def window_offsets(w: Window):
    """Yield (kernel index tuple, slices over padded spatial dims) for each kernel cell."""
    for kidx in np.ndindex(*w.kernel):
        sl = tuple(slice(k * d, k * d + (o - 1) * s + 1, s)
                   for k, d, o, s in zip(kidx, w.dilations, w.out, w.strides))
        yield kidx, sl


def im2col(x: np.ndarray, win: Window) -> np.ndarray:
    """x: (C, *spatial) -> (C * prod(kernel), prod(out)) float32 columns: rows in (channel, kernel
    position row-major) order, one column per output position, padding as zeros (MLAS's
    MlasConvIm2Col and onnx.reference's im2col both use this order)."""
    c = x.shape[0]
    xp = np.pad(x, [(0, 0)] + [(b, e) for b, e in zip(win.pad_begin, win.pad_end)])
    taps = [xp[(slice(None),) + sl].reshape(c, -1) for _, sl in window_offsets(win)]
    return np.ascontiguousarray(np.stack(taps, axis=1).reshape(c * len(taps), -1), dtype=np.float32)
