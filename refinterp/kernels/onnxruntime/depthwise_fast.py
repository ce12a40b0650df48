"""Fast ONNX Runtime (MLAS) NCHW depthwise Conv (channel multiplier 1) + MlasRequantizeOutput, bit-exact.

Exactness contract: the caller guarantees ``kh*kw * max|x - zx| * max|w - zw| < 2^24``, so every
product and partial sum of the float32 tap accumulation is an exact integer in any order.  The
requantization is kernels/onnxruntime/requant_fast.py's: float32 lanes (``rq1f``) for the channels whose bias is
exactly a float32 (``f32ok``: one correctly rounded float32 add of exact operands), else the
float64 bias add (``rq1``).

Layout (per plane, i.e. per (image, channel)): (x - zx) is scattered into a zero-padded float32
buffer split into ``sh * sw`` stride phases: padded cell (r, c) goes to phase (r % sh, c % sw) at
(r // sh, c // sw) of a (hq, wq) sub-plane.  Output (oy, ox) of tap (ky, kx) then reads phase
((ky*dh) % sh, (kx*dw) % sw) at (oy + ky*dh // sh, ox + kx*dw // sw): for every tap the outputs
are one contiguous flat run ``j = oy*wq + ox`` over ``oh*wq`` cells (the ``wq - ow`` extra columns
of each row are computed and never read), so the inner loops are long, unit-stride, and vectorise.
Border cells are never written: they stay 0 (= the input zero point, as QLinearConv pads).
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.settings import kernel_threads
from ..threads import numba_threads
from .requant_fast import rq1, rq1f


@numba.njit(cache=True, inline="always")
def _taps9(buf, o, wc, n, acc):  # pragma: no cover - compiled
    """acc[j] = sum over the 9 taps t of buf[o[t] + j] * wc[t], j < n (exact, any order).  One
    sliced view per tap: LLVM's runtime alias checks then vectorise the loop (one view indexed at
    9 variable offsets does not vectorise)."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wc[0], wc[1], wc[2], wc[3], wc[4], wc[5], wc[6], wc[7], wc[8]
    a, b, c = buf[o[0]:o[0] + n], buf[o[1]:o[1] + n], buf[o[2]:o[2] + n]
    d, e, f = buf[o[3]:o[3] + n], buf[o[4]:o[4] + n], buf[o[5]:o[5] + n]
    g, h, k = buf[o[6]:o[6] + n], buf[o[7]:o[7] + n], buf[o[8]:o[8] + n]
    for j in range(n):
        acc[j] = (a[j] * w0 + b[j] * w1 + c[j] * w2) + (d[j] * w3 + e[j] * w4 + f[j] * w5) \
            + (g[j] * w6 + h[j] * w7 + k[j] * w8)


@numba.njit(cache=True, inline="always")
def _tables(h, wd, sh, sw, pt, pl, hq, wq):  # pragma: no cover - compiled
    """Where input row iy starts in the phase buffer (its phase-0 column), and per column phase px
    the first input column in that phase, how many there are and their destination offset."""
    psz = hq * wq
    rowoff = np.empty(h, np.int64)
    for iy in range(h):
        pr = iy + pt
        rowoff[iy] = ((pr % sh) * sw) * psz + (pr // sh) * wq
    ix0s = np.empty(sw, np.int64)
    cnts = np.zeros(sw, np.int64)
    coff = np.empty(sw, np.int64)
    for px in range(sw):
        ix0s[px] = (px - pl) % sw
        if ix0s[px] < wd:
            cnts[px] = (wd - ix0s[px] + sw - 1) // sw
        coff[px] = px * psz + (ix0s[px] + pl) // sw
    return rowoff, ix0s, cnts, coff


@numba.njit(cache=True, inline="always")
def _scatter(xr, zx, h, wd, sw, pl, psz, rowoff, ix0s, cnts, coff, buf):  # pragma: no cover - compiled
    """buf[phase cells] = xr - zx (float32, exact) for one plane xr (H*W,); other cells untouched."""
    if sw == 1:  # the row copies vectorise (unit stride)
        c0 = coff[0]
        for iy in range(h):
            dst = buf[rowoff[iy] + c0:rowoff[iy] + c0 + wd]
            src = xr[iy * wd:(iy + 1) * wd]
            for i in range(wd):
                dst[i] = np.float32(np.int32(src[i]) - zx)
    elif sw == 2:  # input column pairs (2i, 2i+1) go to the two phases: one interleaved loop
        pa, pb = pl % 2, (pl + 1) % 2  # phases of even / odd input columns
        ca, cb = pa * psz + pl // 2, pb * psz + (pl + 1) // 2
        half = wd // 2
        for iy in range(h):
            da = buf[rowoff[iy] + ca:rowoff[iy] + ca + half + 1]
            db = buf[rowoff[iy] + cb:rowoff[iy] + cb + half]
            src = xr[iy * wd:(iy + 1) * wd]
            for i in range(half):
                da[i] = np.float32(np.int32(src[2 * i]) - zx)
                db[i] = np.float32(np.int32(src[2 * i + 1]) - zx)
            if wd % 2:
                da[half] = np.float32(np.int32(src[wd - 1]) - zx)
    else:
        for iy in range(h):
            for px in range(sw):
                dst = buf[rowoff[iy] + coff[px]:rowoff[iy] + coff[px] + cnts[px]]
                src = xr[iy * wd + ix0s[px]:(iy + 1) * wd]
                for i in range(cnts[px]):
                    dst[i] = np.float32(np.int32(src[i * sw]) - zx)


@numba.njit(cache=True)
def phase_planes(x2, zx, sh, sw, pt, pl, h, wd, hq, wq, buf):  # pragma: no cover - compiled
    """buf (C, >= sh*sw*hq*wq) zeroed by the caller; plane c of x2 (C, H*W) scattered into row c."""
    rowoff, ix0s, cnts, coff = _tables(h, wd, sh, sw, pt, pl, hq, wq)
    for c in range(x2.shape[0]):
        _scatter(x2[c], zx, h, wd, sw, pl, hq * wq, rowoff, ix0s, cnts, coff, buf[c])


@numba.njit(cache=True)
def _dw_planes(x2, w2, toff, zx, sh, sw, pt, pl, h, wd, hq, wq, oh, ow,
               bias, bias32, f32ok, mult, zy, flo, fhi, out2, r0, r1):  # pragma: no cover - compiled
    """Planes r0 <= r < r1 of x2 (N*C, H*W) 8-bit -> out2 (N*C, OH*OW); w2 (C, T) float32 (w - zw),
    toff (T,) the flat tap offsets into the phase buffer (see the module docstring)."""
    c_n, nt = w2.shape
    psz = hq * wq
    # the flat run is rounded up to whole 64-cell vector-loop iterations (no scalar remainder, speed
    # only); the extra cells read finite buffer cells or the zero slack and are never stored
    n = (oh * wq + 63) // 64 * 64
    buf = np.zeros(sh * sw * psz + wq + n - oh * wq, np.float32)  # slack: the run reads past the planes
    acc = np.empty(n, np.float32)
    q = np.empty(n, out2.dtype)
    rowoff, ix0s, cnts, coff = _tables(h, wd, sh, sw, pt, pl, hq, wq)
    for r in range(r0, r1):
        ch = r % c_n
        _scatter(x2[r], zx, h, wd, sw, pl, psz, rowoff, ix0s, cnts, coff, buf)
        wc = w2[ch]
        if nt == 9:
            _taps9(buf, toff, wc, n, acc)
        else:
            acc[:] = 0.0
            for t in range(nt):
                wv = wc[t]
                s = buf[toff[t]:toff[t] + n]
                for j in range(n):
                    acc[j] += s[j] * wv
        mm = mult[ch]
        if f32ok[ch]:
            bb = bias32[ch]
            for j in range(n):
                q[j] = rq1f(acc[j] + bb, mm, zy, flo, fhi)
        else:
            bd = bias[ch]
            for j in range(n):
                q[j] = rq1(np.float64(acc[j]) + bd, mm, zy, flo, fhi)
        orow = out2[r]
        for oy in range(oh):
            qr = q[oy * wq:oy * wq + ow]
            od = orow[oy * ow:(oy + 1) * ow]
            for ox in range(ow):
                od[ox] = qr[ox]


def dw_geometry(win, kh: int, kw: int, x_hw):
    """(hq, wq, tap offsets int64 (kh*kw,), (kh, kw)) of the phase buffer for a resolved window."""
    oh, ow = win.out
    sh, sw = win.strides
    dh, dw = win.dilations
    pt, pl = win.pad_begin
    hp = max((oh - 1) * sh + (kh - 1) * dh + 1, pt + x_hw[0])
    wp = max((ow - 1) * sw + (kw - 1) * dw + 1, pl + x_hw[1])
    hq, wq = -(-hp // sh), -(-wp // sw)
    toff = np.array([(((ky * dh) % sh) * sw + (kx * dw) % sw) * hq * wq + ((ky * dh) // sh) * wq + (kx * dw) // sw
                     for ky in range(kh) for kx in range(kw)], np.int64)
    return hq, wq, toff, (kh, kw)


def dw_spec(win, kh: int, kw: int, x_shape, zx: int, w2, consts) -> tuple:
    """Everything ``dw_nchw`` needs besides x and out, computed once per (plan, input shape)."""
    hq, wq, toff, _ = dw_geometry(win, kh, kw, x_shape[2:])
    bias, bias32, f32ok, mult, zy, flo, fhi = consts
    oh, ow = win.out
    static = (w2, toff, np.int32(zx), win.strides[0], win.strides[1], win.pad_begin[0], win.pad_begin[1],
              x_shape[2], x_shape[3], hq, wq, oh, ow, bias, bias32, f32ok, mult, zy, flo, fhi)
    return (win, static, oh * ow * toff.size)


@numba.njit(cache=True, parallel=True)
def _dw_planes_par(x2, w2, toff, zx, sh, sw, pt, pl, h, wd, hq, wq, oh, ow,
                   bias, bias32, f32ok, mult, zy, flo, fhi, out2, nblk):  # pragma: no cover - compiled
    """``_dw_planes`` over ``nblk`` contiguous blocks of planes, one per prange iteration (each plane
    is computed alone: the result does not depend on the split)."""
    nc = x2.shape[0]
    for t in numba.prange(nblk):
        _dw_planes(x2, w2, toff, zx, sh, sw, pt, pl, h, wd, hq, wq, oh, ow, bias, bias32, f32ok, mult, zy,
                   flo, fhi, out2, t * nc // nblk, (t + 1) * nc // nblk)


def dw_nchw(x, spec, out) -> None:
    """out (N, C, OH, OW) = requantized depthwise conv of x (N, C, H, W); planes split over Numba
    threads when the work is large enough (``settings.kernel_threads``)."""
    static, work = spec[1], spec[2]
    nc = x.shape[0] * x.shape[1]
    x2 = x.reshape(nc, -1)
    out2 = out.reshape(nc, -1)
    nthr = min(kernel_threads(nc * work), nc)
    if nthr <= 1:  # no parallel launcher
        _dw_planes(x2, *static, out2, 0, nc)
        return
    with numba_threads(nthr):
        _dw_planes_par(x2, *static, out2, nthr)
