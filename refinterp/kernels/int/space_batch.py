"""TFLite SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (channels-last; older converters' dilated
convolutions are CONV_2D between these two): data movement, exact for every dtype.

``SpaceToBatchND(x, block[M], paddings[M, 2])`` on x [B, S1..SM, rest...]: pad the spatial dims
(quantized tensors with the output zero point, real value 0, as LiteRT does; TFLite Micro writes
code 0 instead: ``impl: zero_code``; other tensors with 0), then ``y[(i1..iM) * B + b, s1..sM, ...] = xp[b, s1 * k1 + i1, ..., sM * kM + iM, ...]`` with the
block offsets (i1..iM) row-major: y has batch B * prod(block).
``BatchToSpaceND(x, block[M], crops[M, 2])`` is its inverse followed by cropping.
A 3-D input [B, W, C] is the M = 1 case.  LiteRT requires equal input and output quantization
(Prepare); the codes are copied.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from ..registry import PrepareContext, kernel
from .shape import BOTH, where


# SPACE_TO_BATCH_ND padding of quantized tensors, scheme ``impl``: zero_point (LiteRT: the output
# zero point, real 0) | zero_code (TFLite Micro: stored code 0, measured against tflite_micro).
PAD_IMPLS = ("zero_point", "zero_code")


@dataclass(frozen=True)
class SpaceBatchPlan:
    where: str
    pad_value: int  # stored code written into SPACE_TO_BATCH_ND padding of integer tensors


def _prepare(node, ctx: PrepareContext) -> SpaceBatchPlan:
    q = ctx.outputs[0].quant if ctx.outputs else None
    zp = 0 if q is None else int(q.zero_point.ravel()[0])
    how = (ctx.settings or {}).get("impl", "zero_point")
    if node.op == "SpaceToBatchND" and how not in PAD_IMPLS:
        raise UnsupportedOpError(f"{where(node)}: impl '{how}' is not one of {', '.join(PAD_IMPLS)}")
    return SpaceBatchPlan(where(node), 0 if how == "zero_code" else zp)


def _geometry(plan, x, block, pads, what: str):
    block = np.asarray(block, np.int64).ravel()
    pads = np.asarray(pads, np.int64).reshape(-1, 2)
    m = block.size
    if x.ndim < m + 1 or pads.shape[0] != m or np.any(block < 1) or np.any(pads < 0):
        raise InputError(f"{plan.where}: block shape {block.tolist()} / {what} {pads.tolist()} do not fit "
                         f"an input of shape {list(x.shape)}")
    return [int(b) for b in block], pads, m


@kernel("SpaceToBatchND", BOTH, prepare=_prepare, impls=PAD_IMPLS)
def space_to_batch_nd(plan, x, block, paddings):
    x = np.asarray(x)
    block, pads, m = _geometry(plan, x, block, paddings, "paddings")
    width = [(0, 0)] + [(int(a), int(b)) for a, b in pads] + [(0, 0)] * (x.ndim - m - 1)
    value = plan.pad_value if x.dtype.kind in "iu" else 0
    xp = np.pad(x, width, constant_values=np.asarray(value).astype(x.dtype))
    n, spatial, rest = xp.shape[0], xp.shape[1:m + 1], xp.shape[m + 1:]
    if any(s % k for s, k in zip(spatial, block)):
        raise InputError(f"{plan.where}: padded spatial shape {list(spatial)} is not a multiple of the block "
                         f"shape {block}")
    split = [n]
    for s, k in zip(spatial, block):
        split += [s // k, k]
    y = xp.reshape(split + list(rest))
    # axes: 0 = batch, 1 + 2j = outer j, 2 + 2j = block offset j
    order = [2 + 2 * j for j in range(m)] + [0] + [1 + 2 * j for j in range(m)] + \
        list(range(1 + 2 * m, y.ndim))
    y = y.transpose(order)
    return np.ascontiguousarray(y.reshape([n * int(np.prod(block))] + [s // k for s, k in zip(spatial, block)] +
                                          list(rest)))


@kernel("BatchToSpaceND", BOTH, prepare=_prepare, impls=PAD_IMPLS)  # (the shared prepare checks it)
def batch_to_space_nd(plan, x, block, crops):
    x = np.asarray(x)
    block, crops, m = _geometry(plan, x, block, crops, "crops")
    prod = int(np.prod(block))
    if x.shape[0] % prod:
        raise InputError(f"{plan.where}: batch {x.shape[0]} is not a multiple of the block size {prod}")
    n = x.shape[0] // prod
    spatial, rest = x.shape[1:m + 1], x.shape[m + 1:]
    y = x.reshape(block + [n] + list(spatial) + list(rest))
    # to [n, s1, k1, s2, k2, ..., rest]
    order = [m] + [v for j in range(m) for v in (m + 1 + j, j)] + list(range(2 * m + 1, y.ndim))
    y = y.transpose(order).reshape([n] + [s * k for s, k in zip(spatial, block)] + list(rest))
    sl = [slice(None)] + [slice(int(a), s * k - int(b)) for (a, b), s, k in zip(crops, spatial, block)]
    return np.ascontiguousarray(y[tuple(sl)])
