"""LiteRT optimized MUL (8-bit) and ADD (general int16), variant ``tflite_opt``.

Source: LiteRT ``tflite/kernels/internal/optimized/integer_ops/mul.h`` (int8 ``MulElementwise`` /
``MulSimpleBroadcast``), ``optimized/optimized_ops.h`` (uint8 versions, ``BinaryBroadcastFiveFold``),
``reference/process_broadcast_shapes.h``; ``optimized/integer_ops/add.h`` (``AddElementwiseInt16``).

The vector loop (NEON via NEON_2_SSE on x86; int8: 16 lanes, uint8: 8 lanes) computes the same
y = MBQM((a - z1)(b - z2)) as the reference, then narrows to int16 with saturation, adds the output
zero point in *wrapping* int16 arithmetic, and narrows to 8 bits with saturation:

    vector lanes: out = clamp(sat8(wrap16(sat16(y) + zo)), lo, hi)   (uint8 scalar-broadcast runs: wrap16(y))
    scalar tail:  out = clamp(y + zo, lo, hi)                        (= reference)

They differ only when |y| >= 2^15 - |zo| (saturated outputs), where the int16 add wraps.  Which
output elements are vector lanes follows the broadcast decomposition: the output is processed in
runs of L contiguous elements (no broadcast: the whole tensor; five-fold broadcast: y4, or y3 when
y4 == 1), and lane i of a run is vectorised iff i < W * floor(L / W).  Generic (six-D slow)
broadcasts run the reference code.  int16 MUL uses the reference formula.

ADD int8 with equal input shapes runs ``AddElementwiseInt8`` (16 lanes, ``_add_int8_neon``): inputs
rounded once, and the sum narrowed to int16 by wrapping, which flips saturated outputs at tiny output
scales.  Both 8-bit NEON loops are tabulated per input pair (``_pair_tables``).

ADD int16 with general scales (``pot_scale_int16`` false) and equal input shapes runs
``optimized_integer_ops::AddElementwiseInt16``; on x86 its NEON loop (via NEON_2_SSE; 16 elements
per step) folds the left shift into the input shift, so each input is rounded ONCE where the
reference rounds twice (SRDHM, then a rounding shift):

    x_i = vqrdmulh(shl(q_i - z_i, 15 + shift_i), M_i)     shl: wrapping left / flooring right shift
    out = RDBP(vqrdmulh(x_1 + x_2, M_o), -shift_o) + z_o   (sum wraps in int32)

vqrdmulh(a, M) = (a*M + 2^30) >> 31 (ties up, unlike SRDHM's ties away); RDBP = gemmlowp
RoundingDivideByPOT (ties away).  Lane outputs saturate to int16 after the clamp.  The last
size % 16 elements run the scalar reference formula.  uint8 ADD with equal shapes runs the legacy
``AddElementwise`` NEON loop (8 lanes, flooring input shifts; ``_add_uint8_neon``).  Power-of-two
int16 ADD,
broadcasting ADD and int16 SUB run the reference code on x86 (verified against LiteRT 2.3.0:
tests/conformance/test_tflite_opt_int16_add.py, the mobilenet_tiny_int16x8 fixture).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from refinterp.quant.fixedpoint import rdbp, vqrdmulh, wrap_int32
from refinterp.settings import fast_kernels
from ..ref import elementwise as ref_elementwise
from ..ref.elementwise_fast import fast_opt_add, pair_lookup
from ..common import mbqm
from ...prepared import prepared
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_opt"
_I64 = np.int64
_FAST = fast_kernels()


def _fivefold(shape0: tuple, shape1: tuple) -> tuple[int, bool] | None:
    """``BinaryBroadcastFiveFold``'s decomposition as (run length L, elementwise): L = y4 and the
    elementwise function when y4 > 1, else L = y3 and the scalar-broadcast function; (0, True) when
    the shapes are equal (one elementwise run over the whole tensor); None for a generic broadcast
    (reference code)."""
    n = max(len(shape0), len(shape1))
    s0 = (1,) * (n - len(shape0)) + tuple(shape0)
    s1 = (1,) * (n - len(shape1)) + tuple(shape1)
    if s0 == s1:
        return 0, True
    first_fast = None
    for i in range(n - 1, -1, -1):
        if s0[i] == s1[i]:
            continue
        if s0[i] == 1:
            first_fast = True
        elif s1[i] == 1:
            first_fast = False
        else:
            return None
        break
    a, b = (s0, s1) if first_fast else (s1, s0)
    y = [1, 1, 1, 1, 1]
    i = n - 1
    while i >= 0 and a[i] == b[i]:
        y[4] *= b[i]
        i -= 1
    while i >= 0 and a[i] == 1:
        y[3] *= b[i]
        i -= 1
    while i >= 0 and a[i] == b[i]:
        y[2] *= a[i]
        i -= 1
    while i >= 0 and b[i] == 1:
        y[1] *= a[i]
        i -= 1
    while i >= 0 and a[i] == b[i]:
        y[0] *= b[i]
        i -= 1
    if i >= 0:
        return None
    return (y[4], True) if y[4] > 1 else (y[3], False)


def _vector_mask(out_size: int, run: int, width: int) -> np.ndarray:
    if run == 0:
        run = out_size
    lane = np.arange(out_size) % run
    return lane < width * (run // width)


def prepare_mul(node, ctx):
    p = ref_elementwise.prepare_mul(node, ctx)
    if p.dtype in ("int8", "uint8"):
        p = replace(p, vector_width=16 if p.dtype == "int8" else 8)
    return p


@kernel("Mul", VARIANT, prepare=prepare_mul, impls=ref_elementwise.MUL_IMPLS)
def mul(p, a, b):
    ref = ref_elementwise.run_mul(p, a, b)
    width = p.vector_width
    ff = _fivefold(a.shape, b.shape) if width else None
    if ff is None:
        return ref
    run, elementwise = ff
    prod = wrap_int32((a.astype(_I64) - p.z1) * (b.astype(_I64) - p.z2))
    y = np.broadcast_to(mbqm(prod, p.m, p.shift, p.rounding), ref.shape)
    # int16 narrowing: vqmovn_s32 (saturating), except the uint8 MulSimpleBroadcast, whose
    # vmovn_s32 wraps (outputs beyond +-2^15 come back with the wrong sign)
    t = (((y + 32768) & 0xFFFF) - 32768 if p.dtype == "uint8" and not elementwise else np.clip(y, -32768, 32767)) + p.zo
    t = ((t + 32768) & 0xFFFF) - 32768  # vaddq_s16 wraps
    qlo, qhi = (-128, 127) if p.dtype == "int8" else (0, 255)
    lo, hi = p.clamp
    vec = np.clip(np.clip(t, qlo, qhi), lo, hi).astype(p.dtype)
    mask = _vector_mask(ref.size, run, width).reshape(ref.shape)
    return np.where(mask, vec, ref)


# --- ADD, general int16 -----------------------------------------------------------------------

_NEON_BLOCK = 16


def _shl(x, s: int) -> np.ndarray:
    """vshlq_s32: wrapping left shift for s >= 0, flooring right shift for s < 0."""
    x = np.asarray(x, _I64)
    return wrap_int32(x << s) if s >= 0 else x >> -s


def prepare_add(node, ctx):
    p = ref_elementwise.prepare_add_sub(False)(node, ctx)
    return p if p.pot else replace(p, neon_int16=p.dtype == "int16")


_U8_BLOCK = 8


def _narrow(p, o):
    """vmovn_s32 (wrap to int16), vaddq_s16 of the output zero point (wraps), saturating narrow to
    8 bits (vqmovn / vqmovun), the activation clamp."""
    o = ((o + 32768) % 65536 - 32768 + p.zo + 32768) % 65536 - 32768
    qlo, qhi = (-128, 127) if p.dtype == "int8" else (0, 255)
    lo, hi = p.clamp
    return np.clip(np.clip(o, qlo, qhi), lo, hi)


def _lanes_floor(p, a, b):
    """Vector lanes that round each input twice with a *flooring* input shift: the legacy uint8
    ``optimized_ops::AddElementwise`` (8 lanes) and both 8-bit ``AddScalarBroadcast`` loops (8 lanes):

        x_i = shl(vqrdmulh(shl(q_i - z_i, left_shift), M_i), shift_i)   (flooring right shift, not RDBP)
        out = clamp(sat8(wrap16(wrap16(RDBP(vqrdmulh(x_1 + x_2, M_o), -shift_o)) + z_o)), lo, hi)

    They differ from the reference (SRDHM ties away, RDBP input shifts) near ties, e.g. where an input
    multiplier is an exact binary fraction (scales 0.08 / 0.05)."""
    ls = p.left_shift
    x = _shl(vqrdmulh(_shl(a.astype(_I64) - p.z1, ls), p.m1), p.e1)
    y = _shl(vqrdmulh(_shl(b.astype(_I64) - p.z2, ls), p.m2), p.e2)
    return _narrow(p, rdbp(vqrdmulh(wrap_int32(x + y), p.mo), -p.eo))


def _lanes_single(p, a, b):
    """``optimized_integer_ops::AddElementwiseInt8`` vector lanes (16 per step): each input rounded once
    (the input shift folded into the left shift, as in the int16 loop):

        x_i = vqrdmulh(shl(q_i - z_i, 20 + shift_i), M_i)            (q_i - z_i in [-255, 255])
        out = clamp(sat_s8(wrap16(wrap16(RDBP(vqrdmulh(x_1 + x_2, M_o), -shift_o)) + z_o)), lo, hi)

    Off the rails it equals the reference except at input-rounding ties; once |sum| >= 2^15 the
    wrapping narrow can flip a saturated output to the opposite rail (seen at output scales ~1e-4)."""
    return _narrow(p, _sum_single(p, a, b))


def _sum_single(p, a, b) -> np.ndarray:
    """RDBP(vqrdmulh(x_1 + x_2, M_o), -shift_o) with x_i = vqrdmulh(shl(q_i - z_i, left_shift + shift_i),
    M_i): the rescaled sum of the NEON ADD loops that round each input once (int8 and int16)."""
    ls = p.left_shift
    x = vqrdmulh(_shl(np.asarray(a).astype(_I64) - p.z1, ls + p.e1), p.m1)
    y = vqrdmulh(_shl(np.asarray(b).astype(_I64) - p.z2, ls + p.e2), p.m2)
    return rdbp(vqrdmulh(wrap_int32(x + y), p.mo), -p.eo)


def _pair_tables(p):
    """Every 8-bit ADD output code is a function of its own input pair and of which loop computed it,
    so the reference, the elementwise-lane and the scalar-broadcast-lane formulas are tabulated over
    all 65536 pairs (index (a & 0xFF) << 8 | b & 0xFF), with each loop's lane count."""
    dt = np.dtype(p.dtype)
    codes = np.arange(256, dtype=np.uint8).view(dt)
    a, b = np.repeat(codes, 256), np.tile(codes, 256)
    ref = ref_elementwise.run_add_sub(p, a, b)
    floor = _lanes_floor(p, a, b).astype(dt)
    if dt == np.int8:
        return ref, (_lanes_single(p, a, b).astype(dt), _NEON_BLOCK), (floor, _U8_BLOCK)
    return ref, (floor, _U8_BLOCK), (floor, _U8_BLOCK)


def _add_8bit(p, a, b):
    """``BroadcastAddDispatch`` / ``Add`` for 8 bits: equal shapes run the elementwise loop over the
    whole tensor; a five-fold broadcast runs it over runs of y4 (y4 > 1) or the scalar-broadcast loop
    over runs of y3; in each run lane i is vectorised iff i < W * floor(L / W), the rest (and generic
    broadcasts) are the reference formula."""
    ff = _fivefold(a.shape, b.shape)
    if ff is None:
        return ref_elementwise.run_add_sub(p, a, b)
    run, elementwise = ff
    ref_t, elem, scal = prepared(p, "add_pair_tables", _pair_tables)
    if run == 0 and _FAST and a.flags.c_contiguous and b.flags.c_contiguous:
        a1, b1 = a.reshape(-1), b.reshape(-1)
        n = elem[1] * (a1.size // elem[1])
        out = np.empty(a1.size, ref_t.dtype)
        pair_lookup(a1[:n], b1[:n], elem[0], out[:n])
        pair_lookup(a1[n:], b1[n:], ref_t, out[n:])
        return out.reshape(a.shape)
    shape = np.broadcast_shapes(a.shape, b.shape)
    ya = np.broadcast_to(a, shape).reshape(-1).view(np.uint8).astype(np.intp)
    yb = np.broadcast_to(b, shape).reshape(-1).view(np.uint8)
    idx = (ya << 8) | yb
    lane_t, width = elem if elementwise else scal
    mask = _vector_mask(idx.size, run, width)
    return np.where(mask, lane_t[idx], ref_t[idx]).reshape(shape)


@kernel("Add", VARIANT, prepare=prepare_add, impls=ref_elementwise.ADD_IMPLS)
def add(p, a, b):
    if p.dtype in ("int8", "uint8"):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype == b.dtype == np.dtype(p.dtype):
            return _add_8bit(p, a, b)
    y = fast_opt_add(p, a, b) if _FAST else None
    if y is not None:
        return y
    ref = ref_elementwise.run_add_sub(p, a, b)
    if not p.neon_int16 or a.shape != b.shape or ref.size < _NEON_BLOCK:
        return ref
    n = _NEON_BLOCK * (ref.size // _NEON_BLOCK)
    o = _sum_single(p, a.reshape(-1)[:n], b.reshape(-1)[:n]) + p.zo
    lo, hi = p.clamp
    out = ref.reshape(-1).copy()
    out[:n] = np.clip(np.clip(o, lo, hi), -32768, 32767)  # vqmovn_s32 after the clamp
    return out.reshape(ref.shape)
