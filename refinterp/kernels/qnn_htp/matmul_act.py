"""HTP MatMul of two 8-bit activations (attention's Q K^T and A V), v68 and v73.

The HTP treats the second operand as the weights of a convolution, re-quantized at run time from the values
it holds: per column of each matrix (every leading index on its own), d = q_b - z_b is kept where it fits
int8 and otherwise re-quantized to symmetric int8 with the column's factor rh, exactly as constant uint8
weights with a zero point are (refinterp/quant/htp_weights.py ``requantize_columns``).  The exact
accumulator sum_k (q_a - z_a) w' then goes through the arch's convolution rule with the column's multiplier
M_c = f32(M rh), M = f32(f32(s_a s_b) / s_y): v73 ``htp.conv_requant``, v68 ``htp_ops.conv_requant_v68``
(the folded output zero point per column, uint8 domain).

Evidence (onnxruntime-qnn 2.7.0, tests/conformance/test_qnn_htp_matmul_act.py): MatMuls with K = 1 over
every pair of codes (65,536 per set), random K = 8 .. 100 and batched / broadcast 3-D and 4-D operands,
uint8 and int8, v68 and v73: 0 differences.  With z_b = 128 (every d within int8) the plain convolution
rule fits on its own; with other zero points it misses exactly the columns holding a d outside int8, and
re-quantizing per column across the batch instead of per matrix misses 10-377 codes in 1,000-2,000.

Refused: 16-bit operands (not measured; the 16-bit rules need constant weights), per-channel scales on
either operand, operands of different storage types, and an operand made by a compute op (through copies:
``htp_operands_from``, passes/qdq_htp.py).  There the HTP reads the producer's result otherwise than its
stored codes: B made by an Add comes in as d = clamp(round(x / s_b), -128, 127) -- columns past int8 clipped,
not re-quantized, and codes the uint8 tensor saturates kept beyond it (an attention block's Q K^T off by up
to 3 codes on 9 of 128; MEASURED.md).  The rule above is measured with both operands from graph inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_ops, htp_weights
from ..tflite.common import qparams, qrange, where
from .common import require_8bit, shift_of


@dataclass(frozen=True)
class HtpActMatMulPlan:
    arch: str   # v68 | v73
    za: int
    zb: int
    zy: int
    M: float    # f32(f32(s_a s_b) / s_y)
    lo: int
    hi: int
    shift: int  # v68: 128 for int8 (the uint8 domain)
    dtype: str


def prepare(node, ctx, arch: str) -> HtpActMatMulPlan:
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    require_8bit(node, [a, b, y], "8-bit operands (a MatMul of two 16-bit activations is not measured)")
    if a.dtype != b.dtype or a.dtype != y.dtype:
        raise UnsupportedOpError(f"{where(node)}: a MatMul of two activations with types {a.dtype}, {b.dtype} -> "
                                 f"{y.dtype}: characterised on the HTP with one 8-bit type only")
    made = dict(zip("AB", node.attr("htp_operands_from", ("input", "input"))))
    late = [f"{k} is made by {v}" for k, v in made.items() if v != "input"]
    if late:
        raise UnsupportedOpError(f"{where(node)}: a MatMul of two activations where {' and '.join(late)}: the HTP "
                                 "reads a computed operand otherwise than its stored codes (int8 around its zero "
                                 "point, clipped, not re-quantized; MEASURED.md); characterised with operands "
                                 "from graph inputs only")
    for t, what in ((a, "A"), (b, "B")):
        if t.quant is None or not t.quant.per_tensor:
            raise UnsupportedOpError(f"{where(node)}: operand {what} of a MatMul of two activations is not "
                                     "per-tensor quantized: not characterised on the HTP")
    (sa, za), (sb, zb), (sy, zy) = qparams(a, node, "A"), qparams(b, node, "B"), qparams(y, node, "Y")
    f32 = np.float32
    M = float(f32(f32(f32(sa) * f32(sb)) / f32(sy)))
    lo, hi = qrange(y.dtype)
    return HtpActMatMulPlan(arch, int(za), int(zb), int(zy), M, lo, hi, shift_of(y.dtype), y.dtype)


def _column_params(p: HtpActMatMulPlan, mc: np.ndarray):
    """(k, m, Z) per column from the columns' multipliers M_c (computed once per distinct value)."""
    values, inv = np.unique(mc, return_inverse=True)
    if p.arch == "v68":
        params = [htp_ops.conv_requant_params_v68(float(v)) for v in values]
        z = htp_ops.folded_zero_point(p.zy + p.shift, values)
    else:
        params = [htp.conv_requant_params(float(v)) for v in values]
        z = np.zeros(values.shape, np.int64)
    k = np.array([q[0] for q in params], np.int64)
    m = np.array([q[1] for q in params], np.float64)
    shape = mc.shape
    return k[inv].reshape(shape), m[inv].reshape(shape), z[inv].reshape(shape)


def run(p: HtpActMatMulPlan, a, b) -> np.ndarray:
    """|acc| <= K * 255 * 128 < 2^31 for K < 65,794; (a + 1/2) m and a m are exact in float64 there."""
    da = np.asarray(a).astype(np.int64) - p.za
    db = np.asarray(b).astype(np.int64) - p.zb
    vec_a, vec_b = da.ndim == 1, db.ndim == 1
    if vec_a:
        da = da[None, :]
    if vec_b:
        db = db[:, None]
    w, rh = htp_weights.requantize_columns(db)  # per column of each matrix of B
    acc = np.matmul(da, w)
    k, m, z = (v[..., None, :] for v in _column_params(p, htp_weights.multipliers(p.M, rh)))
    if p.arch == "v68":
        s = acc + z
        s = np.where(k >= 0, s >> np.maximum(k, 0), s << np.maximum(-k, 0))
        y = np.clip(np.floor(s.astype(np.float64) * m + 0.5), 0, 255).astype(np.int64) - p.shift
    else:
        s = np.where(k >= 0, acc >> np.maximum(k, 0), acc << np.maximum(-k, 0))
        y = np.floor((s.astype(np.float64) + 0.5) * m + 0.5).astype(np.int64) + p.zy
    y = np.clip(y, p.lo, p.hi)
    if vec_b:
        y = y[..., 0]
    if vec_a:
        y = y[..., 0, :] if not vec_b else y[..., 0]
    return y.astype(p.dtype)
