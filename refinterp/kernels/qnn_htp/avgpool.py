"""HTP AveragePool on 8-bit and uint16 activations, stride 1 (v68 and v73; measured against the emulator,
tests/conformance/test_qnn_htp_pool.py).  The HTP picks a kernel by the window; three were found:

* square windows of 3, 5, 6 or 7 cells a side: a depthwise convolution whose weights are all one
  weight code 128 on the scale s_w = f32(f32(1 / n) / 128), n = k * k, so the accumulator is 128 S,
  S = the window sum of q - z_x (padding cells count as z_x, i.e. 0; count_include_pad 1), requantized
  by the arch's convolution rule with M = f32(f32(s_x * s_w) / s_y): v73 ``htp.conv_requant``, v68
  ``htp_ops.conv_requant_v68`` (its folded zero point Z = round(f32(z_y / M)) is what separates the
  weight code: 1 misses 29-79 codes in 12,000 on 3x3 and 5x5, 8 still 16 on 5x5; 32 to 128 fit all).
* 8x8, and any window covering the whole unpadded input: GlobalAveragePool's rule (``htp_pool.average``,
  a 15-bit multiplier; the float32 path below misses 2-7 codes in 6,000 on 8x8, this rule none).
* every other window up to 15 x 15 (2x2, 4x4, 9x9 .. 15x15, non-square ones to 16 cells a side): the
  HTP's float32 path -- x = f32((q - z_x) s_x), the window summed in float32 cell by cell in row-major
  order, divided by the cell count (count_include_pad as the attribute says; padding adds 0.0), then
  ``htp.float_path_codes`` (times f32(1 / s_y), plus the zero point, rounded half to even).  Summing
  as a tree, column-major or exactly misses 6-31 codes at exact ties; GlobalAveragePool's rule 1-34 in
  30,000.

On uint16 (v68 and v73) the convolution windows run the arch's 16-bit convolution with every weight code
32 on s_w = f32(f32(1 / n) / 32): A = 32 (S + (z_x - 32768) n) (padding cells as z_x), M =
f32(f32(s_x / s_y) s_w) -- this order: f32(f32(s_x s_w) / s_y), float64 and four other float32 orders
are one ulp off on about one scale set in five, 4-15 codes in 6,000 there -- then v73 ``htp.conv16_requant``
on g = (A >> 8) - round(Z / 256), v68 ``htp_ops.folded_zero_point16`` / ``conv16_multiplier_v68``;
every other window takes the float32 path, 8x8 included (GlobalAveragePool's rule misses 199-2,677 codes
there), whole-input windows GlobalAveragePool's rule.  Weight codes 1 .. 16, 64, 128 and 255 miss thousands
of codes.  0 differences over 41 uint16 jobs per arch.  int16: the QNN EP does not take AveragePool.

2x2 windows with strides 2 (8-bit and uint16, v68 and v73): a kernel of their own, the exact window sum
times a 15-bit multiplier rounded once (A >= 1/2) or twice (``htp_pool.pair_average``); over a whole
unpadded input (one window) GlobalAveragePool's rule, as for stride 1 (measured: 0 of 3,072 codes off it,
21-26 per 1,024 off the 2x2 stride-2 rule at A < 1/2).

Refused: other strides (3x3 / 5x5 / 4x4 with stride 2 miss 1-28 codes in 2,700-3,100 under every rule tried;
4x4 with stride 4 fits the float32 path on some input sizes and misses a third of the codes on others: not
characterised, refinterp/kernels/qnn_htp/MEASURED.md), a 2x2 stride-2 window over padding or past the input
(ceil_mode on an odd size: the edge windows follow neither divisor), 16x16 (74 of 4,704 codes off both the
float32 path and the 15-bit rule) and larger windows, a padded convolution window with count_include_pad 0
(25-82 codes off inside the image too), a padded 8x8 window; spatial ranks other than 2 and dilations (not
measured).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_ops, htp_pool
from ..float import pool as float_pool
from ..spatial import from_channels_last, pad_channels_last, to_channels_last
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, htp_kernel, require_8bit, shift_of

CONV_WINDOWS = (3, 5, 6, 7)  # k x k windows the HTP runs as a depthwise convolution (measured 2 .. 16)
AVERAGE_WINDOWS = (8,)  # k x k windows on GlobalAveragePool's rule
MAX_SQUARE, MAX_SIDE = 15, 16  # the largest square / side measured on the rules above
WEIGHT_CODE = 128
WEIGHT_CODE16 = 32  # uint16


@dataclass(frozen=True)
class HtpAvgPoolPlan:
    fplan: Any            # the float pool's plan: window, padding, count_include_pad
    kind: str             # "conv", "conv16" (uint16), "average" (GlobalAveragePool's rule), "pair" (2x2 stride 2)
                          # or "float"
    padded: bool
    arch: str
    M: float              # conv: the multiplier of the accumulator 128 S (conv16: of A = 32 (...))
    xs: float
    zx: int
    ys: float
    zy: int               # raw (the shift is applied where the rule needs it)
    shift: int            # 128 for int8 (the HTP's uint8 domain)
    lo: int
    hi: int
    dtype: str
    pair: tuple = ()      # "pair": htp_pool.pair_average_params, derived once here


def _prepare(node, ctx, arch: str) -> HtpAvgPoolPlan:
    x, y = ctx.inputs[0], ctx.outputs[0]
    sixteen = x is not None and y is not None and x.dtype == y.dtype == "uint16"
    if x is not None and x.dtype == "int16":  # measured: the EP leaves it unassigned
        raise UnsupportedOpError(f"{where(node)}: an int16 AveragePool: the QNN EP does not take it onto the HTP")
    if not sixteen:
        require_8bit(node, [x, y])
    fp = float_pool.prepare_node(node, ctx)
    nd = len(fp.kernel_shape)
    strides = tuple(fp.strides or (1,) * nd)
    pair = nd == 2 and tuple(fp.kernel_shape) == (2, 2) and strides == (2, 2)
    if nd != 2 or any(v != 1 for v in (fp.dilations or ())) or (any(v != 1 for v in strides) and not pair):
        raise UnsupportedOpError(f"{where(node)}: AveragePool (kernel {fp.kernel_shape}, strides {fp.strides}, "
                                 f"dilations {fp.dilations}) is characterised on the HTP for 2-D windows with "
                                 "stride 1 and for 2x2 windows with strides 2 only (other strided windows run "
                                 "other kernels, not characterised)")
    kh, kw = fp.kernel_shape
    if max(kh, kw) > MAX_SIDE or kh == kw > MAX_SQUARE:
        raise UnsupportedOpError(f"{where(node)}: a {kh}x{kw} AveragePool is not characterised on the HTP (measured "
                                 f"to {MAX_SQUARE}x{MAX_SQUARE} and {MAX_SIDE} cells a side; 16x16 follows another rule)")
    square = kh if kh == kw else None
    kind = "conv" if square in CONV_WINDOWS else "average" if square in AVERAGE_WINDOWS else "float"
    padded = any(fp.pads or ()) or str(fp.auto_pad).upper() not in ("NOTSET", "VALID")
    if padded and (kind == "average" or kind == "conv" and not fp.count_include_pad):
        raise UnsupportedOpError(f"{where(node)}: a padded {kh}x{kw} AveragePool"
                                 f"{'' if kind == 'average' else ' with count_include_pad 0'} is not characterised "
                                 "on the HTP (not measured for 8x8; measured for the convolution windows: neither "
                                 "their convolution nor the float32 rule)")
    if sixteen:  # uint16: the convolution windows on the 16-bit convolution, all others (8x8 too) float32
        kind = "conv16" if kind == "conv" else "float"
    (xs, zx), (ys, zy) = qparams(x, node, "X"), qparams(y, node, "Y")
    pair_params = ()
    if pair:
        if padded:
            raise UnsupportedOpError(f"{where(node)}: a padded 2x2 stride-2 AveragePool is not characterised on the "
                                     "HTP (its windows over the padding follow neither divisor)")
        kind = "pair"
        try:
            pair_params = htp_pool.pair_average_params(float(xs) / (4 * float(ys)))
        except ValueError as e:
            raise UnsupportedOpError(f"{where(node)}: a 2x2 stride-2 AveragePool: {e}") from None
    f32 = np.float32
    if kind == "conv16":
        ws = f32(f32(f32(1) / f32(kh * kw)) / f32(WEIGHT_CODE16))
        M = float(f32(f32(f32(xs) / f32(ys)) * ws))
    else:
        ws = f32(f32(f32(1) / f32(kh * kw)) / f32(WEIGHT_CODE))
        M = float(f32(f32(f32(xs) * ws) / f32(ys)))
    lo, hi = qrange(y.dtype)
    return HtpAvgPoolPlan(fp, kind, padded, arch, M, xs, zx, ys, zy, shift_of(y.dtype), lo, hi, y.dtype,
                          pair_params)


def _window_sum(p: HtpAvgPoolPlan, x: np.ndarray) -> np.ndarray:
    """S = the exact window sum of q - z_x (padding cells 0), channels last; |S| <= 15 * 16 * 65535."""
    xc = to_channels_last(x.astype(np.int64) - p.zx, p.fplan.layout)
    win = float_pool.window(p.fplan, xc.shape[1:-1])
    return float_pool.sum_windows(pad_channels_last(xc, win), win, np.int64)


def _conv16(p: HtpAvgPoolPlan, s: np.ndarray) -> np.ndarray:
    """The uint16 convolution windows: the arch's 16-bit convolution on A = 32 (S + (z_x - 32768) n), every
    tap on weight code 32 (padding cells as z_x); |A| <= 32 * 49 * 65535 < 2^27."""
    n = int(np.prod(p.fplan.kernel_shape))
    z = (p.zx - 32768) * WEIGHT_CODE16 * n
    g = ((WEIGHT_CODE16 * s + z) >> 8) - int(np.floor(z / 256 + 0.5))
    if p.arch == "v68":
        return htp_ops.conv16_apply_v68(g, htp_ops.folded_zero_point16(p.zy, p.M), htp_ops.conv16_multiplier_v68(p.M))
    return htp.conv16_requant(g, p.M, p.zy, p.lo, p.hi)


def _pair(p: HtpAvgPoolPlan, x: np.ndarray) -> np.ndarray:
    """The 2x2 stride-2 kernel (``htp_pool.pair_average``) on windows wholly inside the input."""
    spatial = to_channels_last(x, p.fplan.layout).shape[1:-1]
    win = float_pool.window(p.fplan, spatial)
    if any(2 * o > d for o, d in zip(win.out, spatial)):
        raise UnsupportedOpError(f"node '{p.fplan.name}': a 2x2 stride-2 AveragePool with ceil_mode over the odd "
                                 f"input size {tuple(spatial)}: its last window hangs past the input, not "
                                 "characterised on the HTP")
    s = from_channels_last(_window_sum(p, x), p.fplan.layout)
    return htp_pool.pair_average(s, p.pair, p.zy, p.lo, p.hi).astype(p.dtype)


def _run(p: HtpAvgPoolPlan, x):
    x = np.asarray(x)
    whole = not p.padded and tuple(p.fplan.kernel_shape) == to_channels_last(x, p.fplan.layout).shape[1:-1]
    if p.kind == "pair" and not whole:
        return _pair(p, x)
    if whole or p.kind == "average":
        n = int(np.prod(p.fplan.kernel_shape))
        s = from_channels_last(_window_sum(p, x), p.fplan.layout)
        return htp_pool.average(s, htp_pool.average_params(float(p.xs) / (float(p.ys) * n)), p.zy, p.lo,
                               p.hi, n if p.dtype == "uint16" else 0).astype(p.dtype)
    if p.kind == "float":
        xf = ((x.astype(np.int64) - p.zx) * np.float32(p.xs)).astype(np.float32)  # |q - z| <= 255: one rounding
        avg = float_pool.average_pool(p.fplan, xf)
        return htp.float_path_codes(avg, p.ys, p.zy, p.shift, p.lo, p.hi).astype(p.dtype)
    if p.kind == "conv16":
        return from_channels_last(_conv16(p, _window_sum(p, x)), p.fplan.layout).astype(p.dtype)
    acc = WEIGHT_CODE * _window_sum(p, x)
    zy = p.zy + p.shift
    if p.arch == "v68":
        y = htp_ops.conv_requant_v68(acc, p.M, zy)
    else:
        y = htp.conv_requant(acc, p.M, zy, 0, 255)
    y = from_channels_last(y, p.fplan.layout)
    return np.clip(y - p.shift, p.lo, p.hi).astype(p.dtype)


for _variant, _arch in ARCHS.items():
    htp_kernel("AveragePool", _variant, lambda node, ctx, _a=_arch: _prepare(node, ctx, _a))(_run)
