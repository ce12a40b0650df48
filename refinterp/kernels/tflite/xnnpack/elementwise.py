"""XNNPACK delegate (variant ``xnn``) for the quantized element-wise ops LiteRT hands it: ADD, SUB,
MUL, LEAKY_RELU, LOGISTIC, TANH, QUANTIZE, DEQUANTIZE and RESIZE_BILINEAR.

``prepare`` first applies the delegate's validity limits (``quant/xnn.py``, from
``tflite/delegates/xnnpack/xnnpack_delegate.cc``).  A node XNNPACK refuses runs the built-in
kernel it would run under ``tflite-optimized`` (``tflite_opt`` when that differs from the reference,
else ``tflite_ref``), with the node's non-delegate settings; the plan's ``executed_by`` says which
and why (``refinterp inspect``).  Ops XNNPACK never takes for integers (HARD_SWISH, RELU*, GELU,
RSQRT, SOFTMAX, MAXIMUM/MINIMUM, SQUARED_DIFFERENCE, L2_NORMALIZATION, RESIZE_NEAREST) register no
``xnn`` kernel: the scheme's variant list falls through to the built-in kernels.

Numeric contracts when XNNPACK runs the node (8-bit tensors only):

* ADD/SUB: out = clamp(((bias + a*ma + b*mb) >> shift) + zo), 20-bit multipliers (SUB: mb < 0);
* MUL: out = clamp(rint_even(float32((a-z1)*(b-z2)) * float32(float32(s1*s2)/so)) + zo); with
  ``delegate: {impl: rndnu}`` (the ARM NEON kernels) the integer form of ``quant/xnn.py``
  ``mul_rndnu`` instead;
* LEAKY_RELU / requantize: out = clamp((zo*256 + 0x80 + v*m) >> 8), m = lrintf(256*scale);
* LOGISTIC / TANH: a 256-entry table of the float reference, RNE output rounding;
* QUANTIZE float -> 8-bit: out = clamp(rint_even(min(f * float32(1/s), qmax - zp)) + zp);
* DEQUANTIZE: float32(q - zp) * s (equal to the reference formula);
* fused activations: bounds lrintf(clamp(f/so + zo, qmin, qmax)).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from refinterp.quant import xnn
from refinterp.settings import fast_kernels
from ..optimized import activation as opt_activation
from ..optimized import elementwise as opt_elementwise
from ..optimized import misc as opt_misc
from ..ref import activation as ref_activation
from ..ref.activation import TablePlan
from ..ref import elementwise as ref_elementwise
from ..ref import misc as ref_misc
from ..common import impl, qparams, qrange
from ..ref.elementwise_fast import fast_xnn_add
from ...prepared import plan_fields
from ...registry import declare_settings, kernel
from .gemm import delegate_ctx, fallback_ctx

declare_settings(__name__, "requant", "delegate", "impl")  # the scheme settings these kernels read

VARIANT = "xnn"
_F = np.float32
_I64 = np.int64
_FAST = fast_kernels()


@dataclass(frozen=True)
class XnnChoice:
    """Who runs the node (XNNPACK, or the built-in kernel it leaves the node to) and that one's plan."""

    executed_by: str
    delegated: bool
    plan: Any

    def describe(self) -> dict[str, Any]:
        return {"executed_by": self.executed_by, "delegated": self.delegated, **plan_fields(self.plan)}


@dataclass(frozen=True)
class XnnAddPlan:
    a_multiplier: int
    b_multiplier: int
    shift: int
    bias: int
    zo: int
    clamp: tuple[int, int]
    dtype: str
    op: str = "add"


@dataclass(frozen=True)
class XnnMulPlan:
    scale: np.float32
    z1: int
    z2: int
    zo: int
    clamp: tuple[int, int]
    dtype: str
    op: str = "mul"
    rndnu: tuple[int, int, int] | None = None  # ARM: (multiplier, left pre-shift, post-shift)


@dataclass(frozen=True)
class XnnQuantizePlan:
    float: bool
    zo: int
    dtype: str
    reciprocal: np.float32 | None = None  # float input
    table: TablePlan | None = None  # 8-bit input: every code requantized
    multiplier: int | None = None

    def describe(self) -> dict[str, Any]:
        d = {k: v for k, v in vars(self).items() if k != "table" and not k.startswith("_")}
        return {**d, **(plan_fields(self.table) if self.table is not None else {})}


@dataclass(frozen=True)
class XnnDequantizePlan:
    scale: float
    zx: int


def register(op: str, refusal: Callable, prepare_xnn: Callable, run_xnn: Callable,
             prepare_builtin: Callable, run_builtin: Callable, impls: tuple[str, ...] = ()) -> None:
    """Register ``op`` under ``xnn``: ``refusal(node, ctx) -> reason | None`` decides who runs it;
    ``impls``: the ``delegate: {impl: ...}`` values the XNNPACK side reads."""
    def prepare(node, ctx):
        why = refusal(node, ctx)
        if why is None:
            return XnnChoice("xnnpack", True, prepare_xnn(node, delegate_ctx(ctx)))
        return XnnChoice(f"built-in kernel (XNNPACK refuses: {why})", False, prepare_builtin(node, fallback_ctx(ctx)))

    def run(choice, *xs):
        return (run_xnn if choice.delegated else run_builtin)(choice.plan, *xs)

    kernel(op, VARIANT, prepare=prepare, **({"impls": impls} if impls else {}))(run)


def _quant_of(t):
    return t is not None and t.quant is not None and t.quant.scale.size == 1


def _tensors_refusal(ctx, n_in: int) -> str | None:
    ts = list(ctx.inputs[:n_in]) + [ctx.outputs[0]]
    if any(t is None or t.quant is None for t in ts):
        return "a tensor without quantization"
    return xnn.eight_bit_refusal([t.dtype for t in ts], [_quant_of(t) for t in ts])


# --- ADD / SUB / MUL --------------------------------------------------------------------------

def _binary_refusal(kind: str):
    def refusal(node, ctx):
        why = _tensors_refusal(ctx, 2) or xnn.fused_refusal(node.attrs.get("activation"))
        if why:
            return why
        s1, s2, so = (float(t.quant.scale[0]) for t in (ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]))
        return xnn.mul_refusal(s1, s2, so) if kind == "mul" else xnn.add_refusal(s1, s2, so)
    return refusal


def _binary_params(node, ctx):
    s1, z1 = qparams(ctx.inputs[0], node, "first input")
    s2, z2 = qparams(ctx.inputs[1], node, "second input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    dt = ctx.outputs[0].dtype
    lo, hi = xnn.activation_bounds(node.attrs.get("activation"), so, zo, dt)
    return s1, z1, s2, z2, so, zo, dt, lo, hi


def _prepare_add_sub(sign_b: int):
    def prepare(node, ctx):
        s1, z1, s2, z2, so, zo, dt, lo, hi = _binary_params(node, ctx)
        return XnnAddPlan(**xnn.add_params(s1, z1, s2, z2, so, sign_b), zo=zo, clamp=(lo, hi), dtype=dt)
    return prepare


def _run_add(p, a, b):
    y = fast_xnn_add(p, a, b) if _FAST else None
    if y is not None:
        return y
    # |a*ma| <= 255 * 2^21 < 2^29: the int32 sum of two products and the bias cannot overflow.
    acc = p.bias + a.astype(_I64) * p.a_multiplier + b.astype(_I64) * p.b_multiplier
    lo, hi = p.clamp
    return np.clip((acc >> p.shift) + p.zo, lo, hi).astype(p.dtype)


MUL_IMPLS = ("fp32", "rndnu")  # x86 / scalar: float32 requantization; ARM NEON: rndnu


def _prepare_mul(node, ctx):
    s1, z1, s2, z2, so, zo, dt, lo, hi = _binary_params(node, ctx)
    scale = xnn.mul_scale(s1, s2, so)
    rndnu = xnn.mul_rndnu_params(scale) if impl(ctx, MUL_IMPLS, "fp32") == "rndnu" else None
    return XnnMulPlan(scale, z1, z2, zo, (lo, hi), dt, rndnu=rndnu)


def _run_mul(p, a, b):
    prod = (a.astype(_I64) - p.z1) * (b.astype(_I64) - p.z2)  # |prod| <= 2^16: exact in float32
    if p.rndnu is not None:
        lo, hi = p.clamp
        return np.clip(xnn.mul_rndnu(prod, *p.rndnu, p.zo, p.dtype), lo, hi).astype(p.dtype)
    v = np.rint((prod.astype(_F) * p.scale).astype(_F)).astype(_I64)
    lo, hi = p.clamp
    return np.clip(v + p.zo, lo, hi).astype(p.dtype)


register("Add", _binary_refusal("add"), _prepare_add_sub(1), _run_add,
         opt_elementwise.prepare_add, opt_elementwise.add)
register("Sub", _binary_refusal("add"), _prepare_add_sub(-1), _run_add,
         ref_elementwise.prepare_add_sub(True), ref_elementwise.run_add_sub)
register("Mul", _binary_refusal("mul"), _prepare_mul, _run_mul, opt_elementwise.prepare_mul, opt_elementwise.mul,
         impls=MUL_IMPLS)


# --- LEAKY_RELU / LOGISTIC / TANH (tables over every 8-bit code) -----------------------------

def _unary_params(node, ctx):
    sx, zx = qparams(ctx.inputs[0], node, "input")
    so, zo = qparams(ctx.outputs[0], node, "output")
    dt = ctx.outputs[0].dtype
    return sx, zx, so, zo, dt


def _codes(dtype: str) -> np.ndarray:
    lo, hi = qrange(dtype)
    return np.arange(lo, hi + 1, dtype=_I64)


def _table_plan(table, dtype, **info) -> TablePlan:
    return TablePlan(np.asarray(table, _I64), qrange(dtype)[0], dtype, MappingProxyType(info))


def _run_table(p: TablePlan, x):
    return p.table[x.astype(_I64) - p.lo].astype(p.dtype)


def _lrelu_refusal(node, ctx):
    why = _tensors_refusal(ctx, 1)
    if why:
        return why
    alpha = node.attrs.get("alpha", 0.01)
    return xnn.lrelu_refusal(float(ctx.inputs[0].quant.scale[0]), float(ctx.outputs[0].quant.scale[0]), alpha)


def _prepare_lrelu(node, ctx):
    sx, zx, so, zo, dt = _unary_params(node, ctx)
    mp, mn = xnn.lrelu_multipliers(sx, so, node.attrs.get("alpha", 0.01))
    v = _codes(dt) - zx
    lo, hi = qrange(dt)
    y = np.where(v >= 0, xnn.eight_bit_shift(v, mp, zo, lo, hi), xnn.eight_bit_shift(v, mn, zo, lo, hi))
    return _table_plan(y, dt, positive_multiplier=mp, negative_multiplier=mn)


register("LeakyRelu", _lrelu_refusal, _prepare_lrelu, _run_table, ref_activation.prepare_leaky, ref_activation.leaky)


def _prepare_lut(fn_name: str):
    def prepare(node, ctx):
        sx, zx, so, zo, dt = _unary_params(node, ctx)
        return _table_plan(xnn.table_unary(fn_name, sx, zx, so, zo, dt), dt, table_of=fn_name)
    return prepare


def _unary8_refusal(node, ctx):
    return _tensors_refusal(ctx, 1)


register("Sigmoid", _unary8_refusal, _prepare_lut("sigmoid"), _run_table,
         opt_activation.prepare_node(False), ref_activation.sigmoid_tanh)
register("Tanh", _unary8_refusal, _prepare_lut("tanh"), _run_table,
         opt_activation.prepare_node(True), ref_activation.sigmoid_tanh)


# --- QUANTIZE / DEQUANTIZE --------------------------------------------------------------------

def _quantize_refusal(node, ctx):
    x, out = ctx.inputs[0], ctx.outputs[0]
    if out.quant is None or out.quant.scale.size != 1 or out.dtype not in ("int8", "uint8"):
        return f"output {out.dtype} (XNNPACK converts only to per-tensor 8-bit)"
    if x.dtype in ("float32", "float16"):
        return None
    if x.dtype != out.dtype or not _quant_of(x):
        return f"requantization {x.dtype} -> {out.dtype} (XNNPACK needs equal 8-bit types)"
    return xnn.requant_refusal(float(x.quant.scale[0]), float(out.quant.scale[0]))


def _prepare_quantize(node, ctx):
    out = ctx.outputs[0]
    so, zo = qparams(out, node, "output")
    dt = out.dtype
    if ctx.inputs[0].dtype in ("float32", "float16"):
        return XnnQuantizePlan(True, zo, dt, reciprocal=xnn.reciprocal_scale(so))
    sx, zx = qparams(ctx.inputs[0], node, "input")
    m = xnn.cvt_multiplier(sx, so)
    lo, hi = qrange(dt)
    return XnnQuantizePlan(False, zo, dt, table=_table_plan(xnn.eight_bit_shift(_codes(dt) - zx, m, zo, lo, hi), dt),
                           multiplier=m)


def _run_quantize(p, x):
    if not p.float:
        return _run_table(p.table, x)
    lo, hi = qrange(p.dtype)
    f = np.asarray(x, _F)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.minimum((f * p.reciprocal).astype(_F), _F(hi - p.zo))
        r = np.rint(v).astype(np.float64)
    # cvtps2dq: out-of-range / NaN -> INT32_MIN, which the saturating packs clamp to qmin
    r = np.where(np.isfinite(r), np.maximum(r, -2.0 ** 31), -2.0 ** 31)
    return np.clip(r.astype(_I64) + p.zo, lo, hi).astype(p.dtype)


register("Quantize", _quantize_refusal, _prepare_quantize, _run_quantize,
         opt_misc.prepare_quantize, opt_misc.quantize)


def _dequantize_refusal(node, ctx):
    x = ctx.inputs[0]
    if x.dtype not in ("int8", "uint8") or not _quant_of(x):
        return f"input {x.dtype}{'' if _quant_of(x) else ' per-axis'} (XNNPACK converts only per-tensor 8-bit)"
    return None


def _prepare_dequantize(node, ctx):
    sx, zx = qparams(ctx.inputs[0], node, "input")
    return XnnDequantizePlan(sx, zx)


def _run_dequantize(p, x):
    return ((x.astype(_I64) - p.zx).astype(_F) * p.scale).astype(_F)


register("Dequantize", _dequantize_refusal, _prepare_dequantize, _run_dequantize,
         opt_misc.prepare_dequantize, opt_misc.dequantize)


# --- RESIZE_BILINEAR --------------------------------------------------------------------------

def _resize_refusal(node, ctx):
    if node.attrs.get("mode", "nearest") != "linear":
        return "nearest-neighbour resize (XNNPACK takes RESIZE_BILINEAR only)"
    x = ctx.inputs[0]
    if x.dtype not in ("int8", "uint8") or not _quant_of(x):
        return f"input {x.dtype} (XNNPACK resizes float or per-tensor 8-bit tensors)"
    if x.shape is not None and len(x.shape) != 4:
        return "input is not 4-D"
    return None


def _q11_coords(n_out: int, n_in: int, align: bool, half: bool):
    """``xnn_indirection_init_resize_bilinear2d_hwc_q11``: float32 source positions, lower index
    and the Q11 fraction lrintf((v - i0) * 2048)."""
    a = 1 if align and n_out != 1 else 0
    ws = _F(_F(n_in - a) / _F(n_out - a))
    o = np.arange(n_out, dtype=_F)
    if half:
        off = _F(_F(_F(0.5) * ws) - _F(0.5))
        v = np.clip((o * ws).astype(_F) + off, _F(0.0), _F(n_in - 1)).astype(_F)
    else:
        v = np.minimum((o * ws).astype(_F), _F(n_in - 1)).astype(_F)
    i0 = v.astype(_I64)
    i1 = np.minimum(i0 + 1, n_in - 1)
    frac = np.rint(((v - i0.astype(_F)).astype(_F) * _F(2048.0)).astype(_F)).astype(_I64)
    return i0, i1, frac


def _prepare_resize(node, ctx):
    """The reference prepare (output size, flags) for any 8-bit type (XNNPACK also takes uint8)."""
    x = ctx.inputs[0]
    if x.dtype == "uint8":
        ctx = replace(ctx, inputs=[replace(x, dtype="int8")] + list(ctx.inputs[1:]))
    p = ref_misc.prepare_resize(node, ctx)
    return replace(p, q11=True, dtype=x.dtype)


def _run_resize(p, x, roi=None, scales=None, sizes=None):
    """top = tl*2048 + (tr - tl)*ax ; bottom likewise ; acc = top*2048 + (bottom - top)*ay ;
    out = (acc + 2^21) >> 22  (|acc| < 2^30)."""
    oh, ow = p.size
    _, ih, iw, _ = x.shape
    y0, y1, fy = _q11_coords(oh, ih, p.align, p.half)
    x0, x1, fx = _q11_coords(ow, iw, p.align, p.half)
    q = x.astype(_I64)
    ax = fx[None, None, :, None]
    ay = fy[None, :, None, None]
    tl, tr = q[:, y0][:, :, x0], q[:, y0][:, :, x1]
    bl, br = q[:, y1][:, :, x0], q[:, y1][:, :, x1]
    top = tl * 2048 + (tr - tl) * ax
    bottom = bl * 2048 + (br - bl) * ax
    acc = top * 2048 + (bottom - top) * ay
    return ((acc + (1 << 21)) >> 22).astype(p.dtype)


register("Resize", _resize_refusal, _prepare_resize, _run_resize, opt_misc.prepare_resize, opt_misc.resize)
