"""Fused TFLite integer DepthwiseConv in Numba (NHWC, 2-D): each output row is accumulated into
a row buffer (int32, or int64 when the exactness bound needs it) and requantized at once while the
buffer is in cache (``requant_row``), so no full-size accumulator array is formed.

Accumulator contract, acc[c] = init[c] + sum over in-range cells of (x - zx) * w[c]:
* 3x3 kernels, depth multiplier 1 (``use9``): every pixel is one pass over the 9 taps starting from
  ``init - zx * sum(w)`` and adding x * w; interior pixels read x in place, border pixels a 9-cell
  patch holding zx outside the input (adding zx * w there cancels its share of the start value).
* other kernels: interior pixels (every kx inside the row; mg 1) start from
  ``init - zx * sum_{valid ky, all kx} w`` and add x * w; border pixels (and every pixel when
  mg > 1) start from ``init`` and add (x - zx) * w per in-range cell.
  All equal the contract modulo 2^bits of the buffer, i.e. exactly whenever the true value fits
  (the caller picks int32 only when |sum| < 2^31, or with ``fold`` where int32 wrap is the contract).
* ``narrow`` (int16 weights, raw |x| * |w| * 2 <= 32767, checked by the caller): the 9-tap pass
  forms x * w and the sums of two such products in int16 (exact by that bound) before widening.
* Indices are uint64 (no negative-index wraparound code, so the channel loops vectorise).

Requantizer (``requant_row``), bit-identical to kernels/tflite/ref/requant_fast.py's loops; forms chosen once per plan:
0. ``double`` / ``upward`` per channel, 0 <= M < 2^31, left <= 31, right <= 31 (``mbqm_pot``);
1. ``float32_half_even`` on every channel with finite scales (``f32_half_even``);
2. anything else ``rq_arrays`` covers: requant.py's ``_rescale`` per channel code.
With ``fold`` the row buffer already holds the int32-wrapped ``acc + bias`` (``wrap`` overflow);
else the int64 bias is added there and ``overflow`` applied (0 exact, 1 wrap, 2 saturate).
(The fixed-point primitives are inlined from refinterp/quant/fixedpoint_nb.py; Numba's on-disk cache does
not see edits to them: after changing one, delete this folder's ``__pycache__/*.nb[ci]``.)
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.quant.fixedpoint_nb import mbqm_pot, wrap32
from .requant_fast import rescale

U = np.uint64
I16 = np.int16
I32 = np.int32


@numba.njit(cache=True, inline="always")
def f32_half_even(v, sc32):  # pragma: no cover - compiled
    """``float32_half_even``: rint(f32(v) * f32(scale)) in float32 (an integer value; callers clamp
    it to the output range in float before converting, which equals clamping the integer)."""
    return np.rint(np.float32(v) * sc32)


@numba.njit(cache=True, inline="always")
def requant_row(racc, n, ob, out, q, qt, k, form, fold, overflow, has_left, zo, lo, hi):  # pragma: no cover
    """out[ob + i] = requantized racc[i] for i < n * oc (channel i % oc).  ``q``: per-channel arrays
    (bias, M, cp, cn, total, left, shift, sc32, sc64, code); ``qt``: (M, cp, cn, total, sc32) tiled
    ``k`` times (the fast forms run over groups of k pixels: longer vector loops for small oc)."""
    bias, M, cp, cn, total, left, shift, sc32, sc64, code = q
    tM, tcp, tcn, ttotal, tsc32 = qt
    oc = M.shape[0]
    ob = np.uint64(ob)
    if (form == 0 or form == 1) and fold == 1 and has_left == 0:
        flo = np.float32(lo - zo)
        fhi = np.float32(hi - zo)
        for p0 in range(0, n, k):
            m = np.uint64(min(k, n - p0) * oc)
            pb = np.uint64(p0 * oc)
            if form == 0:
                for j in range(m):
                    y = np.int32(mbqm_pot(racc[pb + j], tM[j], tcp[j], tcn[j], ttotal[j]))
                    out[ob + pb + j] = min(max(np.int32(y + zo), lo), hi)
            else:
                for j in range(m):
                    f = min(max(f32_half_even(racc[pb + j], tsc32[j]), flo), fhi)
                    out[ob + pb + j] = np.int32(f) + zo
    else:
        uoc = np.uint64(oc)
        for p in range(np.uint64(n)):
            pb = p * uoc
            for c in range(uoc):
                v = np.int64(racc[pb + c])
                if fold == 0:
                    v += bias[c]
                    if overflow == 1:
                        v = wrap32(v)
                    elif overflow == 2:
                        v = min(max(v, -2147483648), 2147483647)
                if form == 0:
                    a = np.int32(v << left[c])
                    y = mbqm_pot(a, M[c], cp[c], cn[c], total[c])
                else:
                    y = rescale(v, np.int64(M[c]), shift[c], sc32[c], sc64[c], code[c])
                out[ob + pb + c] = min(max(y + zo, lo), hi)


@numba.njit(cache=True, inline="always")
def _tap9(src, o, wt, ut, c9t, racc, a0, m, narrow):  # pragma: no cover - compiled
    """racc[a0 + j] = c9t[j] + sum_t src[o[t] + j] * wt[t * ut + j] for j < m (3x3 taps t)."""
    x0, x1, x2, x3, x4, x5, x6, x7, x8 = o
    if narrow:
        for c in range(m):
            p01 = I16(I16(src[x0 + c]) * wt[c] + I16(src[x1 + c]) * wt[ut + c])
            p23 = I16(I16(src[x2 + c]) * wt[U(2) * ut + c] + I16(src[x3 + c]) * wt[U(3) * ut + c])
            p45 = I16(I16(src[x4 + c]) * wt[U(4) * ut + c] + I16(src[x5 + c]) * wt[U(5) * ut + c])
            p67 = I16(I16(src[x6 + c]) * wt[U(6) * ut + c] + I16(src[x7 + c]) * wt[U(7) * ut + c])
            p8 = I16(I16(src[x8 + c]) * wt[U(8) * ut + c])
            racc[a0 + c] = c9t[c] + I32(p01) + I32(p23) + I32(p45) + I32(p67) + I32(p8)
    else:
        for c in range(m):
            racc[a0 + c] = (c9t[c] + src[x0 + c] * wt[c] + src[x1 + c] * wt[ut + c]
                            + src[x2 + c] * wt[U(2) * ut + c] + src[x3 + c] * wt[U(3) * ut + c]
                            + src[x4 + c] * wt[U(4) * ut + c] + src[x5 + c] * wt[U(5) * ut + c]
                            + src[x6 + c] * wt[U(6) * ut + c] + src[x7 + c] * wt[U(7) * ut + c]
                            + src[x8 + c] * wt[U(8) * ut + c])


@numba.njit(cache=True)
def _rows(r0, r1, x, wf, wt, c9t, wrow, init, geo, P64, T64, M, tM, sc32, tsc32, sc64,
          out):  # pragma: no cover - compiled
    """Output rows r0 <= r < r1 of the flattened (N * OH) row index.

    ``use9`` (3x3, mg 1, zx inside the input dtype): every pixel takes ``_tap9`` from
    c9t = init - zx * sum of the 9 weights; interior pixels of full rows read x directly, ``k``
    neighbours per vector loop (k > 1 only with stride 1: their inputs are contiguous); the others
    read a 9-cell patch holding zx outside the input ((zx - zx) * w = 0).  ``wt`` / ``c9t``: the 3x3
    weights / start values tiled k times.  Otherwise the generic interior / border loops.
    The requantizer runs over groups of ``kq`` pixels (any stride).
    Scalars come packed in ``geo`` (see ``GEO``), per-channel int64 arrays in ``P64`` / ``T64``."""
    zx, kh, kw, sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7], geo[8]
    mg, oh, ow, k, use9, narrow = geo[9], geo[10], geo[11], geo[12], geo[13] != 0, geo[14] != 0
    form, fold, overflow, has_left = geo[15], geo[16], geo[17], geo[18]
    zo, lo, hi, kq = I32(geo[19]), I32(geo[20]), I32(geo[21]), geo[22]
    q = (P64[0], M, P64[1], P64[2], P64[3], P64[4], P64[5], sc32, sc64, P64[6])
    qt = (tM, T64[0], T64[1], T64[2], tsc32)
    n, h, wd, cin = x.shape
    oc = wf.shape[0] // (kh * kw)
    uoc = U(oc)
    xf = x.reshape(-1)
    # interior columns: every kx lands inside the row
    ox_lo = min((pl + sw - 1) // sw, ow)
    ox_hi = max(min((wd - 1 - (kw - 1) * dw + pl) // sw + 1, ow), ox_lo)
    if mg != 1:
        ox_lo = ox_hi = ow
    racc = np.empty(ow * oc, init.dtype)
    corr = np.empty(oc, init.dtype)
    ut = U(k * oc)
    ucin = U(cin)
    patch = np.empty(9 * cin, x.dtype)
    poffs = (U(0), ucin, U(2) * ucin, U(3) * ucin, U(4) * ucin, U(5) * ucin, U(6) * ucin, U(7) * ucin, U(8) * ucin)
    for r in range(r0, r1):
        b = r // oh
        oy = r - b * oh
        ky_lo = 0
        while ky_lo < kh and oy * sh + ky_lo * dh - pt < 0:
            ky_lo += 1
        ky_hi = kh
        while ky_hi > ky_lo and oy * sh + (ky_hi - 1) * dh - pt >= h:
            ky_hi -= 1
        for c in range(oc if not use9 else 0):
            s = np.int64(init[c])
            for ky in range(ky_lo, ky_hi):
                s -= zx * wrow[ky, c]
            corr[c] = s
        row0 = (b * h + oy * sh - pt) * wd  # input pixel index of (b, iy(ky=0), 0), may be < 0
        if use9:
            rs = U(dh * wd * cin)
            cs = U(dw * cin)
            full = ky_lo == 0 and ky_hi == 3
            ox = 0
            while ox < ow:  # one _tap9 call site (compile time): interior groups or one border pixel
                if full and ox >= ox_lo and ox < ox_hi:  # k pixels per vector loop straight from x
                    npx = min(k, ox_hi - ox)
                    x0 = U((row0 + ox * sw - pl) * cin)
                    x3 = x0 + rs
                    x6 = x3 + rs
                    src = xf
                    offs = (x0, x0 + cs, x0 + cs + cs, x3, x3 + cs, x3 + cs + cs, x6, x6 + cs, x6 + cs + cs)
                else:  # border pixel: its 9 cells gathered, zx where outside the input
                    npx = 1
                    for t in range(9):
                        iy = oy * sh + (t // 3) * dh - pt
                        ix = ox * sw + (t % 3) * dw - pl
                        pb = U(t * cin)
                        if iy >= 0 and iy < h and ix >= 0 and ix < wd:
                            xb = U(((b * h + iy) * wd + ix) * cin)
                            for c in range(ucin):
                                patch[pb + c] = xf[xb + c]
                        else:
                            for c in range(ucin):
                                patch[pb + c] = zx
                    src = patch
                    offs = poffs
                _tap9(src, offs, wt, ut, c9t, racc, U(ox) * uoc, U(npx * oc), narrow)
                ox += npx
        else:
            for ox in range(ox_lo, ox_hi):
                a0 = U(ox) * uoc
                for c in range(uoc):
                    racc[a0 + c] = corr[c]
                for ky in range(ky_lo, ky_hi):
                    for kx in range(kw):
                        xb = U((row0 + ky * dh * wd + ox * sw + kx * dw - pl) * cin)
                        wb = U(ky * kw + kx) * uoc
                        for c in range(uoc):
                            racc[a0 + c] += xf[xb + c] * wf[wb + c]
        for ox in range(0 if not use9 else ow, ow):  # border columns (all when mg > 1): checked cells
            if ox >= ox_lo and ox < ox_hi:
                continue
            a0 = ox * oc
            for c in range(oc):
                racc[a0 + c] = init[c]
            for ky in range(ky_lo, ky_hi):
                for kx in range(kw):
                    ix = ox * sw + kx * dw - pl
                    if ix < 0 or ix >= wd:
                        continue
                    xb = (row0 + ky * dh * wd + ix) * cin
                    wb = (ky * kw + kx) * oc
                    if mg == 1:
                        ua, ux, uw = U(a0), U(xb), U(wb)
                        for c in range(uoc):
                            racc[ua + c] += (xf[ux + c] - zx) * wf[uw + c]
                    else:
                        for c in range(oc):
                            racc[a0 + c] += (xf[xb + c // mg] - zx) * wf[wb + c]
        requant_row(racc, ow, r * ow * oc, out, q, qt, kq, form, fold, overflow, has_left, zo, lo, hi)


GEO = ("zx", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "mg", "oh", "ow", "k", "use9", "narrow", "form", "fold",
       "overflow", "has_left", "zo", "lo", "hi", "kq")
P64_ROWS = ("bias", "cp", "cn", "total", "left", "shift", "code")  # per-channel int64 rows of P64
T64_ROWS = ("cp", "cn", "total")  # the same tiled kq times (T64; likewise tM, tsc32)


@numba.njit(cache=True, parallel=True)
def _rows_parallel(nchunks, x, wf, wt, c9t, wrow, init, geo, P64, T64, M, tM, sc32, tsc32, sc64,
                   out):  # pragma: no cover - compiled
    rows = x.shape[0] * geo[10]
    for i in numba.prange(nchunks):
        _rows(rows * i // nchunks, rows * (i + 1) // nchunks, x, wf, wt, c9t, wrow, init, geo, P64, T64, M, tM,
              sc32, tsc32, sc64, out)


def dw_fused(threads: int, x, *args) -> None:
    """``args`` = (wf, wt, c9t, wrow, init, geo, P64, T64, M, tM, sc32, tsc32, sc64, out): x (N, H, W, C)
    contiguous integer; wf (KH*KW*OC,) integer weights, wt (9*k*OC,) the 3x3 ones tiled and c9t
    (k*OC,) their start values (see ``_rows``); wrow (KH, OC) int64 sums over kx; init (OC,) in the
    buffer dtype; geo int64 scalars named by ``GEO``; P64 / T64 int64 rows named by ``P64_ROWS`` /
    ``T64_ROWS``; M / tM int32 multipliers (plain / tiled), sc32 / tsc32 float32 and sc64 float64
    scales; out (N*OH*OW*OC,) output dtype.  ``threads`` == 1 runs without the parallel launcher."""
    if threads <= 1:
        _rows(0, x.shape[0] * args[5][10], x, *args)
    else:
        _rows_parallel(min(x.shape[0] * args[5][10], 4 * threads), x, *args)
