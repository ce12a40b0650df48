"""MLAS's CompInt8 MatMulNBits reduction (A quantized to int8 per block), block length 32, x86-64
AVX-512 VNNI, for 8-bit and 4-bit weights alike (onnxruntime/core/mlas/lib/
sqnbitgemm_kernel_avx512_int8_blklen32.h ``Q8Int8Gemm*BlkLen32Avx512<vnni>`` and
``Q4Int8Gemm*BlkLen32Avx512<vnni>``: the 4-bit kernels unpack the nibbles to the same byte order and
share the lane structure; sqnbitgemm_kernel_avx512vnni.cpp ``SQ{4,8}BitGemmKernel_BlkSum_CompInt8``).

Numeric contract for one output y[m, n] (q: A's int8 codes, bu: B's unsigned codes, K padded with
zeros to nb blocks of 32; s_b = f32(sa[m, b] * sb[b, n]); every integer partial below is exact and
< 2^24, so its float32 conversion is exact)::

    16 float32 lanes L, zero; for each group of 4 blocks (b0..b3 = 4g..4g+3), in order:
        each block's 32 products form 4 partials of 8 products, by position in the block:
            Q0 = [0:4] + [8:12],  Q1 = [4:8] + [12:16],  Q2 = [16:20] + [24:28],  Q3 = [20:24] + [28:32]
        lanes (Q0, Q1, Q2, Q3): block b0 -> (0, 1, 4, 5), b1 -> (8, 9, 12, 13), b2 -> (2, 3, 6, 7),
        b3 -> (10, 11, 14, 15);   L[l] = fma(Q, s_b, L[l])
    8 lanes H[i] = L[i] + L[i + 8]
    each remaining block (nb mod 4) b:  H[i] = fma(sum of products [4i:4i+4], s_b, H[i])
    main = (((H0 + H1) + H2) + H3) + (((H4 + H5) + H6) + H7)      columns in groups of 4 (FoldAccumulators)
         = ((H0 + H4) + (H2 + H6)) + ((H1 + H5) + (H3 + H7))      the last N mod 4 columns (hsum_float_8)
    main = f32(main + bias[n])                                    with a bias
    zero-point block sums (an SGEMM over the nb blocks, GemmFloatKernel, alpha 1, added to C):
        c = 0; c = fma(asum[m, b], nzs[b, n], c) for b in order;   y = f32(main + c)

asum[m, b] = f32(sa * sum(q over the block)), nzs[b, n] = f32(-sb[b, n] * zp[b, n]) (unsigned zero
point).

Block lengths 128 and 256 (``*BlkLen128Avx512``, which also serves 256 in sub-blocks of 128): one
FMA per 128-element sub-block into 16 lanes, lane l holding the products at [4l:4l+4] and
[64+4l:64+4l+4] of the sub-block; the lanes are then reduced by the kernel's own rule: two-row
kernels with 4 columns by ``_mm512_reduce_add_ps``, one-column kernels by ``hsum_float_16`` (the
same halving order)::

    b_i = L[i] + L[i+8];  c_i = b_i + b_{i+4};  main = (c0 + c2) + (c1 + c3)

and the one-row kernel with 4 columns (the last row when M is odd: ORT's 128-row tiles are even) by
the 512-bit ``FoldAccumulators``::

    s_h = ((L[4h] + L[4h+1]) + L[4h+2]) + L[4h+3];  main = (s0 + s2) + (s1 + s3)

then the bias and the block-sum SGEMM as above.

Block length 64 (``*BlkLen64Avx512``): blocks in pairs (b, b+1), one FMA each into 16 lanes, lane
4c + j holding block b + (j mod 2) at [16c + o : 16c + o + 4] and [16c + o + 8 : 16c + o + 12],
o = 0 for j < 2 else 4; an odd last block: lane l = [4l : 4l + 4] of it.  One-column kernels reduce
with ``hsum_float_16`` (the halving order above), four-column kernels with the 512-bit
``FoldAccumulators`` -- except the 4-bit two-row kernel, which uses ``_mm512_reduce_add_ps`` (the
halving order) -- so with 4-bit weights every row but an odd M's last reduces by halving.  The
thread tiles (16-aligned N ranges, 128-row M ranges) and 128-column chunks start on multiples of 4
columns, so only the last N mod 4 columns take the one-column kernels; the one- and two-row kernels
compute alike.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .float_sgemm import _fma32

F32 = np.float32
_BLOCK = 32
# lane of partial Q_j of the t-th block of a group of four
_LANES = np.array([[0, 1, 4, 5], [8, 9, 12, 13], [2, 3, 6, 7], [10, 11, 14, 15]], np.int64)
_QSTART = np.array([0, 4, 16, 20], np.int64)  # Q_j sums [s, s+4) and [s+8, s+12)


@njit(cache=True, inline="always")
def _halve16(lane):  # pragma: no cover - compiled
    """_mm512_reduce_add_ps / hsum_float_16: (i, i+8), then (i, i+4), then ((0+2) + (1+3))."""
    c0 = np.float32(np.float32(lane[0] + lane[8]) + np.float32(lane[4] + lane[12]))
    c1 = np.float32(np.float32(lane[1] + lane[9]) + np.float32(lane[5] + lane[13]))
    c2 = np.float32(np.float32(lane[2] + lane[10]) + np.float32(lane[6] + lane[14]))
    c3 = np.float32(np.float32(lane[3] + lane[11]) + np.float32(lane[7] + lane[15]))
    return np.float32(np.float32(c0 + c2) + np.float32(c1 + c3))


@njit(cache=True, inline="always")
def _fold16(lane):  # pragma: no cover - compiled
    """The 512-bit FoldAccumulators for one column: each 128-bit quarter left to right, then
    (q0 + q2) + (q1 + q3)."""
    s0 = np.float32(np.float32(np.float32(lane[0] + lane[1]) + lane[2]) + lane[3])
    s1 = np.float32(np.float32(np.float32(lane[4] + lane[5]) + lane[6]) + lane[7])
    s2 = np.float32(np.float32(np.float32(lane[8] + lane[9]) + lane[10]) + lane[11])
    s3 = np.float32(np.float32(np.float32(lane[12] + lane[13]) + lane[14]) + lane[15])
    return np.float32(np.float32(s0 + s2) + np.float32(s1 + s3))


@njit(cache=True, inline="always")
def _finish(main, bias, asum, nzs, m, n):  # pragma: no cover - compiled
    """The bias, then the zero-point block-sum SGEMM's FMA chain added with one rounding."""
    if bias.shape[0]:
        main = np.float32(main + bias[n])
    corr = np.float32(0)
    for b in range(asum.shape[1]):
        corr = _fma32(asum[m, b], nzs[b, n], corr)
    return np.float32(main + corr)


@njit(cache=True, parallel=True)
def _reduce(q, bt, sa, sb, asum, nzs, bias, lanes, qstart):  # pragma: no cover - compiled
    m_count, n_count = q.shape[0], bt.shape[0]
    nb = sa.shape[1]
    groups = nb // 4
    c1_from = n_count - n_count % 4
    out = np.empty((m_count, n_count), np.float32)
    for n in prange(n_count):  # columns are independent: one thread's lanes each
        lane16 = np.zeros(16, np.float32)
        h = np.zeros(8, np.float32)
        for m in range(m_count):
            lane16[:] = 0
            for g in range(groups):
                for t in range(4):
                    b = 4 * g + t
                    base = b * 32
                    s = np.float32(sa[m, b] * sb[b, n])
                    for j in range(4):
                        p = 0
                        st = base + qstart[j]
                        for u in range(4):
                            p += q[m, st + u] * bt[n, st + u] + q[m, st + 8 + u] * bt[n, st + 8 + u]
                        ln = lanes[t, j]
                        lane16[ln] = _fma32(np.float32(p), s, lane16[ln])
            for i in range(8):
                h[i] = np.float32(lane16[i] + lane16[i + 8])
            for b in range(4 * groups, nb):
                s = np.float32(sa[m, b] * sb[b, n])
                for i in range(8):
                    p = 0
                    st = b * 32 + 4 * i
                    for u in range(4):
                        p += q[m, st + u] * bt[n, st + u]
                    h[i] = _fma32(np.float32(p), s, h[i])
            if n < c1_from:
                lo = np.float32(np.float32(np.float32(h[0] + h[1]) + h[2]) + h[3])
                hi = np.float32(np.float32(np.float32(h[4] + h[5]) + h[6]) + h[7])
                main = np.float32(lo + hi)
            else:
                a = np.float32(np.float32(h[0] + h[4]) + np.float32(h[2] + h[6]))
                c = np.float32(np.float32(h[1] + h[5]) + np.float32(h[3] + h[7]))
                main = np.float32(a + c)
            out[m, n] = _finish(main, bias, asum, nzs, m, n)
    return out


@njit(cache=True, parallel=True)
def _reduce128(q, bt, sa, sb, asum, nzs, bias, blk):  # pragma: no cover - compiled
    m_count, n_count = q.shape[0], bt.shape[0]
    nb = sa.shape[1]
    c1_from = n_count - n_count % 4
    r1_row = m_count - 1 if m_count % 2 else -1
    out = np.empty((m_count, n_count), np.float32)
    for n in prange(n_count):  # columns are independent: one thread's lanes each
        lane = np.zeros(16, np.float32)
        for m in range(m_count):
            lane[:] = 0
            for b in range(nb):
                s = np.float32(sa[m, b] * sb[b, n])
                for sub in range(blk // 128):
                    base = b * blk + sub * 128
                    for ln in range(16):
                        p = 0
                        st = base + 4 * ln
                        for u in range(4):
                            p += q[m, st + u] * bt[n, st + u] + q[m, st + 64 + u] * bt[n, st + 64 + u]
                        lane[ln] = _fma32(np.float32(p), s, lane[ln])
            if n < c1_from and m == r1_row:  # FoldAccumulators (512-bit)
                main = _fold16(lane)
            else:  # _mm512_reduce_add_ps / hsum_float_16
                main = _halve16(lane)
            out[m, n] = _finish(main, bias, asum, nzs, m, n)
    return out


@njit(cache=True, parallel=True)
def _reduce64(q, bt, sa, sb, asum, nzs, bias, bits):  # pragma: no cover - compiled
    m_count, n_count = q.shape[0], bt.shape[0]
    nb = sa.shape[1]
    c1_from = n_count - n_count % 4
    r1_row = m_count - 1 if m_count % 2 else -1
    out = np.empty((m_count, n_count), np.float32)
    for n in prange(n_count):  # columns are independent: one thread's lanes each
        lane = np.zeros(16, np.float32)
        for m in range(m_count):
            lane[:] = 0
            b = 0
            while b + 1 < nb:
                for ln in range(16):
                    c, j = ln // 4, ln % 4
                    blk = b + (j & 1)
                    s = np.float32(sa[m, blk] * sb[blk, n])
                    st = blk * 64 + 16 * c + (0 if j < 2 else 4)
                    p = 0
                    for u in range(4):
                        p += q[m, st + u] * bt[n, st + u] + q[m, st + 8 + u] * bt[n, st + 8 + u]
                    lane[ln] = _fma32(np.float32(p), s, lane[ln])
                b += 2
            if b < nb:
                s = np.float32(sa[m, b] * sb[b, n])
                for ln in range(16):
                    st = b * 64 + 4 * ln
                    p = 0
                    for u in range(4):
                        p += q[m, st + u] * bt[n, st + u]
                    lane[ln] = _fma32(np.float32(p), s, lane[ln])
            if n < c1_from and (bits == 8 or m == r1_row):  # FoldAccumulators (512-bit)
                main = _fold16(lane)
            else:  # hsum_float_16 / _mm512_reduce_add_ps
                main = _halve16(lane)
            out[m, n] = _finish(main, bias, asum, nzs, m, n)
    return out


def compint8_matmul(q: np.ndarray, bt: np.ndarray, sa: np.ndarray, sb: np.ndarray, nzs: np.ndarray,
                    bias: np.ndarray | None = None, bits: int = 8) -> np.ndarray:
    """y (M, N) float32 from q (M, nb, block) int codes (block 32, 64, 128 or 256), bt (N, nb * block)
    int32 unsigned weight codes (a plan's prepared copy, contiguous along K), sa (M, nb), sb and nzs
    ((nb, N) per block, or (N,) for every block) float32 and an optional bias (N,), in MLAS's order (module docstring); ``bits`` (4 or 8) picks the kernel's
    lane reduction where the 4- and 8-bit kernels differ (block 64)."""
    m_count, nb, blk = q.shape
    n_count = bt.shape[0]
    qq = np.ascontiguousarray(q.reshape(m_count, nb * blk), np.int32)
    asum = (sa * q.sum(axis=2).astype(F32)).astype(F32)  # f32(sa * sum(q)): |sum| <= 127 * 256, exact
    per_block = lambda v: np.ascontiguousarray(np.broadcast_to(np.asarray(v, F32), (nb, n_count)))  # noqa: E731
    b = np.zeros(0, F32) if bias is None else np.ascontiguousarray(np.asarray(bias, F32).reshape(n_count))
    args = (qq, np.ascontiguousarray(bt, np.int32), np.ascontiguousarray(sa, F32), per_block(sb), asum,
            per_block(nzs), b)
    if blk == _BLOCK:
        return _reduce(*args, _LANES, _QSTART)
    if blk == 64:
        return _reduce64(*args, bits)
    if blk in (128, 256):
        return _reduce128(*args, blk)
    raise ValueError(f"block length {blk}: MLAS's CompInt8 order is reproduced for 32, 64, 128 and 256")
