"""ONNX Runtime's NCHWc float convolution (com.microsoft.nchwc.Conv, x86-64 MLAS ``MlasNchwcConv``).

At ORT_ENABLE_ALL the NchwcTransformer rewrites a float 2-D Conv with constant weights into an NCHWc
Conv (passes/ort_nchwc.py decides which).  Its summation order (onnxruntime/core/mlas/lib/snchwc.cpp
and x86_64/SconvKernelCommon.h, SconvKernelAvx512F.S) differs from the ordinary Conv's GEMM order.
With ``cg`` input and ``og`` output channels per group, MlasNchwcConv picks

* ``cg >= block``, 1x1 kernel, no padding: the pointwise algorithm, segments of 128 input channels;
* ``cg >= block`` otherwise: the NCHWc algorithm, segments of ``block`` input channels (a count that
  is not a multiple of the block is padded with zero channels: exact no-ops);
* ``cg == og == 1`` (depthwise): one segment, the channel itself;
* otherwise (fewer than ``block`` input channels, the input stays NCHW): segments of one channel.

Each output element is then, for its segments s_0, s_1, ... in channel order::

    acc_s = 0;  for kh, for kw (valid taps only), for c in s:  acc_s = fma(x, w, acc_s)
    out   = acc_s0  (or fl(acc_s0 + sum) when an Add was fused into the Conv: "Conv/Sum fusion")
    out   = fl(acc_sk + out)  for each later segment
    out   = fl(out + bias);  then the fused activation (Relu: max(out, 0); others as their own op)

Every FMA rounds once (vfmadd231ps), every addition once (vaddps); taps in the padding are skipped
(the zero-padded input used here adds fma(0, w, acc) == acc exactly: acc never becomes -0).  The
work split over threads (rows, filter sets) does not change any element's order.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .float_sgemm import _fma32

POINTWISE_BATCH = 128  # MaximumInputChannelBatch of MLAS_NCHWC_CONV_POINTWISE_ALGORITHM


def segment_size(cg: int, og: int, kernel: tuple[int, int], padded: bool, block: int) -> int:
    """Input channels per partial sum of MlasNchwcConv's algorithm for these per-group counts."""
    if cg >= block:
        return POINTWISE_BATCH if kernel == (1, 1) and not padded else block
    return 1  # depthwise (cg == og == 1) and the NCHW-input algorithm both take one channel at a time


OUT_BLOCK = 8   # output channels computed together (each keeps its own FMA chains)
TILE = 64       # output columns per tile


@njit(cache=True, parallel=True)
def _conv_image(xp, w, out, has_init, group, seg, sh, sw, dh, dw):  # pragma: no cover - compiled
    """out[oc] (OH, OW) for one zero-padded image ``xp`` (C, Hp, Wp) in the module's order;
    ``has_init``: out already holds the fused Sum tensor.  Output channels of one group are taken
    OUT_BLOCK at a time and output rows in tiles of TILE columns, so the input row is read once for
    the block; every output element's chain (segments, taps, channels) is the module's order."""
    o_total, cg, kh_n, kw_n = w.shape
    og = o_total // group
    oh_n, ow_n = out.shape[1], out.shape[2]
    blocks_per_group = (og + OUT_BLOCK - 1) // OUT_BLOCK
    for b in prange(group * blocks_per_group):
        g = b // blocks_per_group
        o0 = g * og + (b % blocks_per_group) * OUT_BLOCK
        nob = min(OUT_BLOCK, g * og + og - o0)
        acc = np.empty((OUT_BLOCK, TILE), np.float32)
        xbuf = np.empty(TILE, np.float32)
        for i in range(oh_n):
            for j0 in range(0, ow_n, TILE):
                tw = min(TILE, ow_n - j0)
                first = True
                for s0 in range(0, cg, seg):
                    s1 = min(cg, s0 + seg)
                    acc[:, :] = np.float32(0.0)
                    for kh in range(kh_n):
                        for kw in range(kw_n):
                            for c in range(s0, s1):
                                base = j0 * sw + kw * dw
                                row = xp[g * cg + c, i * sh + kh * dh]
                                for t in range(tw):  # a contiguous copy: the FMA loop below vectorises
                                    xbuf[t] = row[base + t * sw]
                                for ol in range(nob):
                                    wv = w[o0 + ol, c, kh, kw]
                                    arow = acc[ol]
                                    for t in range(tw):
                                        arow[t] = _fma32(xbuf[t], wv, arow[t])
                    for ol in range(nob):
                        orow = out[o0 + ol, i]
                        if first and not has_init:
                            for t in range(tw):
                                orow[j0 + t] = acc[ol, t]
                        else:
                            for t in range(tw):
                                orow[j0 + t] = np.float32(acc[ol, t] + orow[j0 + t])
                    first = False


def nchwc_conv(x: np.ndarray, w: np.ndarray, b, s, group: int, strides, dilations, pad_begin, pad_end,
               out_hw, block: int) -> np.ndarray:
    """(N, O, OH, OW) float32 result of the NCHWc Conv on NCHW float32 ``x`` (N, C, H, W)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // group
    padded = any(pad_begin) or any(pad_end)
    seg = segment_size(cg, og, (kh, kw), padded, block)
    oh, ow = out_hw
    w32 = np.ascontiguousarray(w, np.float32)
    result = np.empty((n, o, oh, ow), np.float32)
    for i in range(n):
        xp = np.zeros((c, h + pad_begin[0] + pad_end[0], wd + pad_begin[1] + pad_end[1]), np.float32)
        xp[:, pad_begin[0]:pad_begin[0] + h, pad_begin[1]:pad_begin[1] + wd] = x[i]
        out = np.array(s[i], np.float32) if s is not None else np.zeros((o, oh, ow), np.float32)
        if cg == 0 or o == 0:  # no input channels: the Sum (or zeros), then the bias
            result[i] = out
            continue
        _conv_image(xp, w32, out, s is not None, group, seg, strides[0], strides[1], dilations[0], dilations[1])
        result[i] = out
    if b is not None:
        result = (result + np.asarray(b, np.float32).reshape(1, -1, 1, 1)).astype(np.float32)
    return result
