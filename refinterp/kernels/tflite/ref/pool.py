"""TFLite integer AveragePool / MaxPool (variant ``tflite_ref``), ``reference/integer_ops/pooling.h``.

AVERAGE_POOL_2D (``impl: raw_q_average``, the only form TFLite has): the *raw* stored values are
averaged (zero point not subtracted; input and output params are assumed equal, as TFLite does)::

    sum = sum of q over the in-bounds part of the window ; n = number of in-bounds cells
    avg = (sum + n//2) // n if sum > 0 else (sum - n//2) / n   (C division: round half away)
    out = clamp(avg, lo, hi)                                    (fused activation of the output)

MAX_POOL_2D: ``clamp(max over in-bounds cells, lo, hi)``.  Sums are exact int64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from refinterp.quant.fixedpoint import trunc_div
from refinterp.quant.params import activation_range
from ...float import pool as float_pool
from ...spatial import pad_channels_last, to_channels_last, from_channels_last
from ...registry import declare_settings, kernel

declare_settings(__name__, "requires_equal_params")  # the scheme settings these kernels read

VARIANT = "tflite_ref"
AVG_IMPLS = ("raw_q_average",)


@dataclass(frozen=True)
class QPoolPlan:
    fplan: object
    lo: int
    hi: int
    dtype: str

    def describe(self) -> dict:
        return {"impl": "raw_q_average / max", "clamp": [self.lo, self.hi]}


def _prepare(node, ctx) -> QPoolPlan:
    out = ctx.outputs[0]
    if node.op == "AveragePool":
        impl = ctx.settings.get("impl", "raw_q_average")
        if impl not in AVG_IMPLS:
            raise ModelError(f"node '{node.name}' (AveragePool): impl '{impl}' not supported by variant "
                             f"{VARIANT} (expected one of: {', '.join(AVG_IMPLS)})")
    if (ctx.settings or {}).get("requires_equal_params"):
        _check_pool_params(node, ctx)
    if out.quant is None:
        lo, hi = np.iinfo(np.dtype(out.dtype)).min, np.iinfo(np.dtype(out.dtype)).max
    else:
        lo, hi = activation_range(node.attrs.get("activation"), out.quant.scale, out.quant.zero_point,
                                  out.dtype, node.name)
    return QPoolPlan(float_pool.prepare_node(node, ctx), int(lo), int(hi), out.dtype)


# TFLM pooling_common.cc Prepare: equal zero points and |s_in - s_out| <= 1e-6 in float32 (an
# absolute tolerance: 0.05 vs 0.0500005 passes, 100 vs 100.00001 fails; checked against tflite_micro)
_POOL_SCALE_TOL = np.float32(1e-6)


def _check_pool_params(node, ctx) -> None:
    i, o = ctx.inputs[0], ctx.outputs[0]
    if i is None or i.quant is None or o.quant is None:
        return
    si, so = np.float32(i.quant.scale.ravel()[0]), np.float32(o.quant.scale.ravel()[0])
    zi, zo = int(i.quant.zero_point.ravel()[0]), int(o.quant.zero_point.ravel()[0])
    if zi != zo or abs(si - so) > _POOL_SCALE_TOL:
        raise ModelError(f"node '{node.name}' ({node.source_op or node.op}): input (scale {str(si)}, zero point "
                         f"{zi}) and output (scale {str(so)}, zero point {zo}) differ; the backend's pooling "
                         f"kernel refuses this in Prepare (it needs equal parameters, scales within 1e-6)")


@kernel("AveragePool", VARIANT, prepare=_prepare, impls=AVG_IMPLS)
def qaverage_pool(plan: QPoolPlan, x):
    xc = to_channels_last(np.asarray(x), plan.fplan.layout).astype(np.int64)
    spatial = xc.shape[1:-1]
    win = float_pool.window(plan.fplan, spatial)
    total = float_pool.sum_windows(pad_channels_last(xc, win), win, np.int64)
    mask = np.ones((1,) + tuple(spatial) + (1,), dtype=np.int64)
    count = float_pool.sum_windows(pad_channels_last(mask, win), win, np.int64)
    half = count // 2
    avg = np.where(total > 0, trunc_div(total + half, count), trunc_div(total - half, count))
    y = np.clip(avg, plan.lo, plan.hi).astype(plan.dtype)
    return from_channels_last(y, plan.fplan.layout)


@kernel("MaxPool", VARIANT, prepare=_prepare)
def qmax_pool(plan: QPoolPlan, x):
    y = float_pool.max_pool(plan.fplan, np.asarray(x))
    if isinstance(y, tuple):
        y = y[0]
    return np.clip(y, plan.lo, plan.hi).astype(plan.dtype)
