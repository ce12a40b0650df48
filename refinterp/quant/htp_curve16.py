"""The HTP's 16-bit Sigmoid and Tanh (uint16 and int16 activations, htp_arch 68 and 73 alike).

Measured on Qualcomm's host emulation (onnxruntime-qnn 2.7.0, QNN 2.51):

* The QNN EP replaces the output's quantization parameters with fixed ones, whatever the model's
  QuantizeLinear says (onnxruntime-qnn's simple_op_builder.cc, ``OverrideQuantParams``; measured: the
  codes do not move with the declared scale or zero point): Sigmoid uint16 scale 1/65536, zero point 0;
  int16 1/32768, 0.  Tanh uint16 1/32768, zero point 32768; int16 1/32768, 0.  ``ENCODING``.
* The input reaches the curve as u = (|q - z_x| Mi) >> k, Mi = round(G s_x 2^k), with G = 6144
  (Sigmoid) or 12288 (Tanh) and k = min(15, 14 - floor(log2(G s_x))): a signed 16-bit multiplier with at
  most 15 fractional bits.  u >= 65536 reads the curve's last value.
* The curve is odd about the zero point: Sigmoid p(q) = 32767 - p(u) below z_x, Tanh t(q) = -1 - t(u).
  Outputs: Sigmoid uint16 2 p, int16 p; Tanh uint16 t + 32768, int16 t.
* The curves themselves (p: Q15 sigmoid within -1.25 .. +0.92 of 32768 sigmoid(u / 6144), 32767 from
  u = 62,485; t: Q15 tanh of u / 12288) come from an approximation that was not identified: they are
  stored as measured, every u at one input scale (data/htp_curves16.npz, made by
  tools/measure_htp_curves.py), v68 and v73 equal.

Evidence: every uint16 code at 14 input scales from 6e-6 to 3.5e-3 per op (zero point 32768), every int16
code at one, and uint16 zero point 0 at four: 0 codes off (tests/conformance/test_qnn_htp_curve16.py).
A multiplier whose G s_x 2^k lies within 0.01 of a rounding tie is refused (the rounding of the tie is
not measured)."""
from __future__ import annotations

import functools
import math
from importlib import resources

import numpy as np

from ..errors import UnsupportedOpError

GRID = {"Sigmoid": 6144, "Tanh": 12288}
# (scale, zero point) the QNN EP gives the output, per op and 16-bit type
ENCODING = {("Sigmoid", "uint16"): (1.0 / 65536, 0), ("Sigmoid", "int16"): (1.0 / 32768, 0),
            ("Tanh", "uint16"): (1.0 / 32768, 32768), ("Tanh", "int16"): (1.0 / 32768, 0)}


@functools.lru_cache(maxsize=None)
def curve(op: str) -> np.ndarray:
    """The measured curve of u = 0 .. 65535 (int64; package data, the same for every model)."""
    with resources.files("refinterp.quant").joinpath("data/htp_curves16.npz").open("rb") as f:
        d = np.load(f, allow_pickle=False)
        first, steps = d[f"{op.lower()}_first"], d[f"{op.lower()}_steps"]
    c = np.concatenate([first.astype(np.int64), first[0] + np.cumsum(steps.astype(np.int64))])
    c.setflags(write=False)
    return c


def index_multiplier(op: str, scale: float, what: str) -> tuple[int, int]:
    """(Mi, k): u = (|q - z| Mi) >> k.  Mi in [2^14, 2^15) once G s >= 2^-1, else k = 15."""
    m = GRID[op] * float(np.float32(scale))
    k = min(15, 14 - math.floor(math.log2(m)))
    v = m * 2.0 ** k
    if abs(v - math.floor(v) - 0.5) < 0.01:
        raise UnsupportedOpError(f"{what}: the HTP's 16-bit {op} multiplier {GRID[op]} x scale lies on a rounding "
                                 "tie, where its rounding is not characterised")
    mi = int(math.floor(v + 0.5))
    if k < 0 or mi <= 0:
        raise UnsupportedOpError(f"{what}: an input scale of {scale:g} is outside the measured range of the HTP's "
                                 f"16-bit {op}")
    return mi, k


def codes(op: str, dtype: str, scale: float, zero_point: int, what: str) -> np.ndarray:
    """Output code per input code (lowest code first), in ``ENCODING[op, dtype]``."""
    lo, hi = (0, 65535) if dtype == "uint16" else (-32768, 32767)
    mi, k = index_multiplier(op, scale, what)
    q = np.arange(lo, hi + 1, dtype=np.int64)
    u = (np.abs(q - zero_point) * mi) >> k          # |q - z| < 2^16, Mi < 2^16: exact in int64
    c = curve(op)
    v = c[np.minimum(u, c.size - 1)]
    v = np.where(q >= zero_point, v, (32767 - v) if op == "Sigmoid" else (-1 - v))
    if op == "Sigmoid" and dtype == "uint16":
        v = 2 * v
    elif op == "Tanh" and dtype == "uint16":
        v = v + 32768
    return v.astype(dtype)
