"""Fast ONNX Runtime (MLAS) integer Conv / DepthwiseConv for an ``ort_gemm.QGemmPlan``, bit-exact.

``fast_ort_conv(plan, x)`` returns the same array as ``ort_gemm.ort_conv`` / ``ort_depthwise``
(NumPy path) or None when the case is not covered (then the NumPy path runs).  Covered: 2-D NCHW,
OIHW constant 8-bit filter, 8-bit input, integer output, ``impl`` ``mlas_f32``; group 1 or one
input channel per group (depthwise, channel multiplier 1).

Exactness contract:

* group 1: ``acc = sum (x - zx) * (w - zw[m])`` is float32 BLAS GEMMs over K-chunks short enough
  that every partial sum stays below 2^24 (fast/qconv_fast.py ``_chunks``: chunk length
  ``floor((2^24 - 1) / (max|x - zx| * max|w - zw|))`` over the whole input dtype range), so any
  BLAS summation order is exact; the chunk sums are added in float64 (exact integers below 2^53).
  Padded cells hold 0 (= the input zero point before subtraction, as QLinearConv pads).  The
  output columns are processed in tiles so a tile's accumulators stay in cache until requantized.
* depthwise: float32 multiply-adds on a zero-padded (x - zx) plane, exact because every partial
  sum is an integer below kh*kw*max|x - zx|*max|w - zw| < 2^24 (else not covered); 3x3 without
  dilation sums its 9 taps and requantizes in one pass.
* then fast/ort_requant.py: ``MlasRequantizeOutput`` on the exact sum + bias.
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ...settings import kernel_threads
from . import numba_threads
from .._spatial import ints, resolve_window
from .ort_requant import requant_chunks, requant_consts, rq1
from .qconv_fast import _chunks

_CACHE: dict[tuple, tuple] = {}  # (id(plan), x dtype, x shape) -> (plan, prep); the plan is kept alive
_INT8 = ("int8", "uint8")
_TILE = 1 << 17  # float32 elements per tile buffer (512 KB)
_SCRATCH = threading.local()  # per-thread float32 work buffers, reused across calls (grown on demand)


def _scratch(slot: int, n: int) -> np.ndarray:
    """A float32 buffer of ``n`` elements; slot 0 / 1 are distinct buffers (im2col / accumulators).
    Its contents are garbage: every caller overwrites all ``n`` elements before reading them."""
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = [np.empty(0, np.float32), np.empty(0, np.float32)]
    if bufs[slot].size < n:
        bufs[slot] = np.empty(n, np.float32)
    return bufs[slot][:n]


@numba.njit(cache=True)
def _im2col(x, zx, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, cols):  # pragma: no cover - compiled
    """cols[(c*kh + ky)*kw + kx, oy*ow + ox] = x[c, iy, ix] - zx, 0 outside the input (x: (C, H, W))."""
    c_n, h, wd = x.shape
    for kx in range(kw):
        off = kx * dw - pl
        # output columns whose input column ox*sw + off lies in [0, wd): [ox0, ox1)
        ox0 = 0 if off >= 0 else min(ow, (-off + sw - 1) // sw)
        ox1 = min(ow, (wd - 1 - off) // sw + 1) if wd - 1 - off >= 0 else 0
        ox1 = max(ox1, ox0)
        for c in range(c_n):
            for ky in range(kh):
                row = cols[(c * kh + ky) * kw + kx]
                for oy in range(oh):
                    iy = oy * sh + ky * dh - pt
                    dst = row[oy * ow:(oy + 1) * ow]
                    if iy < 0 or iy >= h:
                        dst[:] = 0.0
                        continue
                    xr = x[c, iy]
                    for ox in range(ox0):
                        dst[ox] = 0.0
                    for ox in range(ox0, ox1):
                        dst[ox] = np.float32(np.int32(xr[ox * sw + off]) - zx)
                    for ox in range(ox1, ow):
                        dst[ox] = 0.0


@numba.njit(cache=True)
def _minus_zp_cols(x2, zx, p0, out):  # pragma: no cover - compiled
    """out[k, j] = x2[k, p0 + j] - zx as float32 (exact: |x - zx| <= 255)."""
    k_n, w = out.shape
    for k in range(k_n):
        src = x2[k, p0:p0 + w]
        dst = out[k]
        for j in range(w):
            dst[j] = np.float32(np.int32(src[j]) - zx)


@numba.njit(cache=True)
def _axpy(acc, a0, src, s0, wv, n):  # pragma: no cover - compiled
    """acc[a0 + i] += src[s0 + i] * wv for i < n (a plain loop LLVM vectorizes)."""
    a = acc[a0:a0 + n]
    s = src[s0:s0 + n]
    for i in range(n):
        a[i] += s[i] * wv


@numba.njit(cache=True)
def _axpy_rows(acc, apitch, src, s0, spitch, rows, n, wv):  # pragma: no cover - compiled
    """acc[r*apitch + i] += src[s0 + r*spitch + i] * wv for r < rows, i < n."""
    for r in range(rows):
        a = acc[r * apitch:r * apitch + n]
        s = src[s0 + r * spitch:s0 + r * spitch + n]
        for i in range(n):
            a[i] += s[i] * wv


@numba.njit(cache=True)
def _dw3x3_q(xp, s0, wp, n, wc, bb, m, zy, flo, fhi, q):  # pragma: no cover - compiled
    """q[i] = requant(sum of the 9 taps at xp[s0 + ky*wp + kx + i]) for i < n, one pass (3x3,
    dilation 1); the tap sums are exact (integers below 2^24) in any order."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
    # three row views (few distinct pointers: LLVM's runtime alias checks stay within its limit)
    ra, rb, rc = xp[s0:s0 + n + 2], xp[s0 + wp:s0 + wp + n + 2], xp[s0 + 2 * wp:s0 + 2 * wp + n + 2]
    for i in range(n):
        a = (ra[i] * w0 + ra[i + 1] * w1 + ra[i + 2] * w2) + (rb[i] * w3 + rb[i + 1] * w4 + rb[i + 2] * w5) \
            + (rc[i] * w6 + rc[i + 1] * w7 + rc[i + 2] * w8)
        q[i] = rq1(np.float64(a) + bb, m, zy, flo, fhi)


@numba.njit(cache=True)
def _dw3x3_f(xp, s0, wp, n, wc, f):  # pragma: no cover - compiled
    """f[i] = sum of the 9 taps at xp[s0 + ky*wp + kx + i] for i < n (exact, as above)."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
    # three row views (few distinct pointers: LLVM's runtime alias checks stay within its limit)
    ra, rb, rc = xp[s0:s0 + n + 2], xp[s0 + wp:s0 + wp + n + 2], xp[s0 + 2 * wp:s0 + 2 * wp + n + 2]
    for i in range(n):
        f[i] = (ra[i] * w0 + ra[i + 1] * w1 + ra[i + 2] * w2) + (rb[i] * w3 + rb[i + 1] * w4 + rb[i + 2] * w5) \
            + (rc[i] * w6 + rc[i + 1] * w7 + rc[i + 2] * w8)


@numba.njit(cache=True, parallel=True)
def _dw_nchw(x, w, zx, sh, sw, dh, dw, pt, pl, hp, wp, bias, mult, zy, flo, fhi, out, nblk):  # pragma: no cover
    """Depthwise conv + MlasRequantizeOutput; x (N, C, H, W) 8-bit, w (C, KH, KW) float32 = w - zw,
    out (N, C, OH, OW).  Per channel the plane (x - zx) is copied into a zero-padded flat (hp, wp)
    float32 buffer; every product and partial sum is an integer below kh*kw*255*255 < 2^24
    (checked by the caller), so the float32 accumulation is exact in any order.  Accumulators are
    kept for every column (stride 1 in x, contiguous loops); the requantizer reads every sw-th.
    sh == 1: each tap is one flat loop over oh*wp cells (the extra columns are never read)."""
    n, c_n, oh, ow = out.shape
    h, wd = x.shape[2], x.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    total = n * c_n
    wfull = (ow - 1) * sw + 1
    for t in numba.prange(nblk):
        xp = np.zeros(hp * wp + wp, np.float32)  # slack: the flat loop reads up to (kw-1)*dw past
        acc = np.empty(oh * wp, np.float32)
        tmp = np.empty(ow, np.float32)
        qflat = np.empty(oh * wp, out.dtype)
        for r in range(t * total // nblk, (t + 1) * total // nblk):
            b = r // c_n
            ch = r - b * c_n
            for iy in range(h):  # the border cells are never written: they stay 0
                xr = x[b, ch, iy]
                dst = xp[(iy + pt) * wp + pl:(iy + pt) * wp + pl + wd]
                for ix in range(wd):
                    dst[ix] = np.float32(np.int32(xr[ix]) - zx)
            m = mult[ch]
            bb = bias[ch]
            if kh == 3 and kw == 3 and dh == 1 and dw == 1:  # one fused pass, no accumulator buffer
                wc = w[ch].reshape(9)
                if sh == 1 and sw == 1:
                    _dw3x3_q(xp, 0, wp, oh * wp, wc, bb, m, zy, flo, fhi, qflat)
                    for oy in range(oh):
                        orow = out[b, ch, oy]
                        qr = qflat[oy * wp:oy * wp + ow]
                        for ox in range(ow):
                            orow[ox] = qr[ox]
                else:
                    for oy in range(oh):
                        _dw3x3_f(xp, oy * sh * wp, wp, wfull, wc, acc)
                        orow = out[b, ch, oy]
                        for ox in range(ow):
                            tmp[ox] = acc[ox * sw]
                        for ox in range(ow):
                            orow[ox] = rq1(np.float64(tmp[ox]) + bb, m, zy, flo, fhi)
                continue
            acc[:] = 0.0
            if sh == 1:
                for ky in range(kh):
                    for kx in range(kw):
                        wv = w[ch, ky, kx]
                        _axpy(acc, 0, xp, ky * dh * wp + kx * dw, wv, oh * wp)
            else:
                for ky in range(kh):
                    for kx in range(kw):
                        _axpy_rows(acc, wp, xp, ky * dh * wp + kx * dw, sh * wp, oh, wfull, w[ch, ky, kx])
            if sw == 1:  # one flat (vectorized) pass over every column, then the rows are copied
                for i in range(oh * wp):
                    qflat[i] = rq1(np.float64(acc[i]) + bb, m, zy, flo, fhi)
                for oy in range(oh):
                    orow = out[b, ch, oy]
                    qr = qflat[oy * wp:oy * wp + ow]
                    for ox in range(ow):
                        orow[ox] = qr[ox]
                continue
            for oy in range(oh):  # sw > 1: compact the sw-th columns first, then a contiguous loop
                orow = out[b, ch, oy]
                ar = acc[oy * wp:oy * wp + wfull]
                for ox in range(ow):
                    tmp[ox] = ar[ox * sw]
                for ox in range(ow):
                    orow[ox] = rq1(np.float64(tmp[ox]) + bb, m, zy, flo, fhi)


def _prep(plan, x: np.ndarray):
    key = (id(plan), x.dtype.str, x.shape)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    _CACHE[key] = (plan, None)
    fp = plan.fplan
    w = plan.w_raw
    if (w is None or w.ndim != 4 or fp.weight_layout != "OIHW" or str(w.dtype) not in _INT8
            or np.dtype(plan.dtype).kind not in "iu"):
        return None
    m, cg, kh, kw = w.shape
    cin = x.shape[1]
    group = cin if fp.group == 0 else fp.group
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != (kh, kw):
        return None
    win = resolve_window(x.shape[2:], (kh, kw), ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad, where=fp.name)
    wq = plan.w.reshape(m, cg * kh * kw)  # float64 (w - zw[m]), integer valued
    consts = requant_consts(plan, m)
    if consts is None:
        return None
    if group == 1 and cg == cin:
        aw = np.abs(wq)
        cdt, chunk = _chunks(cg * kh * kw, x.dtype, plan.zx, float(np.max(aw)) if wq.size else 0.0,
                             float(np.max(aw.sum(axis=1))) if wq.size else 0.0)
        if cdt is not np.float32:
            return None
        K = wq.shape[1]
        wch = [np.ascontiguousarray(wq[:, k0:k0 + chunk], np.float32) for k0 in range(0, K, chunk)]
        prep = ("gemm", win, (kh, kw), chunk, wch, consts)
    elif group == cin and cg == 1 and m == cin:
        ii = np.iinfo(x.dtype)
        xmax = max(abs(int(ii.min) - plan.zx), abs(int(ii.max) - plan.zx))
        if kh * kw * xmax * float(np.max(np.abs(wq), initial=0.0)) >= (1 << 24):
            return None
        prep = ("dw", win, (kh, kw), 0, np.ascontiguousarray(wq.reshape(m, kh, kw), np.float32), consts)
    else:
        return None
    _CACHE[key] = (plan, prep)
    return prep


def fast_ort_conv(plan, x) -> np.ndarray | None:
    x = np.asarray(x)
    if (plan.impl != "mlas_f32" or x.ndim != 4 or str(x.dtype) not in _INT8
            or plan.fplan.layout != "NCHW" or plan.dtype == "float32"):
        return None
    prep = _prep(plan, x)
    if prep is None:
        return None
    kind, win, (kh, kw), chunk, wts, (bias, mult, zy, flo, fhi) = prep
    x = np.ascontiguousarray(x)
    n, cin = x.shape[:2]
    oh, ow = win.out
    sh, sw = win.strides
    dh, dw = win.dilations
    pt, pl = win.pad_begin
    out = np.empty((n, wts.shape[0] if kind == "dw" else wts[0].shape[0], oh, ow), np.dtype(plan.dtype))
    if kind == "dw":
        hp = max((oh - 1) * sh + (kh - 1) * dh + 1, pt + x.shape[2])
        wp = max((ow - 1) * sw + (kw - 1) * dw + 1, pl + x.shape[3])
        nthr = kernel_threads(out.size * kh * kw)
        with numba_threads(nthr):
            _dw_nchw(x, wts, np.int32(plan.zx), sh, sw, dh, dw, pt, pl, hp, wp, bias, mult, zy, flo, fhi, out,
                     min(nthr, n * out.shape[1]))
        return out
    direct = (kh, kw) == (1, 1) and (sh, sw) == (1, 1) and not any(win.pad_begin) and not any(win.pad_end)
    m, K, P = wts[0].shape[0], cin * kh * kw, oh * ow
    # column tiles: the float32 accumulators of one tile (and its input columns) stay cache-resident
    # between the GEMM and the requantizer (about 512 KB each)
    pb = min(P, max(256, (min(_TILE // (len(wts) * m), _TILE // K) // 16) * 16))
    for b in range(n):
        o2 = out[b].reshape(m, P)
        if direct:
            x2 = x[b].reshape(cin, P)
        else:
            cols = _scratch(0, K * P).reshape(K, P)
            _im2col(x[b], np.int32(plan.zx), kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, cols)
        for p0 in range(0, P, pb):
            p1 = min(P, p0 + pb)
            if direct:
                cb = _scratch(0, K * (p1 - p0)).reshape(K, p1 - p0)
                _minus_zp_cols(x2, np.int32(plan.zx), p0, cb)
            else:
                cb = cols[:, p0:p1]
            acc3 = _scratch(1, len(wts) * m * (p1 - p0)).reshape(len(wts), m, p1 - p0)
            for i, wc in enumerate(wts):
                np.matmul(wc, cb[i * chunk:(i + 1) * chunk], out=acc3[i])
            # always a strided 2-D view (one Numba specialization whether or not P is tiled)
            requant_chunks(acc3, bias, mult, zy, flo, fhi, o2[:, p0:p1])
    return out
