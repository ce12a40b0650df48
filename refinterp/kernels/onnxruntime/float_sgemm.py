"""MLAS single-precision GEMM summation order (x86-64, AVX-512F / FMA3 SGEMM kernels), for float
nodes ONNX Runtime runs through ``MlasGemm`` (onnxruntime/core/mlas/lib/sgemm.cpp,
x86_64/FgemmKernelAvx512FCommon.h, mlasi.h).

Numeric contract for C = alpha * A (M x K) @ B (K x N), beta = 0, float32 throughout:

* the threaded driver splits the GEMM into segments: TargetThreadCount = min(floor(M*N*K / 65536)
  + 1, threads); if N > M, N is split into 16-column blocks (MlasPartitionWork: every segment gets
  floor(B/T) blocks, the first B mod T one more), else M is split the same way in rows;
* per segment (Mseg x Nseg) the K loop is blocked: StrideK = 128, StrideN = 128; if Nseg >= K,
  StrideK is halved (StrideN doubled) while StrideK/2 >= K; otherwise, unless A is transposed (its
  panel then holds StrideK columns), StrideK is doubled (StrideN halved) while StrideN > 16 and
  StrideN/2 >= Nseg;
* inside one K block every output element is one FMA chain in increasing k starting from +0:
  acc = fma(a[m,k], b[k,n], acc) (one rounding per step, vfmadd231ps);
* the first K block stores fl(acc * alpha), each later block fma(acc, alpha, C) (vfmadd213ps): with
  alpha 1, acc and fl(acc + C);
* transposing A or B (MlasSgemmTransposeA / TransposePackB into panels) moves data, not arithmetic;
* a conv bias is added afterwards with one float32 addition (MlasActivation, identity).

N == 1 (B and C column vectors, A not transposed) takes MlasSgemmKernelM1TransposeBAvx
(x86_64/SgemmKernelM1TransposeBAvx.S) on each segment, one call over the full K, no FMA: per row
of A eight lanes, lane l summing fl(a[m,k] * b[k]) for k = l, l + 8, ... in increasing k (vmulps,
vaddps; a partial last group adds +0 products), then the lanes reduced by the row's block of the
segment's rows (taken in fours from the segment's first row, then a pair, then one)::

    four:  (((l0 + l1) + l2) + l3) + (((l4 + l5) + l6) + l7)
    pair:  ((l0 + l2) + (l4 + l6)) + ((l1 + l3) + (l5 + l7))
    one:   ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7))

and C = fl(that + 0) (beta 0).  A segment with Mseg == 1 (A not transposed) takes the M1 kernel of
SgemmKernelM1Avx.S (``_m1_chunk``: no FMA, groups of four products, over the full K), or with B
transposed the one above with B's rows as the rows; a column B with A transposed is B^T A^T
through SgemmKernelM1Avx.  The M1 kernels are taken only with alpha == 1: any other alpha runs the
ordinary kernel.

A prepacked B (MlasGemmPackB: ORT's MatMul / Gemm with a constant B; ``mlas_sgemm_packed``) takes
MlasSgemmPackedOperation instead: K blocks of a fixed 256 (MLAS_SGEMM_PACKED_STRIDEK), the same FMA
chains and block sums as above, and the ordinary kernel for every shape (no M1 kernels).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

THREAD_COMPLEXITY = 64 * 1024   # MLAS_SGEMM_THREAD_COMPLEXITY
THREAD_ALIGN_N = 16             # MLAS_SGEMM_STRIDEN_THREAD_ALIGN
STRIDE = 128                    # MLAS_SGEMM_STRIDEN == MLAS_SGEMM_STRIDEK
PACKED_STRIDE_K = 256           # MLAS_SGEMM_PACKED_STRIDEK


@intrinsic
def _fma32(typingctx, a, b, c):
    """float32 a*b + c with a single rounding (llvm.fma.f32: a hardware FMA on x86-64 with FMA3)."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return sig, codegen


def _partition(index: int, count: int, total: int) -> tuple[int, int]:
    """MlasPartitionWork: (start, length) of part ``index`` of ``total`` items over ``count`` parts."""
    per, extra = divmod(total, count)
    if index < extra:
        return index * (per + 1), per + 1
    return extra * (per + 1) + (index - extra) * per, per


def segments(m: int, n: int, k: int, threads: int) -> list[tuple[int, int, int, int]]:
    """(m0, mcount, n0, ncount) of every thread segment of MlasGemm for an M x N x K product."""
    target = min(int(float(m) * float(n) * float(k) / THREAD_COMPLEXITY) + 1, max(1, threads))
    if target <= 1:
        return [(0, m, 0, n)]
    out = []
    if n > m:
        blocks = (n + THREAD_ALIGN_N - 1) // THREAD_ALIGN_N
        t = min(target, blocks)
        for i in range(t):
            s, c = _partition(i, t, blocks)
            n0 = s * THREAD_ALIGN_N
            out.append((0, m, n0, min(n - n0, c * THREAD_ALIGN_N)))
    else:
        t = min(target, m)
        for i in range(t):
            s, c = _partition(i, t, m)
            out.append((s, c, 0, n))
    return [s for s in out if s[1] > 0 and s[3] > 0]


def stride_k(n: int, k: int, trans_a: bool = False) -> int:
    """MlasSgemmOperation's K block for a segment of ``n`` columns."""
    sn, sk = STRIDE, STRIDE
    if n >= k:
        while sk // 2 >= k:
            sn, sk = sn * 2, sk // 2
    elif not trans_a:
        while sn > 16 and sn // 2 >= n:
            sn, sk = sn // 2, sk * 2
    return sk


@njit(cache=True)
def _fma_row(av, brow, tmp, nc):  # pragma: no cover - compiled
    """tmp[j] = fma(av, brow[j], tmp[j]) for j < nc: one FMA per lane.  Indexed by the loop
    variable alone (an offset index makes Numba emit negative-index wraparound, which keeps LLVM
    from vectorising)."""
    for j in range(nc):
        tmp[j] = _fma32(av, brow[j], tmp[j])


@njit(cache=True)
def _sgemm_segment(a, b, c, m0, mc, n0, nc, sk, has_c=False, alpha=1.0):  # pragma: no cover - compiled
    """c[m0:m0+mc, n0:n0+nc] = a[m0:m0+mc] @ b[:, n0:n0+nc] in the order of the module contract.
    Each lane of ``_fma_row`` is its own FMA chain in increasing k, so vectorising across columns
    does not change a bit.  ``has_c`` / ``alpha`` (Gemm, float_gemm.py): the first block stores
    fma(acc, alpha, c) when c already holds C, else acc * alpha; each later block fma(acc, alpha, c).
    With alpha 1 those are acc and fl(acc + c) exactly (the plain SGEMM)."""
    kk = a.shape[1]
    tmp = np.empty(nc, np.float32)
    al = np.float32(alpha)
    for m in range(m0, m0 + mc):
        crow = c[m, n0:n0 + nc]
        arow = a[m]
        k0 = 0
        while k0 < kk:
            k1 = min(kk, k0 + sk)
            for j in range(nc):
                tmp[j] = np.float32(0.0)
            for k in range(k0, k1):
                _fma_row(arow[k], b[k, n0:n0 + nc], tmp, nc)
            if k0 == 0 and not has_c:
                for j in range(nc):
                    crow[j] = np.float32(tmp[j] * al)
            else:
                for j in range(nc):
                    crow[j] = _fma32(tmp[j], al, crow[j])
            k0 = k1


@njit(cache=True)
def _sgemm_segment_t(at, b, c, m0, mc, n0, nc, sk, alpha=1.0, has_c=False):  # pragma: no cover - compiled
    """``_sgemm_segment`` for narrow segments (few columns, many rows), vectorised across rows
    instead: ``at`` is A transposed (K, M).  Every output is still one FMA chain per K block in
    increasing k from +0, stored as fl(acc * alpha) (fma(acc, alpha, c) when ``has_c``), later
    blocks as fma(acc, alpha, c): the same bits."""
    kk = at.shape[0]
    tmp = np.empty(mc, np.float32)
    al = np.float32(alpha)
    for j in range(n0, n0 + nc):
        k0 = 0
        while k0 < kk:
            k1 = min(kk, k0 + sk)
            for i in range(mc):
                tmp[i] = np.float32(0.0)
            for k in range(k0, k1):
                _fma_row(b[k, j], at[k, m0:m0 + mc], tmp, mc)
            if k0 == 0 and not has_c:
                for i in range(mc):
                    c[m0 + i, j] = np.float32(tmp[i] * al)
            else:
                for i in range(mc):
                    c[m0 + i, j] = _fma32(tmp[i], al, c[m0 + i, j])
            k0 = k1


@njit(cache=True)
def _m1_chunk(a, b, c, n0, nc, k0, k1, first):  # pragma: no cover - compiled
    """c[n0:n0+nc] (one row ``a`` of A) over K rows k0..k1 of ``b``, SgemmKernelM1Avx's order: no
    FMA; per group of 4 k, t = fl(fl(fl(a0 b0 + a1 b1) + a2 b2) + a3 b3) (each product rounded),
    then c = fl(t + c); a last pair and a last single likewise; c = +0 before the first group when
    ``first`` (beta 0), else the value already in c (beta 1)."""
    for j in range(n0, n0 + nc):
        acc = np.float32(0.0) if first else c[j]
        k = k0
        while k + 4 <= k1:
            t = a[k] * b[k, j]
            t = np.float32(t + a[k + 1] * b[k + 1, j])
            t = np.float32(t + a[k + 2] * b[k + 2, j])
            t = np.float32(t + a[k + 3] * b[k + 3, j])
            acc = np.float32(t + acc)
            k += 4
        if k1 - k >= 2:
            t = np.float32(a[k] * b[k, j] + a[k + 1] * b[k + 1, j])
            acc = np.float32(t + acc)
            k += 2
        if k1 - k == 1:
            acc = np.float32(a[k] * b[k, j] + acc)
        c[j] = acc


@njit(cache=True)
def _m1_transb(a, x, c, m0, mc, has_c=False):  # pragma: no cover - compiled
    """c[m0:m0+mc] = a[m0:m0+mc] @ x in SgemmKernelM1TransposeBAvx's order (module docstring); with
    ``has_c`` (beta 1) the reduced sum is added to the value in c once, fl(v + c)."""
    k = a.shape[1]
    lanes = np.empty(8, np.float32)
    end = m0 + mc
    r = m0
    while r < end:
        block = 4 if end - r >= 4 else (2 if end - r >= 2 else 1)
        for row in range(r, r + block):
            lanes[:] = np.float32(0.0)
            for kk in range(k):
                lanes[kk % 8] = np.float32(lanes[kk % 8] + np.float32(x[kk] * a[row, kk]))
            l0, l1, l2, l3, l4, l5, l6, l7 = lanes[0], lanes[1], lanes[2], lanes[3], lanes[4], lanes[5], lanes[6], lanes[7]
            if block == 4:
                v = np.float32(np.float32(np.float32(np.float32(l0 + l1) + l2) + l3)
                               + np.float32(np.float32(np.float32(l4 + l5) + l6) + l7))
            elif block == 2:
                v = np.float32(np.float32(np.float32(l0 + l2) + np.float32(l4 + l6))
                               + np.float32(np.float32(l1 + l3) + np.float32(l5 + l7)))
            else:
                v = np.float32(np.float32(np.float32(l0 + l1) + np.float32(l2 + l3))
                               + np.float32(np.float32(l4 + l5) + np.float32(l6 + l7)))
            c[row] = np.float32(v + (c[row] if has_c else np.float32(0.0)))
        r += block


def mlas_sgemm(a: np.ndarray, b: np.ndarray, threads: int, alpha: float = 1.0,
               trans_a: bool = False, trans_b: bool = False, c: np.ndarray | None = None,
               column_ok: bool = True) -> np.ndarray | None:
    """float32 alpha * (M, K) @ (K, N) in MLAS's order (None for K == 0).  ``a`` / ``b`` are the
    logical operands; ``trans_a`` / ``trans_b``: MLAS was handed them transposed (FusedMatMul), which
    changes the K blocking (trans_a) and which M1 kernel a unit alpha selects, not the arithmetic.
    ``c`` (contiguous float32 (M, N)): beta 1, the product is added onto c in place -- every K block
    fma(acc, alpha, c), the M1 kernels add their reduced sum once -- and c is returned.
    ``column_ok``: C's leading dimension is 1, which MLAS's column (N == 1) path also requires."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    m, k = a.shape
    n = b.shape[1]
    segs = segments(m, n, k, threads)
    unit = np.float32(alpha) == np.float32(1.0)
    has_c = c is not None
    if k == 0:
        return c
    if not has_c:
        c = np.empty((m, n), np.float32)
    at = bt = None
    for m0, mc, n0, nc in segs:
        if unit and mc == 1 and not trans_a:  # a one-row segment: the M1 kernel for B's layout
            if trans_b:
                if bt is None:
                    bt = np.ascontiguousarray(b.T)
                _m1_transb(bt, a[m0].copy(), c[m0], n0, nc, has_c)
            else:
                _m1_chunk(a[m0], b, c[m0], n0, nc, 0, k, not has_c)
        elif unit and n == 1 and column_ok and (not trans_b or k == 1):  # B, C columns: B^T A^T, M1 kernels
            if trans_a:
                if at is None:
                    at = np.ascontiguousarray(a.T)
                _m1_chunk(b[:, 0].copy(), at, c[:, 0], m0, mc, 0, k, not has_c)
            else:
                _m1_transb(a, b[:, 0].copy(), c[:, 0], m0, mc, has_c)
        elif nc < 64 <= mc:  # few columns: vectorise across rows (fma(b, a, acc) == fma(a, b, acc))
            if at is None:
                at = np.ascontiguousarray(a.T)
            _sgemm_segment_t(at, b, c, m0, mc, n0, nc, stride_k(nc, k, trans_a), alpha, has_c)
        else:
            _sgemm_segment(a, b, c, m0, mc, n0, nc, stride_k(nc, k, trans_a), has_c, alpha)
    return c


def mlas_sgemm_packed(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, c: np.ndarray | None = None) -> np.ndarray:
    """float32 alpha * (M, K) @ (K, N) in the order of MLAS's packed-B SGEMM (module docstring); the
    thread split does not change a bit (no K split, no M1 kernels).  ``c``: beta 1 as in
    ``mlas_sgemm`` (added onto in place, returned)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    m, k = a.shape
    n = b.shape[1]
    has_c = c is not None
    if not has_c:
        c = np.empty((m, n), np.float32)
    if k == 0:
        if not has_c:
            c[:] = 0
    elif n < 64 <= m:
        _sgemm_segment_t(np.ascontiguousarray(a.T), b, c, 0, m, 0, n, PACKED_STRIDE_K, alpha, has_c)
    else:
        _sgemm_segment(a, b, c, 0, m, 0, n, PACKED_STRIDE_K, has_c, alpha)
    return c
