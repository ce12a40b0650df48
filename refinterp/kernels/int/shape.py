"""Data-movement and shape kernels (ONNX semantics, latest-opset form).

These kernels never do arithmetic on element values, so they are registered under both the
``float`` and the ``int`` variant: integer schemes run them unchanged on stored integers.
Cast is float-variant only (it converts values).  Slicing, Pad and depth/space moves live in
``shape_slice.py`` and ``shape_pad.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from refinterp.ir import Node
from ..registry import PrepareContext, declare_settings, kernel
from .shape_quant import CONCAT_IMPLS, check_equal_params, concat_rescale_plan

declare_settings(__name__, "requires_equal_params")  # the scheme settings these kernels read

BOTH = ("float", "int")


def ints(v) -> list[int] | None:
    """A constant index tensor (or attribute list) as Python ints; None stays None."""
    if v is None:
        return None
    return [int(a) for a in np.asarray(v).ravel()]


def input_or_attr(node: Node, ctx: PrepareContext, i: int, attr: str) -> list[int] | None:
    """Constant input ``i`` if present, else the pre-opset attribute ``attr`` (None if neither)."""
    c = ctx.const(i)
    if c is not None:
        return ints(c)
    if i < len(node.inputs) and node.inputs[i]:
        return None  # computed at run time
    return ints(node.attr(attr))


def where(node: Node) -> str:
    return f"node '{node.name}' ({node.source_op or node.op})"


# -- Identity / Concat / Transpose ------------------------------------------------------------

@kernel("Identity", BOTH)
def _identity(plan, x):
    return x


@kernel("refinterp.RuntimeInitializer", BOTH, raw_inputs=True)
def _runtime_initializer(plan, x):
    """An initializer read as a run-time value (passes/ort_overridable.py): unchanged."""
    return x


@dataclass(frozen=True)
class AxisPlan:
    axis: int


@dataclass(frozen=True)
class ConcatPlan:
    axis: int
    rescale: tuple = ()  # per input: None (codes copied) or (s, b)
    out: tuple | None = None  # (zero point, qmin, qmax, dtype) when any input is rescaled


def _concat_prepare(node: Node, ctx: PrepareContext) -> AxisPlan:
    return AxisPlan(int(node.attr("axis", 0)))


@kernel("Concat", "float", prepare=_concat_prepare)
def _concat(plan, *xs):
    xs = [x for x in xs if x is not None]
    return np.concatenate(xs, axis=plan.axis % xs[0].ndim)


def _concat_int_prepare(node: Node, ctx: PrepareContext) -> ConcatPlan:
    """Per input: None (codes copied) or a rescale ``(s, b)``; the rules (and refusals) follow the
    op's ``impl`` setting (``shape_quant.concat_rescale_plan``)."""
    rescale = tuple(concat_rescale_plan(node, ctx))
    out = None
    if any(r is not None for r in rescale):
        oq = ctx.outputs[0].quant
        info = np.iinfo(np.dtype(ctx.outputs[0].dtype))
        out = (int(oq.zero_point[0]), info.min, info.max, np.dtype(ctx.outputs[0].dtype))
    return ConcatPlan(_concat_prepare(node, ctx).axis, rescale, out)


@kernel("Concat", "int", prepare=_concat_int_prepare, impls=CONCAT_IMPLS)
def _concat_int(plan, *xs):
    # Inputs whose params differ from the output's: round_half_away(f32(q * s + b)) + out_zp,
    # clamped to the output type (LiteRT ConcatenationWithScaling, float32 arithmetic).
    parts = []
    for x, r in zip(xs, plan.rescale):
        if x is None:
            continue
        if r is not None:
            zp, lo, hi, dt = plan.out
            v = (x.astype(np.float32) * r[0] + r[1]).astype(np.float32)
            v = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))
            x = np.clip(v.astype(np.int64) + zp, lo, hi).astype(dt)
        parts.append(x)
    return np.concatenate(parts, axis=plan.axis % parts[0].ndim)


@dataclass(frozen=True)
class IntsPlan:
    """An integer list (perm, axes, target shape, repeats) from a constant input or an attribute;
    None when it is computed at run time."""

    values: list[int] | None

    def resolve(self, runtime) -> list[int] | None:
        return self.values if self.values is not None else ints(runtime)


def _ints_input(i: int, attr: str):
    """A prepare reading input ``i`` (opset >= 13 form) or the older attribute ``attr``."""
    def prepare(node: Node, ctx: PrepareContext) -> IntsPlan:
        return IntsPlan(input_or_attr(node, ctx, i, attr))
    return prepare


def _transpose_prepare(node: Node, ctx: PrepareContext) -> IntsPlan:
    perm = node.attr("perm")
    if perm is None and ctx.const(1) is not None:  # TFLite TRANSPOSE: perm as an input
        perm = ctx.const(1)
    return IntsPlan(ints(perm))


@kernel("Transpose", BOTH, prepare=_transpose_prepare)
def _transpose(plan, x, perm_in=None):
    perm = plan.resolve(perm_in)  # None: reversed axes
    if perm is None:
        perm = list(range(x.ndim))[::-1]
    return np.array(np.transpose(x, [p % x.ndim for p in perm]), order="C")  # (keeps rank 0)


# -- Reshape family ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReshapePlan:
    shape: list[int] | None  # None: the shape input is computed at run time
    allowzero: int
    where: str


def _reshape_prepare(node: Node, ctx: PrepareContext) -> ReshapePlan:
    return ReshapePlan(input_or_attr(node, ctx, 1, "shape"), int(node.attr("allowzero", 0)), where(node))


def resolve_shape(shape: list[int], in_shape: tuple[int, ...], allowzero: bool, w: str) -> list[int]:
    out = [int(s) for s in shape]
    if not allowzero:
        out = [in_shape[i] if s == 0 and i < len(in_shape) else s for i, s in enumerate(out)]
    if out.count(-1) > 1:
        raise InputError(f"{w}: Reshape target {shape} has more than one -1")
    if -1 in out:
        known = int(np.prod([s for s in out if s != -1]))
        total = int(np.prod(in_shape))
        out[out.index(-1)] = total // known if known else 0
    return out


@kernel("Reshape", BOTH, prepare=_reshape_prepare)
def _reshape(plan, x, shape=None):
    target = plan.shape if plan.shape is not None else ints(shape)
    out = resolve_shape(target, x.shape, bool(plan.allowzero), plan.where)
    if int(np.prod(out)) != x.size:
        raise InputError(f"{plan.where}: cannot reshape {list(x.shape)} to {out}")
    return x.reshape(out)


def _flatten_prepare(node: Node, ctx: PrepareContext) -> AxisPlan:
    return AxisPlan(int(node.attr("axis", 1)))


@kernel("Flatten", BOTH, prepare=_flatten_prepare)
def _flatten(plan, x):
    ax = plan.axis + x.ndim if plan.axis < 0 else plan.axis
    return x.reshape(int(np.prod(x.shape[:ax])), int(np.prod(x.shape[ax:])))


@kernel("Squeeze", BOTH, prepare=_ints_input(1, "axes"))
def _squeeze(plan, x, axes=None):
    ax = plan.resolve(axes)
    if not ax:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(a % x.ndim for a in ax))


@kernel("Unsqueeze", BOTH, prepare=_ints_input(1, "axes"))
def _unsqueeze(plan, x, axes=None):
    ax = plan.resolve(axes)
    rank = x.ndim + len(ax)
    return x.reshape(_unsqueezed_shape(x.shape, sorted(a % rank for a in ax)))


def _unsqueezed_shape(shape, axes):
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return out


def _expand_dims_prepare(node: Node, ctx: PrepareContext) -> IntsPlan:
    check_equal_params(node, ctx, [0])
    return IntsPlan(input_or_attr(node, ctx, 1, "axis"))


@kernel("ExpandDims", BOTH, prepare=_expand_dims_prepare)
def _expand_dims(plan, x, axis=None):
    a = plan.resolve(axis)[0]
    return np.expand_dims(x, a if a >= 0 else a + x.ndim + 1)


# -- Expand / Tile / Pack / Unpack -------------------------------------------------------------

@kernel("Expand", BOTH, prepare=_ints_input(1, "shape"))
def _expand(plan, x, shape=None):
    target = plan.resolve(shape)
    out = np.broadcast_shapes(x.shape, tuple(target))  # ONNX Expand broadcasts both ways
    return np.broadcast_to(x, out).copy()


@kernel("Tile", BOTH, prepare=_ints_input(1, "repeats"))
def _tile(plan, x, repeats=None):
    reps = plan.resolve(repeats)
    return np.tile(x, reps)


@dataclass(frozen=True)
class PackPlan:
    axis: int
    num: int | None


def _pack_prepare(node: Node, ctx: PrepareContext) -> PackPlan:
    check_equal_params(node, ctx)
    return PackPlan(int(node.attr("axis", 0)), node.attr("num"))


@kernel("Pack", BOTH, prepare=_pack_prepare)
def _pack(plan, *xs):
    xs = [x for x in xs if x is not None]
    return np.stack(xs, axis=plan.axis % (xs[0].ndim + 1))


@kernel("Unpack", BOTH, prepare=_pack_prepare)
def _unpack(plan, x):
    ax = plan.axis % x.ndim
    return tuple(np.take(x, i, axis=ax) for i in range(x.shape[ax]))


# -- Shape / Size / Cast -----------------------------------------------------------------------

def _index_dtype(ctx: PrepareContext) -> np.dtype:
    """int64 (ONNX) unless the output tensor says otherwise (TFLite SHAPE out_type int32)."""
    dt = ctx.outputs[0].dtype if ctx.outputs and ctx.outputs[0].dtype else "int64"
    return np.dtype(dt) if np.dtype(dt).kind in "iu" else np.dtype(np.int64)


@dataclass(frozen=True)
class ShapePlan:
    start: int = 0
    end: int | None = None
    dtype: np.dtype = np.dtype(np.int64)


def _shape_prepare(node: Node, ctx: PrepareContext) -> ShapePlan:
    return ShapePlan(int(node.attr("start", 0)), node.attr("end"), _index_dtype(ctx))


@kernel("Shape", BOTH, prepare=_shape_prepare)
def _shape(plan, x):
    r = x.ndim
    start = plan.start + r if plan.start < 0 else plan.start
    end = r if plan.end is None else int(plan.end)
    end = end + r if end < 0 else end
    return np.asarray(x.shape[min(max(start, 0), r):min(max(end, 0), r)], dtype=plan.dtype)


@kernel("Size", BOTH, prepare=lambda node, ctx: ShapePlan(dtype=_index_dtype(ctx)))
def _size(plan, x):
    return np.asarray(x.size, dtype=plan.dtype)


# ONNX TensorProto.DataType -> NumPy dtype (types NumPy cannot hold are absent).
ONNX_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
               7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
               13: np.uint64}
# 4-bit integers are stored one per byte: code -> (storage dtype, number of value bits, signed).
SUB_BYTE = {21: (np.uint8, 4, False), 22: (np.int8, 4, True), "uint4": (np.uint8, 4, False),
            "int4": (np.int8, 4, True)}


@dataclass(frozen=True)
class CastPlan:
    dtype: np.dtype
    bits: int = 0  # 4: int4/uint4 values held one per byte
    signed: bool = False


def _cast_prepare(node: Node, ctx: PrepareContext) -> CastPlan:
    to = node.attr("to")
    if to is None:
        if not ctx.outputs or not ctx.outputs[0].dtype:
            raise UnsupportedOpError(f"{where(node)}: Cast without 'to' or a typed output")
        to = ctx.outputs[0].dtype
    if isinstance(to, str) and to.isdigit():
        to = int(to)
    if to in SUB_BYTE:
        dt, bits, signed = SUB_BYTE[to]
        return CastPlan(np.dtype(dt), bits, signed)
    if isinstance(to, str):
        return CastPlan(np.dtype(to))
    dt = ONNX_DTYPES.get(int(to))
    if dt is None:
        raise UnsupportedOpError(f"{where(node)}: Cast to ONNX dtype {to} is not supported")
    return CastPlan(np.dtype(dt))


@kernel("Cast", "float", prepare=_cast_prepare)
def _cast(plan, x):
    dt = plan.dtype
    if dt == np.bool_:
        return x != 0
    if dt.kind in "iu" and x.dtype.kind == "f":
        # float -> integer truncates toward zero, then wraps modulo 2**bits like a C conversion
        # through int64 (out-of-range values are undefined behaviour in ONNX; onnx.reference and
        # ONNX Runtime on x86 wrap the same way for |x| < 2**63; NaN/inf give INT64_MIN -> wrapped).
        with np.errstate(invalid="ignore", over="ignore"):
            x = np.trunc(x).astype(np.int64)
    if plan.bits:
        # int4 / uint4 keep the low 4 bits (two's complement for int4), as onnx.reference does.
        v = x.astype(np.int64) & 0xF
        return (np.where(v >= 8, v - 16, v) if plan.signed else v).astype(dt)
    return x.astype(dt)


@kernel("CastLike", "float")
def _cast_like(plan, x, target):
    """Cast to ``target``'s element type (its values are not read); Cast's conversion rules."""
    return _cast(CastPlan(np.asarray(target).dtype), x)


@kernel("BitCast", "float")
def _bit_cast(plan, x):
    """Reinterpret the bytes as type ``to`` of the same width (ONNX BitCast, opset 26)."""
    to = plan.attr("to")
    dt = ONNX_DTYPES.get(int(to)) if to is not None else None
    if dt is None or np.dtype(dt).itemsize != x.dtype.itemsize:
        raise InputError(f"{plan.where}: cannot reinterpret {x.dtype} as ONNX type {to}")
    return np.array(x, order="C").view(np.dtype(dt))  # np.array keeps rank 0 (ascontiguousarray does not)
