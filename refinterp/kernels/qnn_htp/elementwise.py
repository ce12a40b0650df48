"""HTP element-wise Add, Sub and Mul on 8-bit activations, and Add / Sub / Mul of two 16-bit tensors
(``htp_ops.add16_params`` / ``sub16_params``, ``htp_mul16``; an Add with a one-element constant is the two-tensor
kernel, a Sub with one and mixed types are refused at 16 bits),
v68 and v73 alike:
refinterp/quant/htp_ops.py ``add_params`` / ``sub_params`` -- two multipliers on one scale (Add: that
of M_1 + M_2; Sub: that of max(M_1, M_2), at most 2^15), an offset rounded to a multiple of 256, one
truncating shift; Mul: ``mul_params`` / ``mul_u8`` (a 16-bit two-stage multiply after a range bias) or,
by a one-element constant (and Div by one), quant/htp_scale.py (one 15-bit multiplier); int8
tensors computed as uint8 with every code moved by 128.

Add / Sub with a one-element constant operand -- and Mul / Div by a negative one-element constant or
with a multiplier of 16 or more -- take another path, in float32 (measured, below): the
other operand dequantized, x = f32((q - z_x) s_x), the constant's value c = f32((q_c - z_c) s_c),
s = f32(x +- c) (or c - x), t = f32(s * f32(1 / s_y)), then f32(t + z_y) rounded half to even and clamped
(int8: z_y + 128 there and 128 taken off after the rounding, as everywhere on the HTP) -- a table over
the other operand's codes here.  Evidence: every code at 56 constants (random scales and
zero points, and scale ratios of exactly 1/4, 1/2, 3/4 and within 2^-20 .. 2^-12 of 1/2, whose exact
ties separate the rounding and the evaluation order), v68 and v73, uint8 and int8: 0 differences; the
two-tensor rule (what refinterp ran before) is 1-5 codes in 256 off, the exact value rounded half up
or to even 7-185 of 6,144 on the tie sweep, f32(s / s_y) instead of the reciprocal 4.  A constant
vector (one value per channel) takes the two-tensor rule (0 of 11,264 codes differ)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_mul16, htp_ops, htp_scale
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, SIXTEEN_BIT, htp_kernel, require_8bit, shift_of


@dataclass(frozen=True)
class HtpAddPlan:
    params: tuple[int, int, int, int]  # (p, i1, i2, K), uint8 domain; Sub: i2 negated
    shift: int
    lo: int
    hi: int
    dtype: str


@dataclass(frozen=True)
class HtpConstPlan:
    """A one-element constant operand on the float32 path (Add / Sub, some Mul / Div)."""
    table: np.ndarray  # output code per code of the non-constant operand (index: code - lo)
    other: int         # index of the non-constant input
    lo: int
    dtype: str


def _add_prepare(node, ctx):
    if _is_16bit(ctx):
        return _add16_prepare(node, ctx)
    return _const_prepare(node, ctx, 1) or _prepare(node, ctx, htp_ops.add_params, 1)


def _is_16bit(ctx) -> bool:
    return any(t is not None and t.dtype in SIXTEEN_BIT for t in (*ctx.inputs[:2], *ctx.outputs[:1]))


def _add16_prepare(node, ctx, params_of=htp_ops.add16_params, sign: int = 1) -> HtpAddPlan:
    """Add / Sub of two 16-bit tensors (htp_ops.py, "Add of 16-bit tensors", "Sub of 16-bit tensors").  An Add
    with a one-element constant operand is the same kernel (either side; after graph inputs over every code, Conv,
    Add, MaxPool, Sigmoid, Tanh: 76 sets at v73 and v68, 0 off); a Sub with one is not (1-2 codes in 65,536 off on
    10 of 24 sets, the Add kernel on the mirrored constant likewise: MEASURED.md), nor are mixed types."""
    if sign < 0 and _const_operand(ctx) is not None:
        raise UnsupportedOpError(f"{where(node)}: a 16-bit {node.op} with a one-element constant is not "
                                 "characterised on the HTP")
    return _prepare(node, ctx, params_of, sign, bits=16)


def _sub_prepare(node, ctx):
    if _is_16bit(ctx):
        shift = -32768 if ctx.outputs[0].dtype == "uint16" else 0  # the offset's bound is on the int16 range
        return _add16_prepare(node, ctx, functools.partial(htp_ops.sub16_params, shift=shift), -1)
    return _const_prepare(node, ctx, -1) or _prepare(node, ctx, htp_ops.sub_params, -1)


def _const_operand(ctx) -> int | None:
    """The index of the one-element constant input (None: none, or both)."""
    consts = [k for k, t in enumerate(ctx.inputs[:2]) if t.const is not None and np.asarray(t.const).size == 1]
    return consts[0] if len(consts) == 1 else None


def _float_path(node, ctx, k: int, combine) -> HtpConstPlan:
    """The HTP's float32 path for a one-element constant operand k (module docstring) as a table over
    the other operand's codes: combine(x, c) is the float32 operation on the dequantized values."""
    qs, sh, (lo, hi) = _operands(node, ctx)
    (s_x, z_x), (s_k, z_k), (s_y, z_y) = qs[1 - k], qs[k], qs[2]
    f32 = np.float32
    c = _one_value(ctx.inputs[k], s_k, z_k)
    x = ((np.arange(lo, hi + 1) - z_x) * f32(s_x)).astype(f32)  # |q - z| <= 255: exact, one rounding
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        v = np.asarray(combine(x, c)).astype(f32)
    table = htp.float_path_codes(v, s_y, z_y, sh, lo, hi).astype(ctx.outputs[0].dtype)
    return HtpConstPlan(table, 1 - k, lo, ctx.outputs[0].dtype)


def _const_prepare(node, ctx, sign: int) -> HtpConstPlan | None:
    """Add / Sub with a one-element constant operand: the float32 path; None without one."""
    k = _const_operand(ctx)
    if k is None:
        return None
    if sign > 0:
        return _float_path(node, ctx, k, lambda x, c: x + c)
    return _float_path(node, ctx, k, (lambda x, c: x - c) if k == 1 else (lambda x, c: c - x))


def _operands(node, ctx, bits: int = 8):
    """((s_a, z_a), (s_b, z_b), (s_c, z_c)) of a two-input HTP unit whose tensors share one 8-bit (or,
    with ``bits`` 16, one 16-bit) type (refused otherwise), with the uint8-domain shift (16-bit: none)
    and the output's code range."""
    a, b, c = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if bits == 16:
        if c.dtype not in SIXTEEN_BIT:
            raise UnsupportedOpError(f"{where(node)}: a {c.dtype} output of a 16-bit {node.op} is not characterised "
                                     "on the HTP")
    else:
        require_8bit(node, [a, b, c])
    dts = {a.dtype, b.dtype, c.dtype}
    if len(dts) != 1:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types {sorted(dts)} are not characterised")
    qs = qparams(a, node, "A"), qparams(b, node, "B"), qparams(c, node, "C")
    return qs, shift_of(c.dtype), qrange(c.dtype)


def _prepare(node, ctx, params_of, sign: int, bits: int = 8) -> HtpAddPlan:
    ((sa, za), (sb, zb), (sc, zc)), sh, (lo, hi) = _operands(node, ctx, bits)
    f32 = np.float32
    try:
        p, i1, i2, k = params_of(float(f32(sa / sc)), float(f32(sb / sc)), za + sh, zb + sh, zc + sh)
    except ValueError as e:
        raise UnsupportedOpError(f"{where(node)}: {e}") from None
    return HtpAddPlan((p, i1, sign * i2, k), sh, lo, hi, ctx.outputs[0].dtype)


def _run(p, a, b):
    if isinstance(p, HtpConstPlan):
        x = np.broadcast_arrays(np.asarray((a, b)[p.other]), np.asarray((a, b)[1 - p.other]))[0]
        return p.table[x.astype(np.int64) - p.lo]
    if p.dtype in SIXTEEN_BIT:
        return htp_ops.add16(*np.broadcast_arrays(np.asarray(a), np.asarray(b)), p.params, p.lo, p.hi).astype(p.dtype)
    a, b = np.broadcast_arrays(np.asarray(a).astype(np.int64) + p.shift, np.asarray(b).astype(np.int64) + p.shift)
    return np.clip(htp_ops.add_u8(a, b, p.params) - p.shift, p.lo, p.hi).astype(p.dtype)


for _variant in ARCHS:
    htp_kernel("Add", _variant, _add_prepare)(_run)
    htp_kernel("Sub", _variant, _sub_prepare)(_run)


@dataclass(frozen=True)
class HtpMulPlan:
    z: tuple[int, int, int]            # uint8-domain zero points of A, B, C
    params: tuple                      # htp_ops.mul_params, or htp_scale.scale_params for a constant
    scalar: int | None                 # index of the one-element constant input (the scale kernel)
    shift: int
    lo: int
    hi: int
    dtype: str
    single: bool = False               # the scale kernel with one rounding (``htp_scale.scale_single``)


# Mul / Div by a positive one-element constant (0 < A < 16): the HTP picks the kernel by the op that made the
# other operand's codes (passes/qdq_htp.py ``htp_input_from``), measured over every code at 24 constants per
# producer and set (2-5 sets each over v68 / v73, uint8 / int8): ``scale_params``' 15-bit multiplier with two
# roundings (``htp_scale.scale``) after a graph input's QuantizeLinear (on and off the input's grid), Add, Sub,
# a two-tensor Mul and a uint8 MatMul; the same multiplier with one rounding (``htp_scale.scale_single``) after
# Conv, ConvTranspose, AveragePool, MaxPool and an int8 MatMul; the float32 path after Sigmoid, Tanh,
# HardSwish and GlobalAveragePool.  Each rule misses 1-49 codes in 256 on 5-21 of 24 constants after the
# others' producers (one Tanh set: the one-rounding rule 1 off, the float32 path 0).  After any other op:
# refused.
_SCALE_AFTER = {"input", "Add", "Sub", "Mul", ("MatMul", "uint8")}
_SINGLE_AFTER = {"Conv", "ConvTranspose", "AveragePool", "MaxPool", ("MatMul", "int8")}
_FLOAT_AFTER = {"Sigmoid", "Tanh", "HardSwish", "GlobalAveragePool"}


# Behind same-parameter data movement the kernel is not the producer's and not a function of the ops on the way
# (MEASURED.md, "Mul / Div by a constant after data movement": a Reshape or Transpose picks one kernel or another by
# its shape and perm).  What held on every measured chain (v68 / v73, uint8 / int8, 6-9 constants x 3-6 seeds per
# chain): two roundings behind a graph input's or an Add's codes through any chain of these copies (15 chain shapes),
# and after a copy to two dimensions (Flatten; Reshape to (1, n)) whatever the producer below.  Other chains: refused.
_TWO_THROUGH = {"Reshape", "Flatten", "Transpose", "Split", "Slice", "Squeeze", "Unsqueeze"}
_TO_2D_AFTER = {"Conv", "MatMul", "MaxPool", "Sigmoid", "Tanh", "GlobalAveragePool"}


def _kind_through_copies(node) -> str:
    """The producer kind a Mul / Div by a constant is computed as (passes/qdq_htp.py ``htp_input_via``)."""
    kind = node.attrs.get("htp_input_from", "input")
    via, origin = node.attrs.get("htp_input_via") or (), node.attrs.get("htp_input_origin")
    if not via:
        return kind
    if origin in ("input", "Add") and all(op in _TWO_THROUGH for op, _ in via):
        return "input"
    if len(via) == 1 and via[0][0] in ("Flatten", "Reshape") and via[0][1] == 2 and origin in _TO_2D_AFTER:
        return "input"
    return kind if origin is None else f"{kind} after {origin}"


def _positive_constant(node, ctx, k: int, A: float, combine, z: tuple, sh: int, lo: int, hi: int):
    """The kernel of a Mul / Div by a positive one-element constant at input k, by the producer."""
    kind = _kind_through_copies(node)
    dtype = ctx.outputs[0].dtype

    def after(group) -> bool:
        return kind in group or (kind, dtype) in group

    if after(_SCALE_AFTER) or after(_SINGLE_AFTER):
        return HtpMulPlan(z, htp_scale.scale_params(A), k, sh, lo, hi, dtype, single=after(_SINGLE_AFTER))
    if after(_FLOAT_AFTER):
        return _float_path(node, ctx, k, combine)
    raise UnsupportedOpError(f"{where(node)}: a {node.op} by a constant of codes made by {kind}: the HTP's kernel "
                             "there is not characterised")


def _one_value(t, s, z) -> np.float32:
    """The float32 value f32((q - z) * s) of a one-element quantized constant."""
    return np.float32(np.float32(int(np.asarray(t.const).reshape(-1)[0]) - z) * np.float32(s))


# producers after which a 16-bit Mul by a constant is the two-tensor kernel (Sigmoid / Tanh: their curve codes in the
# encoding the QNN EP imposes, quant/htp_curve16.py; test_a16_mul_by_constant)
_MUL16_CONST_AFTER = {"input", "Add", "Sigmoid", "Tanh"}


@dataclass(frozen=True)
class HtpMul16Plan:
    z: tuple[int, int]      # uint16-domain zero points of A and B
    params: tuple           # htp_mul16.mul16_params
    shift: int              # 32768 for int16 (the uint16 domain)
    lo: int
    hi: int
    dtype: str


def _mul16_prepare(node, ctx) -> HtpMul16Plan:
    """Mul of two 16-bit tensors (refinterp/quant/htp_mul16.py), whatever made the operands (measured after
    graph inputs, Conv, Add and MaxPool).  A one-element constant operand takes the same kernel after a graph
    input's QuantizeLinear (every uint16 / int16 code at 6 constants each, v73), after an Add and after a 16-bit
    Sigmoid / Tanh (16 constants by hand, v73, and the suite's 6 per arch and type), but not after
    a Conv or a MaxPool (2-895 codes in 1,024 off, v68 and v73; neither that kernel nor its range bias left out
    fits): refused there.  M >= 1/8 is not characterised."""
    kind = node.attrs.get("htp_input_from", "input")
    if _const_operand(ctx) is not None and kind not in _MUL16_CONST_AFTER:
        raise UnsupportedOpError(f"{where(node)}: a 16-bit Mul by a one-element constant of codes made by {kind}: "
                                 "the HTP's kernel there is not characterised")
    ((sa, za), (sb, zb), (sc, zc)), _, (lo, hi) = _operands(node, ctx, bits=16)
    sh = 32768 if ctx.outputs[0].dtype == "int16" else 0
    f32 = np.float32
    M = float(f32(f32(f32(sa) * f32(sb)) / f32(sc)))
    try:
        params = htp_mul16.mul16_params(M, za + sh, zb + sh, zc + sh)
    except ValueError as e:
        raise UnsupportedOpError(f"{where(node)}: a 16-bit Mul: {e}") from None
    return HtpMul16Plan((za + sh, zb + sh), params, sh, lo, hi, ctx.outputs[0].dtype)


def _mul_prepare(node, ctx) -> HtpMulPlan | HtpMul16Plan:
    if _is_16bit(ctx):
        return _mul16_prepare(node, ctx)
    a, b, c = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    ((sa, za), (sb, zb), (sc, zc)), sh, (lo, hi) = _operands(node, ctx)
    f32 = np.float32
    k = _const_operand(ctx)
    try:
        if k is not None:  # the HTP's one-constant kernel: one multiplier on the other input's codes
            (s_k, z_k), (s_o, z_o) = ((sa, za), (sb, zb)) if k == 0 else ((sb, zb), (sa, za))
            A = float(f32(f32(f32(s_o) * _one_value((a, b)[k], s_k, z_k)) / f32(sc)))
            if A == 0 or not math.isfinite(A):
                raise UnsupportedOpError(f"{where(node)}: a Mul by a zero constant is not characterised on the HTP")
            if not 0 < A < 16:  # a negative constant, or A >= 16: the float32 path (measured)
                return _float_path(node, ctx, k, lambda x, cv: x * cv)
            return _positive_constant(node, ctx, k, A, lambda x, cv: x * cv, (z_o + sh, 0, zc + sh), sh, lo, hi)
        M = float(f32(f32(f32(sa) * f32(sb)) / f32(sc)))
        return HtpMulPlan((za + sh, zb + sh, zc + sh), htp_ops.mul_params(M, za + sh, zb + sh, zc + sh), None,
                          sh, lo, hi, c.dtype)
    except ValueError as e:
        raise UnsupportedOpError(f"{where(node)}: {e}") from None


def _mul_run(p, a, b):
    if isinstance(p, HtpConstPlan):
        return _run(p, a, b)
    if isinstance(p, HtpMul16Plan):
        y = htp_mul16.mul16(np.asarray(a).astype(np.int64) + p.shift, np.asarray(b).astype(np.int64) + p.shift,
                            *p.z, p.params)
        return np.clip(y - p.shift, p.lo, p.hi).astype(p.dtype)
    if p.scalar is not None:  # the other input's codes, broadcast to the output shape
        x, other = (b, a) if p.scalar == 0 else (a, b)
        x = np.broadcast_arrays(np.asarray(x), np.asarray(other))[0]
        y = (htp_scale.scale_single if p.single else htp_scale.scale)(x.astype(np.int64) + p.shift - p.z[0], p.params,
                                                                   p.z[2], 0, 255)
    else:
        y = htp_ops.mul_u8(np.asarray(a).astype(np.int64) + p.shift, np.asarray(b).astype(np.int64) + p.shift,
                           *p.z, p.params)
    return np.clip(y - p.shift, p.lo, p.hi).astype(p.dtype)


def _div_prepare(node, ctx) -> HtpMulPlan:
    """Div by a positive one-element constant: the one-multiplier kernel of Mul, A = f32(f32(s_a / b) / s_y)
    (measured: 0 of 22,784 codes over 88 constants, v68 / v73, uint8 / int8); by a negative one, or with A
    >= 16, the float32 path; by zero or by a tensor: refused."""
    b, c = ctx.inputs[1], ctx.outputs[0]
    ((sa, za), (sb, zb), (sc, zc)), sh, (lo, hi) = _operands(node, ctx)
    if b.const is None or np.asarray(b.const).size != 1:
        raise UnsupportedOpError(f"{where(node)}: a Div by a tensor is not characterised on the HTP (only by a "
                                 f"one-element constant)")
    value = _one_value(b, sb, zb)
    if value == 0:
        raise UnsupportedOpError(f"{where(node)}: a Div by a zero constant is not characterised on the HTP")
    f32 = np.float32
    A = float(f32(f32(f32(sa) / value) / f32(sc)))
    if not 0 < A < 16:  # a negative divisor, or A >= 16: the float32 path (measured)
        return _float_path(node, ctx, 1, lambda x, cv: x / cv)
    return _positive_constant(node, ctx, 1, A, lambda x, cv: x / cv, (za + sh, 0, zc + sh), sh, lo, hi)


for _variant in ARCHS:
    htp_kernel("Mul", _variant, _mul_prepare)(_mul_run)
    htp_kernel("Div", _variant, _div_prepare)(_mul_run)
