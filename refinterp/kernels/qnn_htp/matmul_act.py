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

Operands made by compute ops (``htp_operands_from``: the op that made each operand's codes, through same-parameter
copies; passes/qdq_htp.py).  A is read as stored after every producer measured (``A_STORED``), and so is B whose
zero point lies more than 16 codes from the middle of its type.  Within 16 codes of it (uint8 112 .. 144, not 128;
int8 -16 .. 16, not 0) B made by an Add, a Sub or a MatMul is not read as stored: that op computes B a second
time onto symmetric int8 (B's scale, the middle zero point, [-128, 127] around it) and the MatMul reads that
(passes/htp_matmul.py clones the producer and the copies after it: ``htp_b_symmetric``); made by the other
producers measured it is read as stored (``B_STORED_NEAR``).  Evidence: tests/conformance/
test_qnn_htp_matmul_act.py; the sweep behind it (v68 and v73, 3 random sets per case, 16 x 8 @ 8 x 16 and
1 x 2 x 8 x 16 @ 1 x 2 x 16 x 8): B's zero point at 111, 112, 120, 134, 144, 145 and 60 after Add (two tensors and
a constant vector), Sub, Mul, MatMul with constant weights, Conv, Sigmoid, Tanh, Relu, Gelu, HardSwish and Add /
MatMul through a Transpose; A's at 60, 120, 134, 200 after Add, Sub, Mul, MatMul, Conv, Sigmoid, Relu, Gelu and
at 0 after Softmax: 0 codes off.  Within the window the stored codes miss 19-209 of 128-256 codes after Add /
Sub / MatMul, and the re-run 7-102 after the other producers; outside it the re-run misses 29-225 after Add.

Refused: 16-bit operands (not measured; the 16-bit rules need constant weights), per-channel scales on either
operand, operands of different storage types, and operands made by producers not measured in their place.
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
    _check_operands(node, b)
    for t, what in ((a, "A"), (b, "B")):
        if t.quant is None or not t.quant.per_tensor:
            raise UnsupportedOpError(f"{where(node)}: operand {what} of a MatMul of two activations is not "
                                     "per-tensor quantized: not characterised on the HTP")
    (sa, za), (sb, zb), (sy, zy) = qparams(a, node, "A"), qparams(b, node, "B"), qparams(y, node, "Y")
    f32 = np.float32
    M = float(f32(f32(f32(sa) * f32(sb)) / f32(sy)))
    lo, hi = qrange(y.dtype)
    return HtpActMatMulPlan(arch, int(za), int(zb), int(zy), M, lo, hi, shift_of(y.dtype), y.dtype)


# the ops (through same-parameter copies) whose stored codes the HTP reads as the rule's operand A ...
A_STORED = ("Add", "Sub", "Mul", "MatMul", "Conv", "Sigmoid", "Relu", "Gelu", "Softmax")
# ... and as B when B's zero point is further than htp_weights.WINDOW from the middle of its type ...
B_STORED = ("Add", "Sub", "Mul", "MatMul", "Conv", "Sigmoid", "Tanh", "Relu", "Gelu", "HardSwish")
# ... or within it (Add, Sub, MatMul re-run onto symmetric int8 there: passes/htp_matmul.py, ``htp_b_symmetric``)
B_STORED_NEAR = ("Mul", "Conv", "Sigmoid", "Tanh", "Relu", "Gelu", "HardSwish")


def _check_operands(node, b) -> None:
    """Refuses an operand made by an op not measured in its place (``htp_operands_from``: the op that made each
    operand's codes, looking through copies, passes/qdq_htp.py)."""
    a_from, b_from = node.attr("htp_operands_from", ("input", "input"))
    late = []
    if a_from not in ("input",) + A_STORED:
        late.append(f"A is made by {a_from}")
    near = b.quant is not None and htp_weights.near_middle(b.dtype, int(b.quant.zero_point.ravel()[0]))
    if b_from != "input" and node.attr("htp_b_symmetric", None) is None and b_from not in (
            B_STORED_NEAR if near else B_STORED):
        late.append(f"B is made by {b_from}" + (f" with a zero point near the middle of {b.dtype}" if near else ""))
    if late:
        raise UnsupportedOpError(f"{where(node)}: a MatMul of two activations where {' and '.join(late)}: not "
                                 "characterised on the HTP (kernels/qnn_htp/matmul_act.py)")


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
