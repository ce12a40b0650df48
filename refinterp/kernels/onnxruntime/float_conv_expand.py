"""MLAS's expand-then-GEMM float convolution order (onnxruntime/core/mlas/lib/convolve.cpp,
MlasConvPrepare / MlasConv / MlasConvOperation), x86-64, batch 1, NCHW, any group count.

The input is expanded to columns (im2col: K = C_in * prod(kernel) rows in (channel, kernel
position row-major) order, one column per output position, padding as zeros), then

* ``FilterCount > OutputSize`` (ExpandThenGemm): the threaded ``MlasGemm`` of W (C_out x K) by the
  columns: ``float_sgemm.mlas_sgemm``;
* otherwise (ExpandThenGemmSegmented): T = min(floor(C_out * OutputSize * K / 65536) + 1, 16,
  threads) threads; StrideN = ceil(OutputSize / T), rounded up to a multiple of 16 when T > 1 (then
  T = 1 when StrideN >= OutputSize).  The output positions are cut into segments of StrideN
  (one segment when StrideN >= OutputSize); in each, K is processed in chunks of
  ``float_sgemm.stride_k(segment width, K)``: every output element is one FMA chain per chunk in
  increasing k from +0, later chunks added with one float32 rounding (MlasSgemmOperation with
  beta 0, then 1).  The bias is added afterwards with one float32 addition.

With several groups (depthwise included) each group is its own convolution of C_in / G channels
and C_out / G filters, run whole (one segment of every output position; MLAS threads over groups).

One filter per convolution or group (C_out / G == 1, e.g. depthwise) takes MlasSgemmKernelM1Avx
(SgemmKernelM1Avx.S): no FMA; per K chunk, rows in groups of 4, then 2, then 1::

    t = fl(fl(fl(w0 x0 + w1 x1) + w2 x2) + w3 x3)   (each product rounded, vmulps / vaddps)
    c = fl(t + c)                                   (c = +0 before the first group of the first chunk)

``expand_then_gemm`` returns None where MLAS takes a path not modelled (the threaded MlasGemm's M1
segments of the ExpandThenGemm form).
"""
from __future__ import annotations

import numpy as np

from ..spatial import Window, im2col
from .float_sgemm import THREAD_ALIGN_N, THREAD_COMPLEXITY, _m1_chunk, _sgemm_segment, _sgemm_segment_t, mlas_sgemm, stride_k

MAX_THREADS = 16  # MLAS_MAXIMUM_THREAD_COUNT


def _segment(w: np.ndarray, cols: np.ndarray, c: np.ndarray, n0: int, nc: int, at, has_c: bool = False) -> None:
    """One MlasConvOperation segment: output positions n0..n0+nc over every filter of ``w``; ``has_c``:
    Beta 1 (a FusedConv's Sum already in ``c``), so the first K chunk adds onto it too."""
    m, k = w.shape
    sk = stride_k(nc, k)
    if m == 1:
        for k0 in range(0, k, sk):
            _m1_chunk(w[0], cols, c[0], n0, nc, k0, min(k, k0 + sk), k0 == 0 and not has_c)
    elif nc < 64 <= m:
        _sgemm_segment_t(at(), cols, c, 0, m, n0, nc, sk, 1.0, has_c)
    else:
        _sgemm_segment(w, cols, c, 0, m, n0, nc, sk, has_c)


def _thread_stride(m: int, n: int, k: int, threads: int) -> int:
    """MlasConvPrepare's ThreadStrideN (ExpandThenGemmSegmented, batch 1, one group)."""
    complexity = float(m) * float(n) * float(k)
    target = int(complexity / THREAD_COMPLEXITY) + 1 if complexity < THREAD_COMPLEXITY * MAX_THREADS else MAX_THREADS
    target = min(target, max(1, threads))
    step = -(-n // target)
    if target > 1:
        step = (step + THREAD_ALIGN_N - 1) // THREAD_ALIGN_N * THREAD_ALIGN_N
    return step


def _one_group(wm: np.ndarray, cols: np.ndarray, threads: int, grouped: bool,
               c0: np.ndarray | None = None) -> np.ndarray | None:
    m, k = wm.shape
    n = cols.shape[1]
    if m > n:  # ExpandThenGemm: the threaded MlasGemm
        return mlas_sgemm(wm, cols, threads, c=None if c0 is None else np.array(c0, np.float32))
    step = n if grouped else min(n, _thread_stride(m, n, k, threads))  # groups: one whole segment each
    c = np.empty((m, n), np.float32) if c0 is None else np.array(c0, np.float32)
    cache: list = []

    def at():
        if not cache:
            cache.append(np.ascontiguousarray(wm.T))
        return cache[0]

    for n0 in range(0, n, step):
        _segment(wm, cols, c, n0, min(step, n - n0), at, c0 is not None)
    return c


def expand_then_gemm(x: np.ndarray, w: np.ndarray, win: Window, threads: int, group: int = 1,
                     c0: np.ndarray | None = None) -> np.ndarray | None:
    """(C_out, prod(out)) float32 without the bias, or None where MLAS takes a path not modelled.
    x: (C_in, *spatial) float32; w: (C_out, C_in / group, *kernel); ``c0`` (C_out, prod(out)): a
    FusedConv's Sum, which MLAS's Beta 1 accumulates the products onto."""
    cout, cin_g = w.shape[0], w.shape[1]
    if cout % group or x.shape[0] != cin_g * group:
        return None
    mg = cout // group
    x = np.asarray(x, np.float32)
    wf = np.asarray(w, np.float32).reshape(cout, -1)
    out = []
    for g in range(group):
        cols = im2col(x[g * cin_g:(g + 1) * cin_g], win)
        if cols.shape[1] == 0 or wf.shape[1] == 0:
            return None
        y = _one_group(np.ascontiguousarray(wf[g * mg:(g + 1) * mg]), cols, threads, group > 1,
                       None if c0 is None else c0[g * mg:(g + 1) * mg])
        if y is None:
            return None
        out.append(y)
    return out[0] if group == 1 else np.concatenate(out, axis=0)
