"""How Qualcomm's HTP re-quantizes uint8 weights with a zero point (the default of ONNX Runtime's
``get_qnn_qdq_config`` and of older quantizers, ``QuantType.QUInt8``), as measured against Qualcomm's
host emulation of the HTP (``libQnnHtp.so`` of QNN 2.51 in ``onnxruntime-qnn==2.7.0``).  The QNN EP
hands the weights over unchanged (UFIXED_POINT_8 with an offset); the conversion below happens inside
the HTP library.  It applies to Conv, depthwise Conv, Gemm and MatMul (per output column of B) with
one weight scale; the HTP's stride-2 depthwise kernel takes w - z_w as it is instead, and the QNN EP
does not take uint8 weights with per-channel scales onto the HTP at all (measured: it leaves the node
unassigned).  tests/conformance/test_qnn_htp_weights.py re-measures it.

The HTP's convolution takes symmetric int8 weights.  Per output channel ``c``, with ``d = w - z_w``
(the zero-point-subtracted codes, integers in [-255, 255]) and ``s`` the channel's weight scale::

    d within [-128, 127]      the channel is used as it is: w' = d, scale s (exact)
    otherwise                 r  = max(max(d) / 127, -min(d) / 128)
                              rh = r rounded to 12 significant bits (half up)
                              R  = round(2^16 / rh)                    (half up)
                              w' = round_half_away(d R / 2^16)          int8
                              s' = f32(s * rh)                          the channel's new scale
                              M_c = f32(M rh)   M = f32(f32(s_x s) / s_y), the layer's multiplier

and the layer then runs as a convolution with per-channel int8 weights and multipliers M_c:

    v68: the int32 bias and the output zero point fold into one offset, rounded once:
         Z_c = floor(f32(z_y / M_c) + b_c / rh_c + 1/2)   (a = (acc + Z_c) >> k, htp_ops' v68 rule)
    v73: the bias re-derived by htp.conv_bias with s' as the weight scale (trunc of the quotient).
    16-bit activations, v68: b_c is conv_bias's float32 quotient on the one scale s, not truncated, over rh_c
    (htp_ops.py, "v68 16-bit convolution"); with s' instead, 15-16 channels of 1,024 miss.

Evidence (v68 and v73, uint8 activations): 1x1 convolutions over every input code and every pair of
two input codes (65,536 accumulators per layer) with weight zero points 0 .. 255 -- the level
boundaries and the folded output zero point Z = round(z_y / M) pin the multiplier to ~1e-5: its
ratio to the unscaled one is rh, the 12-bit rounding of r (d = 128: 1.0078125, 61 ppm under r; d =
155: 189 ppm over r; r itself, its 11- / 13-bit roundings, truncations and float16 each fail), and
the weights of two-input channels pin w' (d = (128, 100) -> (127, 99), (200, 100) -> (127, 64));
one near-tie output (of 8,192) separates M_c = f32(M rh) from f32(f32(s_x f32(s rh)) / s_y); on an
EdgeTPU block of ONNX Runtime's test data the v68 bias codes b / rh = 19356.78 and -15320.31 come out
as 19356 and -15321 (rounded with the zero point: Z_c above), where b / rh rounded alone is wrong;
random 1x1 / 3x3 layers of 8 .. 128 input channels with and without int32 biases, where the
weights near a rounding tie separate d / rh (wrong on -92 / 1.03955 = -88.49977, the HTP gives -89)
and d / r (wrong on 91 / (182 / 127) = 63.5, the HTP gives 63) from the 16-bit reciprocal: 0
differences over every case of the measured sweeps.
"""
from __future__ import annotations

import numpy as np

from .fixedpoint import round_half_away
from .htp_ops import folded_zero_point


def requantize_columns(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The re-quantization above on every column of ``d`` (integers in [-255, 255], shape (..., K, N): each
    of the N columns of each leading index on its own) -> (int8-range w' of d's shape, rh of shape (..., N);
    1.0 where the column is kept as it is).  |d R| < 2^25: exact in float64."""
    d = np.asarray(d, np.int64)
    lo, hi = d.min(axis=-2), d.max(axis=-2)
    need = (lo < -128) | (hi > 127)
    r = np.maximum(hi / 127, -lo / 128)
    m, e = np.frexp(np.where(need, r, 1.0))  # r = m 2^e, m in [0.5, 1): rh = r to 12 significant bits, half up
    rh = np.where(need, np.ldexp(np.floor(m * 4096 + 0.5) / 4096, e), 1.0)
    R = np.floor(2.0 ** 16 / rh + 0.5)[..., None, :]
    w = np.where(need[..., None, :], round_half_away(d * R / 2.0 ** 16), d)
    return np.clip(w, -128, 127).astype(np.int64), rh


def requantize_channels(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero-point-subtracted weight codes ``d`` (output channels on axis 0, integers in [-255, 255]) ->
    (int8-range weights w', the per-channel factor rh by which the channel's scale grows; 1.0 where
    the channel is kept as it is)."""
    d = np.asarray(d, np.int64)
    w, rh = requantize_columns(d.reshape(d.shape[0], -1).T)
    return w.T.reshape(d.shape), rh


def multipliers(M, rh: np.ndarray) -> np.ndarray:
    """Per-channel real multipliers f32(M * rh) from the layer's M = f32(f32(s_x s_w) / s_y) (one, or
    one per channel)."""
    return (np.asarray(M, np.float32) * np.asarray(rh, np.float32)).astype(np.float32).astype(np.float64)


def folded_offset_v68(zero_point_u8: int, M: np.ndarray, bias: np.ndarray | None, rh: np.ndarray) -> np.ndarray:
    """v68: the output zero point and the bias folded into the accumulator in one rounding,
    floor(f32(zp / M) + b / rh + 1/2) per channel (b / rh in float64: |b| < 2^31, exact to 2^-21)."""
    b = 0.0 if bias is None else np.asarray(bias, np.float64) / np.asarray(rh, np.float64)
    return folded_zero_point(zero_point_u8, M, b)


# An activation read as a MatMul's weights (its second operand) whose zero point lies within WINDOW codes of the
# middle of its 8-bit type (not at it) is taken as symmetric int8 by the HTP when some ops made it (measured:
# uint8 112 .. 144; 111 and 145 read the stored codes; kernels/qnn_htp/matmul_act.py).
MIDDLE = {"uint8": 128, "int8": 0}
WINDOW = 16


def near_middle(dtype: str, zero_point: int) -> bool:
    return dtype in MIDDLE and 0 < abs(int(zero_point) - MIDDLE[dtype]) <= WINDOW
