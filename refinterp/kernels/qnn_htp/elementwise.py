"""HTP element-wise Add and Sub on 8-bit activations (v68 and v73 compute them alike):
refinterp/quant/htp_ops.py ``add_params`` / ``sub_params`` -- two multipliers on one scale (Add: that
of M_1 + M_2; Sub: that of max(M_1, M_2), at most 2^15), an offset rounded to a multiple of 256, one
truncating shift; int8 tensors computed as uint8 with every code moved by 128."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp_ops
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, htp_kernel, require_8bit, shift_of


@dataclass(frozen=True)
class HtpAddPlan:
    params: tuple[int, int, int, int]  # (p, i1, i2, K), uint8 domain; Sub: i2 negated
    shift: int
    lo: int
    hi: int
    dtype: str


def _add_prepare(node, ctx) -> HtpAddPlan:
    return _prepare(node, ctx, htp_ops.add_params, 1)


def _sub_prepare(node, ctx) -> HtpAddPlan:
    return _prepare(node, ctx, htp_ops.sub_params, -1)


def _prepare(node, ctx, params_of, sign: int) -> HtpAddPlan:
    require_8bit(node, [ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]])
    dts = {ctx.inputs[0].dtype, ctx.inputs[1].dtype, ctx.outputs[0].dtype}
    if len(dts) != 1:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types {sorted(dts)} are not characterised")
    (sa, za), (sb, zb), (sc, zc) = (qparams(ctx.inputs[0], node, "A"), qparams(ctx.inputs[1], node, "B"),
                                    qparams(ctx.outputs[0], node, "C"))
    f32 = np.float32
    sh = shift_of(ctx.outputs[0].dtype)
    try:
        p, i1, i2, k = params_of(float(f32(sa / sc)), float(f32(sb / sc)), za + sh, zb + sh, zc + sh)
    except ValueError as e:
        raise UnsupportedOpError(f"{where(node)}: {e}") from None
    lo, hi = qrange(ctx.outputs[0].dtype)
    return HtpAddPlan((p, i1, sign * i2, k), sh, lo, hi, ctx.outputs[0].dtype)


def _run(p: HtpAddPlan, a, b):
    a, b = np.broadcast_arrays(np.asarray(a).astype(np.int64) + p.shift, np.asarray(b).astype(np.int64) + p.shift)
    return np.clip(htp_ops.add_u8(a, b, p.params) - p.shift, p.lo, p.hi).astype(p.dtype)


for _variant in ARCHS:
    htp_kernel("Add", _variant, _add_prepare)(_run)
    htp_kernel("Sub", _variant, _sub_prepare)(_run)
