"""Fast ONNX Runtime (MLAS) integer Conv / DepthwiseConv for an ``ort_gemm.QGemmPlan``, bit-exact.

``fast_ort_conv(plan, x)`` returns the same array as ``ort_gemm.ort_conv`` / ``ort_depthwise``
(NumPy path) or None when the case is not covered (then the NumPy path runs).  Covered: 2-D NCHW,
OIHW constant 8-bit filter, 8-bit input, integer output, ``impl`` ``mlas_f32``; group 1 or one
input channel per group (depthwise, channel multiplier 1).

Exactness contract:

* group 1: ``acc = sum (x - zx) * (w - zw[m])`` is float32 BLAS GEMMs over K-chunks short enough
  that every partial sum stays below 2^24 (kernels/tflite/ref/conv_fast.py ``_chunks``: one chunk when
  ``max|x - zx| * max_m sum_k |w[m, k] - zw[m]|`` < 2^24, else chunk length
  ``floor((2^24 - 1) / (max|x - zx| * max|w - zw|))`` over the whole input dtype range), so any
  BLAS summation order is exact; the chunk sums are added in float64 (exact integers below 2^53).
  Padded cells hold 0 (= the input zero point before subtraction, as QLinearConv pads).  A 1x1
  stride-1 unpadded conv reads x directly; any other window reads an im2col built per tile from
  the zero-padded stride-phase planes of kernels/onnxruntime/depthwise_fast.py (every tap row one contiguous copy).  The
  output columns are processed in tiles (``_tile_cols``) so a tile's accumulators stay in cache
  until requantized; the tiling never changes a result.
* depthwise: kernels/onnxruntime/depthwise_fast.py (float32 taps, exact below 2^24; else not covered).
* then kernels/onnxruntime/requant_fast.py: ``MlasRequantizeOutput`` on the exact sum + bias (float32 lanes for the
  single-chunk rows whose bias is exactly a float32).
"""
from __future__ import annotations

import threading

import numba
import numpy as np

from ..spatial import ints, resolve_window
from ..prepared import per_shape
from .depthwise_fast import dw_geometry, dw_nchw, dw_spec, phase_planes
from .requant_fast import f32_rows, requant_chunks, requant_consts
from ..tflite.ref.conv_fast import _chunks

_INT8 = ("int8", "uint8")
_TILE = 1 << 17  # float32 elements per tile buffer (512 KB)
_SMALL_GEMM = 1_000_000  # multiply-adds per GEMM call up to which OpenBLAS takes its small-matrix kernel
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
def _im2col(buf, toff, wq, oy0, oy1, ow, cols):  # pragma: no cover - compiled
    """cols[c*T + t, (oy - oy0)*ow + ox] = buf[c, toff[t] + oy*wq + ox] for output rows
    oy0 <= oy < oy1: buf holds the zero-padded stride-phase planes of (x - zx) (kernels/onnxruntime/depthwise_fast.py
    ``phase_planes``), where every tap of an output row is one contiguous run."""
    nt = toff.shape[0]
    for c in range(buf.shape[0]):
        src = buf[c]
        for t in range(nt):
            row = cols[c * nt + t]
            for oy in range(oy0, oy1):
                s = src[toff[t] + oy * wq:toff[t] + oy * wq + ow]
                d = row[(oy - oy0) * ow:(oy - oy0 + 1) * ow]
                for ox in range(ow):
                    d[ox] = s[ox]


@numba.njit(cache=True)
def _minus_zp_cols(x2, zx, p0, out):  # pragma: no cover - compiled
    """out[k, j] = x2[k, p0 + j] - zx as float32 (exact: |x - zx| <= 255)."""
    k_n, w = out.shape
    for k in range(k_n):
        src = x2[k, p0:p0 + w]
        dst = out[k]
        for j in range(w):
            dst[j] = np.float32(np.int32(src[j]) - zx)


def _tile_cols(P: int, m: int, K: int, nch: int) -> int:
    """Output columns per tile (speed only; every tiling gives the same result).  The float32
    accumulators of one tile (and its input columns) stay cache-resident between the GEMM and the
    requantizer (about 512 KB each); where m*K is small the tile is also kept to at most
    _SMALL_GEMM multiply-adds (OpenBLAS's faster small-matrix sgemm path) if that leaves >= 512
    columns; and a tile row is never a multiple of 512 floats (row strides that are multiples of
    2-4 KB alias in the caches: up to 2x slower sgemm, measured on this project's benchmark)."""
    pb = max(256, (min(_TILE // (nch * m), _TILE // K) // 16) * 16)
    small = (_SMALL_GEMM // max(1, m * K)) // 16 * 16
    if small >= 512:  # (smaller tiles: the per-call overhead eats the gain)
        pb = min(pb, small)
    if pb >= P:
        return P
    return pb - 16 if pb % 512 == 0 else pb


def _prep(plan, x: np.ndarray):
    """Per (plan, input dtype and shape), computed once (a few recent shapes kept): tiles, chunked
    weights, requantizer constants, or the depthwise spec; None when not covered."""
    return per_shape(plan, ("ort_conv", x.dtype.str), x.shape, _build_prep, x)


def _build_prep(plan, x: np.ndarray):
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
    ii = np.iinfo(x.dtype)
    xmax = max(abs(int(ii.min) - plan.zx), abs(int(ii.max) - plan.zx))
    aw = np.abs(wq)
    consts = (consts[0],) + f32_rows(consts[0]) + consts[1:]
    odt = np.dtype(plan.dtype)
    if group == 1 and cg == cin:
        cdt, chunk = _chunks(cg * kh * kw, x.dtype, plan.zx, float(np.max(aw)) if wq.size else 0.0,
                             float(np.max(aw.sum(axis=1))) if wq.size else 0.0)
        if cdt is not np.float32:
            return None
        K = wq.shape[1]
        wch = [np.ascontiguousarray(wq[:, k0:k0 + chunk], np.float32) for k0 in range(0, K, chunk)]
        oh, ow = win.out
        P = oh * ow
        direct = (kh, kw) == (1, 1) and win.strides == (1, 1) and not any(win.pad_begin) and not any(win.pad_end)
        pb = _tile_cols(P, m, K, len(wch))
        if not direct:  # im2col per tile of whole output rows (the tile's columns stay in cache)
            rows = max(1, pb // ow)
            if 1 < rows < oh and (rows * ow) % 512 == 0:
                rows -= 1
            pb = min(oh, rows) * ow
        tiles = [(p0, min(P, p0 + pb)) for p0 in range(0, P, pb)]
        geo = None if direct else dw_geometry(win, kh, kw, x.shape[2:])
        prep = ("gemm", odt, m, (win, chunk, wch, consts, np.int32(plan.zx), K, P, tiles, geo))
    elif group == cin and cg == 1 and m == cin:
        if kh * kw * xmax * float(np.max(aw, initial=0.0)) >= (1 << 24):
            return None
        spec = dw_spec(win, kh, kw, x.shape, plan.zx, np.ascontiguousarray(wq, np.float32), consts)
        prep = ("dw", odt, m, spec)
    else:
        return None
    return prep


def fast_ort_conv(plan, x) -> np.ndarray | None:
    if plan.impl != "mlas_f32" or plan.dtype == "float32" or plan.fplan.layout != "NCHW":
        return None
    x = np.asarray(x)
    if x.ndim != 4 or x.dtype.itemsize != 1 or x.dtype.kind not in "iu":
        return None
    prep = _prep(plan, x)
    if prep is None:
        return None
    kind, odt, m, spec = prep
    x = np.ascontiguousarray(x)
    n = x.shape[0]
    out = np.empty((n, m) + spec[0].out, odt)
    if kind == "dw":
        dw_nchw(x, spec, out)
    else:
        _gemm_conv(x, spec, out)
    return out


def _gemm_conv(x, spec, out) -> None:
    win, chunk, wts, consts, zx, K, P, tiles, geo = spec
    n, cin = x.shape[:2]
    m = out.shape[1]
    nch = len(wts)
    for b in range(n):
        o2 = out[b].reshape(m, P)
        x2 = x[b].reshape(cin, -1)
        if geo is not None:
            hq, wq, toff = geo[:3]
            sh, sw = win.strides
            ph = np.zeros((cin, sh * sw * hq * wq), np.float32)
            phase_planes(x2, zx, sh, sw, win.pad_begin[0], win.pad_begin[1], x.shape[2], x.shape[3], hq, wq, ph)
        for p0, p1 in tiles:
            cb = _scratch(0, K * (p1 - p0)).reshape(K, p1 - p0)
            if geo is None:
                _minus_zp_cols(x2, zx, p0, cb)
            else:
                _im2col(ph, toff, wq, p0 // win.out[1], p1 // win.out[1], win.out[1], cb)
            acc3 = _scratch(1, nch * m * (p1 - p0)).reshape(nch, m, p1 - p0)
            for i in range(nch):
                np.matmul(wts[i], cb[i * chunk:(i + 1) * chunk], out=acc3[i])
            # always a strided 2-D view (one Numba specialization whether or not P is tiled)
            requant_chunks(acc3, *consts, o2[:, p0:p1])
