"""HTP LayerNormalization on 8-bit activations (v68 and v73 alike): the rule of refinterp/quant/htp_norm.py
-- the mean in 1/64 code, the float32 variance, the HTP's bit-trick reciprocal square root, a 16-bit
multiplier with a shift, beta rounded onto the output grid on its own.

Taken: a QDQ unit DequantizeLinear(x) -> LayerNormalization(x, DQ(gamma), DQ(int32 beta)?) ->
QuantizeLinear over the last axis, x / y uint8 or int8, gamma per-tensor of x's type (the QNN EP refuses
other gamma types), beta per-tensor.  Refused when the Session is built: other axes, 16-bit activations,
per-channel gamma or beta scales.  Refused when run: a row whose multiplier lies
within 4e-7 (relative) of a step of its grid and whose codes depend on the side (``htp_norm.GUARD``; about
one row in 2,000 of random rows at scale ratios near 0.2, more at larger ones)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp_norm
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, htp_kernel, require_8bit, shift_of


@dataclass(frozen=True)
class HtpLayerNormPlan:
    where: str
    s_x: float
    eps: float
    shift: int  # 128 for int8 codes: the mean is taken in the uint8 domain
    gamma: np.ndarray  # gamma codes minus their zero point, int64 [L]
    s_g: float
    s_y: float
    beta: np.ndarray  # beta on the output grid, int64 [L] (zeros without beta)
    z_y: int
    lo: int
    hi: int


def _prepare(node, ctx) -> HtpLayerNormPlan:
    x, out = ctx.inputs[0], ctx.outputs[0]
    gamma = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    beta = ctx.inputs[2] if len(ctx.inputs) > 2 else None
    require_8bit(node, [x, out])
    if any(node.outputs[1:]):
        raise UnsupportedOpError(f"{where(node)}: LayerNormalization's Mean / InvStdDev outputs are not characterised "
                                 "on the HTP")
    rank = len(x.shape) if x.shape is not None else None
    axis = int(node.attr("axis", -1))
    if rank is None or axis % rank != rank - 1:
        raise UnsupportedOpError(f"{where(node)}: a LayerNormalization over other than the last axis is not "
                                 "characterised on the HTP")
    if gamma is None or gamma.const is None or gamma.quant is None or gamma.dtype != x.dtype:
        raise UnsupportedOpError(f"{where(node)}: the HTP LayerNormalization is characterised with a constant "
                                 f"gamma quantized to the activations' type ({x.dtype}) only")
    (s_x, _), (s_g, z_g), (s_y, z_y) = (qparams(x, node, "input"), qparams(gamma, node, "gamma"),
                                          qparams(out, node, "output"))
    g = np.asarray(gamma.const, np.int64).reshape(-1) - z_g
    if x.shape[-1] is not None and g.size not in (1, x.shape[-1]):
        raise UnsupportedOpError(f"{where(node)}: gamma of {g.size} entries for rows of {x.shape[-1]}")
    b = np.zeros(g.size, np.int64)
    if beta is not None and beta.name:
        if beta.const is None or beta.quant is None or beta.dtype != "int32":
            raise UnsupportedOpError(f"{where(node)}: the HTP LayerNormalization is characterised with a "
                                     "constant int32 beta only")
        s_b, z_b = qparams(beta, node, "beta")
        bq = np.asarray(beta.const, np.int64).reshape(-1) - z_b
        b = htp_norm.beta_codes(bq, float(s_b), float(s_y))
    lo, hi = qrange(out.dtype)
    return HtpLayerNormPlan(where(node), float(s_x), float(np.float32(node.attr("epsilon", 1e-5))),
                            shift_of(x.dtype), g, float(s_g), float(s_y), b, int(z_y), lo, hi)


def _run(p: HtpLayerNormPlan, x, *_):
    codes = np.asarray(x)
    g = np.broadcast_to(p.gamma, codes.shape[-1:])
    y0, undecided = htp_norm.layer_norm(codes, p.shift, p.s_x, p.eps, g, p.s_g, p.s_y)
    if undecided.any():
        row = int(np.nonzero(undecided)[0][0])
        raise UnsupportedOpError(f"{p.where}: row {row} (of {undecided.size}): its multiplier lies within "
                                 f"{htp_norm.GUARD:g} of a step of the HTP's 16-bit grid and its codes depend on "
                                 "the side, which the HTP's float arithmetic decides: not characterised")
    y = np.clip(y0 + np.broadcast_to(p.beta, codes.shape[-1:])[None, :] + p.z_y, p.lo, p.hi)
    return y.reshape(codes.shape).astype(codes.dtype)


for _variant in ARCHS:
    htp_kernel("LayerNormalization", _variant, _prepare)(_run)
