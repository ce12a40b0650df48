"""HTP bilinear Resize (ONNX mode "linear", half_pixel coordinates) on 8-bit NCHW activations, v68 and
v73 alike, as measured against Qualcomm's host emulation of the HTP (onnxruntime-qnn 2.7.0;
tests/conformance/test_qnn_htp_resize.py).

Coordinates come from the *size* ratio, not from the Resize's ``scales`` (the two differ where
in * scale is not a whole number): for output cell o of an axis with n_in -> n_out cells,
x = clamp((o + 1/2) n_in / n_out - 1/2, 0, n_in - 1), taps x0 = floor(x), x1 = min(x0 + 1, n_in - 1),
weight l = x - x0, and the four taps of a cell weigh (1 - l_y)(1 - l_x), (1 - l_y) l_x, l_y (1 - l_x),
l_y l_x.

* Output parameters equal to the input's: the interpolation of the stored codes, rounded half up
  (exact rationals here).  Measured for whole-number upscaling only (factors 2 and 3: 0 differences);
  with fractional size ratios (7 / 5, 10 / 7, 2 / 5, 3 / 7) about 1 code in 20 differs from it (no
  fixed-point weight of 4 .. 16 bits fits): refused.
* Other output parameters: the interpolation of the dequantized values, rounded once to float32, then
  the HTP's QuantizeLinear (refinterp/quant/htp.py ``quantize_float``: float16 rounding).  Factors 2, 3,
  1.5 and 0.5 on 2 x 2 and 5 x 7 images (size ratios 2, 3, 3 / 2, 1 / 2, 7 / 5, 10 / 7, 2 / 5, 3 / 7),
  uint8 and int8: 0 differences; rounding the real value half up instead differs on 1-3% of the codes,
  the codes interpolated and then requantized on 30% (float32 evaluation orders of the four taps are
  indistinguishable on these sweeps).

Upscaling beyond 3 is refused, on either branch: by 8 on unchanged parameters (torchvision's LR-ASPP head, 8 x 8 ->
64 x 64, 21 channels) 8 codes of 86,016 differ from the code-domain rule, on v68 and v73.

Other coordinate modes, cubic, antialiasing and resizing N or C are refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp
from ..tflite.common import qparams, qrange, where


@dataclass(frozen=True)
class BilinearPlan:
    ys: tuple  # (i0, i1, numerator, denominator) per output row: l_y = numerator / denominator
    xs: tuple  # the same per output column
    same: bool  # output parameters equal to the input's: the code-domain rule
    x_scale: float
    x_zero: int
    y_scale: float
    y_zero: int
    lo: int
    hi: int
    dtype: str


def _axis(n_in: int, n_out: int):
    """Taps and exact rational weights of one axis (half_pixel on the size ratio, clamped)."""
    i0, i1, num = [], [], []
    den = 2 * n_out
    for o in range(n_out):
        x = Fraction((2 * o + 1) * n_in - n_out, den)  # (o + 1/2) n_in / n_out - 1/2
        x = min(max(x, Fraction(0)), Fraction(n_in - 1))
        f = x.numerator // x.denominator
        i0.append(f)
        i1.append(min(f + 1, n_in - 1))
        num.append(int((x - f) * den))
    return np.array(i0), np.array(i1), np.array(num, np.int64), den


def prepare(node, ctx) -> BilinearPlan:
    x, out = ctx.inputs[0], ctx.outputs[0]
    ctm = str(node.attrs.get("coordinate_transformation_mode") or "half_pixel")
    shapes_known = x.shape is not None and out.shape is not None and len(x.shape) == len(out.shape) == 4 \
        and all(isinstance(v, int) for v in (*x.shape, *out.shape))
    if ctm == "pytorch_half_pixel" and shapes_known and min(out.shape[2:]) > 1:
        ctm = "half_pixel"  # the same coordinates unless an output axis has one cell
    if ctm != "half_pixel" or not shapes_known or int(node.attrs.get("antialias", 0) or 0) \
            or tuple(x.shape[:2]) != tuple(out.shape[:2]) or (node.attrs.get("layout") or "NCHW") != "NCHW":
        raise UnsupportedOpError(f"{where(node)}: bilinear Resize ({ctm}, {x.shape} -> {out.shape}) is characterised "
                                 "on the HTP for half_pixel coordinates over H and W of NCHW tensors only")
    (xs_, xz), (ys_, yz) = qparams(x, node, "X"), qparams(out, node, "Y")
    same = (xs_, xz) == (ys_, yz)
    if same and not all(o % i == 0 for i, o in zip(x.shape[2:], out.shape[2:])):
        raise UnsupportedOpError(f"{where(node)}: bilinear Resize {x.shape} -> {out.shape} on unchanged quantization "
                                 "parameters is characterised on the HTP for whole-number upscaling only")
    if any(o > 3 * i for i, o in zip(x.shape[2:], out.shape[2:])):
        raise UnsupportedOpError(f"{where(node)}: bilinear Resize {x.shape} -> {out.shape} is characterised on the HTP "
                                 "up to 3x upscaling (by 8 on unchanged parameters: 8 codes of 86,016 off, an LR-ASPP "
                                 "head), not beyond")
    lo, hi = qrange(out.dtype)
    return BilinearPlan(_axis(x.shape[2], out.shape[2]), _axis(x.shape[3], out.shape[3]), same,
                        float(xs_), int(xz), float(ys_), int(yz), lo, hi, out.dtype)


def run(p: BilinearPlan, x) -> np.ndarray:
    q = np.asarray(x).astype(np.int64)
    y0, y1, ny, dy = p.ys
    x0, x1, nx, dx = p.xs
    rows0, rows1 = q[:, :, y0], q[:, :, y1]
    a, b, c, d = rows0[..., x0], rows0[..., x1], rows1[..., x0], rows1[..., x1]
    wy, wx = ny[:, None], nx[None, :]
    # S / (dy dx) is the interpolated code; |S| < 256 dy dx < 2^40 for any image size in int64
    S = (dy - wy) * (dx - wx) * a + (dy - wy) * wx * b + wy * (dx - wx) * c + wy * wx * d
    D = dy * dx
    if p.same:
        return np.clip((2 * S + D) // (2 * D), p.lo, p.hi).astype(p.dtype)  # half up, exact
    real = ((S - p.x_zero * D) / D * p.x_scale).astype(np.float32)  # one rounding to float32
    return htp.quantize_float(real, p.y_scale, p.y_zero, p.lo, p.hi).astype(p.dtype)
