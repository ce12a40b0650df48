"""LiteRT optimized (variant ``tflite_opt``) and XNNPACK (variant ``xnn``) MEAN / SUM, int8.

``tflite_opt`` (``tflite/kernels/reduce.cc`` EvalMean / EvalSum with kGenericOptimized):

* MEAN, ``impl: spatial_fast`` and int8, 4-D, keep_dims, axes exactly {1, 2}
  (``optimized/integer_ops/mean.h``)::

      t = float32(float32(zx * sx) / so) ; t += t > 0 ? 0.5f : -0.5f ; bias = zo - int(t)   (trunc)
      real = float32(sx / float32(float32(n) * so)) ; (M, e) = QuantizeMultiplier(real)
      S = sum of raw q (int32, zero point not subtracted)
      out = clamp(requant(S, M, e) + bias, -128, 127)
      requant: the scheme's ``channel_block`` (16, MultiplyByQuantizedMultiplier4Rows) channels with
      ``block_rounding``, the tail with ``rounding``
  every other MEAN: the reference formula (``qreduce``, variant ``tflite_ref``).
* SUM, ``impl: float_scale`` (``optimized/reduce.h`` QuantizedMeanOrSum, compute_sum), typed::

      scale = float32(sx / so) ; bias = float32(float32(float32(-zx) * scale) * float32(n))
      out = clamp(int32(roundf(float32(float32(S) * scale) + bias)) + zo, qmin, qmax)

``xnn`` (``impl: xnn_float`` in the scheme's ``delegate`` settings; XNNPACK ``reduce-nd`` with the
qs8 reduce params): int8/uint8 per-tensor MEAN and SUM over any non-empty axis set::

      scale = float32(float32(sx / so) * float32(1 / n))     (SUM: float32(sx / so))
      yzp = float32(float32(zo) - float32(n * zx) * scale)
      out = clamp(rint_even(float32(float32(S) * scale) + yzp), qmin, qmax)
  other dtypes (int16) fall back to ``tflite_opt``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from refinterp.errors import ModelError
from refinterp.quant.fixedpoint import round_half_away, wrap_int32
from refinterp.quant.params import Requant, channel_block_of, qrange, rounding_of
from refinterp.settings import fast_kernels
from ..ref import reduce as ref_reduce
from ..ref.reduce_fast import fast_reduce
from ...registry import declare_settings, kernel
from ..xnnpack.gemm import delegate_ctx, fallback_ctx

declare_settings(__name__, "requant", "delegate")  # the scheme settings these kernels read

OPT, XNN = "tflite_opt", "xnn"
MEAN_IMPLS = ("reference", "spatial_fast")
SUM_IMPLS = ("typed", "uint8_bytes", "float_scale")
XNN_IMPLS = ("xnn_float",)  # the delegate's float scale + zero-point formula
_FAST = fast_kernels()


@dataclass(frozen=True)
class FastReducePlan:
    op: str
    form: str  # spatial_fast | float_scale | xnn_float
    axes: tuple[int, ...] | None
    keepdims: bool
    zx: int
    zo: int
    sx: np.float32
    so: np.float32
    requant: Requant | None  # spatial_fast only (zo = the separately rounded bias)
    dtype: str
    executed_by: str = ""

    def describe(self) -> dict:
        d = {"form": self.form, "axes": self.axes, "keepdims": self.keepdims,
             "zero_points": [self.zx, self.zo], "scales": [float(self.sx), float(self.so)]}
        if self.requant is not None:
            d.update(self.requant.describe(), bias=self.requant.zo)
        return {"executed_by": self.executed_by, **d} if self.executed_by else d


def _axes(node, ctx):
    axes = ctx.const(1)
    return None if axes is None else tuple(int(a) for a in np.asarray(axes).ravel())


def _spatial_fast_applies(node, ctx) -> bool:
    x, out = ctx.inputs[0], ctx.outputs[0]
    ax = _axes(node, ctx)
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if x.dtype != "int8" or out.dtype != "int8" or x.quant is None or len(x.shape or ()) != 4 or not keep:
        return False
    return ax is not None and len(ax) == 2 and {a % 4 for a in ax} == {1, 2}


def _params(ctx):
    x, out = ctx.inputs[0], ctx.outputs[0]
    return (np.float32(x.quant.scale[0]), int(x.quant.zero_point[0]), np.float32(out.quant.scale[0]),
            int(out.quant.zero_point[0]))


def _prepare_opt(node, ctx):
    x, out = ctx.inputs[0], ctx.outputs[0]
    if x.quant is None or out.quant is None:
        return ref_reduce.prepare_node(node, ctx)
    impl = ctx.settings.get("impl", "reference" if node.op == "ReduceMean" else "typed")
    allowed = MEAN_IMPLS if node.op == "ReduceMean" else SUM_IMPLS
    if impl not in allowed:
        raise ModelError(f"node '{node.name}' ({node.op}): impl '{impl}' not supported by variant {OPT} "
                         f"(expected one of: {', '.join(allowed)})")
    sx, zx, so, zo = _params(ctx)
    keep = bool(int(node.attrs.get("keepdims", 1)))
    if node.op == "ReduceMean" and impl == "spatial_fast" and _spatial_fast_applies(node, ctx):
        n = int(x.shape[1]) * int(x.shape[2])
        t = np.float32(np.float32(np.float32(zx) * sx) / so)
        t = np.float32(t + np.float32(0.5)) if t > 0 else np.float32(t - np.float32(0.5))
        bias = zo - int(np.trunc(t))
        real = np.float32(sx / np.float32(np.float32(n) * so))
        block, br = channel_block_of(ctx.settings, node.name)
        rq = Requant.build(np.float64(real), rounding_of(ctx.settings), bias, -128, 127, "int8", block, br)
        return FastReducePlan(node.op, "spatial_fast", _axes(node, ctx), keep, zx, zo, sx, so, rq, out.dtype)
    if node.op == "ReduceSum" and impl == "float_scale":
        return FastReducePlan(node.op, "float_scale", _axes(node, ctx), keep, zx, zo, sx, so, None, out.dtype)
    return ref_reduce.prepare_node(node, ctx)


def _prepare_xnn(node, ctx):
    x, out = ctx.inputs[0], ctx.outputs[0]
    dctx = delegate_ctx(ctx)
    ax = _axes(node, ctx)
    why = None
    if dctx.settings.get("impl") not in (None,) + XNN_IMPLS:
        raise ModelError(f"node '{node.name}' ({node.source_op or node.op}): delegate impl "
                         f"'{dctx.settings.get('impl')}' is not one of xnn_float")
    if x.dtype not in ("int8", "uint8") or out.dtype != x.dtype or x.quant is None or out.quant is None:
        why = f"types {x.dtype} -> {out.dtype} (XNNPACK QS8/QU8 reduce needs 8-bit tensors)"
    elif ax is None or len(ax) == 0:
        why = "empty or computed reduction axes"
    elif dctx.settings.get("impl") != "xnn_float":
        why = "the scheme's delegate settings do not select impl xnn_float"
    if why is not None:
        plan = _prepare_opt(node, fallback_ctx(ctx))
        note = f"built-in kernel (XNNPACK refuses: {why})"
        return replace(plan, executed_by=note) if isinstance(plan, FastReducePlan) else _Tagged(plan, note)
    sx, zx, so, zo = _params(ctx)
    keep = bool(int(node.attrs.get("keepdims", 1)))
    return FastReducePlan(node.op, "xnn_float", ax, keep, zx, zo, sx, so, None, out.dtype, "xnnpack")


@dataclass(frozen=True)
class _Tagged:
    """A reference plan run by the built-in kernel under the ``xnn`` variant."""
    plan: ref_reduce.QReducePlan
    executed_by: str

    def describe(self) -> dict:
        return {"executed_by": self.executed_by, **self.plan.describe()}


def _sum(x: np.ndarray, plan: FastReducePlan) -> tuple[np.ndarray, int]:
    ax = ref_reduce.reduce_axes(plan, x.ndim)
    n = ref_reduce.reduced_count(x, ax)
    return wrap_int32(np.sum(x.astype(np.int64), axis=ax, keepdims=plan.keepdims)), n


def _run_fast(plan: FastReducePlan, x: np.ndarray) -> np.ndarray:
    y = fast_reduce(plan, x) if _FAST else None
    if y is not None:
        return y
    s, n = _sum(np.asarray(x), plan)
    lo, hi = qrange(plan.dtype)
    if plan.form == "spatial_fast":
        return plan.requant(s)
    if plan.form == "float_scale":
        scale = np.float32(plan.sx / plan.so)
        bias = np.float32(np.float32(np.float32(-plan.zx) * scale) * np.float32(n))
        v = round_half_away((s.astype(np.float32) * scale).astype(np.float32) + bias).astype(np.int64)
        return np.clip(v + plan.zo, lo, hi).astype(plan.dtype)
    # xnn_float
    scale = np.float32(plan.sx / plan.so)
    if plan.op == "ReduceMean":
        scale = np.float32(scale * np.float32(np.float32(1.0) / np.float32(n)))
    yzp = np.float32(np.float32(plan.zo) - np.float32(n * plan.zx) * scale)
    v = np.rint((s.astype(np.float32) * scale).astype(np.float32) + yzp)
    return np.clip(v, lo, hi).astype(plan.dtype)


def _run(plan, x, axes=None):
    if isinstance(plan, _Tagged):
        plan = plan.plan
    if isinstance(plan, FastReducePlan):
        return _run_fast(plan, x)
    return ref_reduce.qmean_or_sum(plan, x)


kernel(("ReduceMean", "ReduceSum"), OPT, prepare=_prepare_opt,
       impls={"ReduceMean": MEAN_IMPLS, "ReduceSum": SUM_IMPLS})(_run)
kernel(("ReduceMean", "ReduceSum"), XNN, prepare=_prepare_xnn, impls=XNN_IMPLS)(_run)
