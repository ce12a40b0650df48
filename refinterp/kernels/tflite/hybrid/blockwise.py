"""FULLY_CONNECTED with a blockwise-quantized int4 filter (LiteRT's ``BlockwiseQuantization``: one
float16 scale per block of ``block_size`` input channels, in a separate tensor; the loader passes it
as the node's fourth input and the block size as ``blockwise``).

LiteRT 2.3's optimized resolver (``fully_connected.cc EvalBlockwise4Bit``), per input row ``m``::

    q, s, z = asymmetric per-row quantization of x[m]   (always, whatever asymmetric_quantize_inputs)
    for each block b, in order:
        acc  = sum_k q[k] * w[o, k]            exact (|acc| <= 128 * 8 * block)
        y    = f32(y + f32(f32(acc) * sc[o, b]))          sc = float16 scale as float32
        kf   = f32(kf + f32(sc[o, b] * sum_k w[o, k]))
    y = f32(y - f32(z * kf)) ; y = f32(y * s) ; y = f32(y + bias[o])

The fused activation is not applied on this path (LiteRT ignores it; so does refinterp).  LiteRT
2.3's reference resolver and tflite-runtime 2.14's optimized one on aarch64 have no blockwise path
(they run the per-tensor hybrid kernel with no filter scale and output zeros) and XNNPACK's qb4w GEMM
is not modelled: all are refused when the session is built (the ``tflite_hybrid_ref`` variant
refuses).  The float variant dequantizes the filter (``dequantize``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError, UnsupportedOpError
from .common import F32, float_bias
from .quantize import quantize_rows


@dataclass(frozen=True)
class BlockwiseFCPlan:
    name: str
    w: np.ndarray          # int64 [O, K], values in [-8, 7]
    scales: np.ndarray     # float32 [O, K / block]
    block: int
    kf: np.ndarray         # float32 [O]: the blocks' sc * sum(w), summed in block order (filter-only)
    bias: np.ndarray | None
    keep_num_dims: bool

    def describe(self) -> dict:
        return {"filter": f"int4 blockwise, block {self.block}", "input_quantization": "asymmetric per row"}


def blockwise_filter(node, ctx) -> tuple[np.ndarray, np.ndarray, int]:
    """(int filter [O, K], float32 scales [O, K / block], block) of a blockwise FULLY_CONNECTED."""
    block = int(node.attrs["blockwise"])
    w = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    sc = ctx.inputs[3] if len(ctx.inputs) > 3 else None
    if w is None or w.const is None or sc is None or sc.const is None:
        raise ModelError(f"node '{node.name}' (FullyConnected): a blockwise filter and its scales must be constants")
    wv = np.asarray(w.const)
    scales = np.asarray(sc.const).astype(F32)  # float16 -> float32 is exact
    if wv.ndim != 2 or wv.shape[1] % block or scales.shape != (wv.shape[0], wv.shape[1] // block):
        raise ModelError(f"node '{node.name}' (FullyConnected): filter {list(wv.shape)} with block {block} "
                         f"does not match scales {list(scales.shape)}")
    return wv.astype(np.int64), scales, block


def dequantize(node, ctx) -> np.ndarray:
    """The float32 filter a blockwise FULLY_CONNECTED means: w * its block's scale."""
    w, scales, block = blockwise_filter(node, ctx)
    return (w.astype(F32) * np.repeat(scales, block, axis=1)).astype(F32)


def prepare_opt(node, ctx) -> BlockwiseFCPlan:
    w, scales, block = blockwise_filter(node, ctx)
    sums = w.reshape(w.shape[0], -1, block).sum(axis=2).astype(F32)  # [O, K / block], exact
    kf = np.zeros(w.shape[0], F32)
    for b in range(sums.shape[1]):
        kf = (kf + (scales[:, b] * sums[:, b]).astype(F32)).astype(F32)
    return BlockwiseFCPlan(node.name, w, scales, block, kf, float_bias(node, ctx, 2, w.shape[0]),
                           bool(node.attrs.get("keep_num_dims", False)))


def refuse(node, why: str):
    raise UnsupportedOpError(f"node '{node.name}' (FullyConnected): blockwise int4 filter: {why}")


def run_opt(plan: BlockwiseFCPlan, x) -> np.ndarray:
    x = np.asarray(x, F32)
    o, k = plan.w.shape
    if x.size % k:
        raise ModelError(f"node '{plan.name}' (FullyConnected): input size {x.size} not a multiple of {k}")
    rows = x.reshape(-1, k)
    q, s, z = quantize_rows(rows, True)
    q = q.astype(np.int64)
    y = np.zeros((rows.shape[0], o), F32)
    for b in range(k // plan.block):
        sl = slice(b * plan.block, (b + 1) * plan.block)
        acc = q[:, sl] @ plan.w[:, sl].T
        y = (y + (acc.astype(F32) * plan.scales[None, :, b]).astype(F32)).astype(F32)
    y = (y - (z.astype(F32)[:, None] * plan.kf[None, :]).astype(F32)).astype(F32)
    y = (y * np.asarray(s, F32)[:, None]).astype(F32)
    if plan.bias is not None:
        y = (y + plan.bias[None, :]).astype(F32)
    return y.reshape(x.shape[:-1] + (o,)) if plan.keep_num_dims else y
