"""Fast TFLite integer DepthwiseConv for a ``conv.QConvPlan`` (2-D, NHWC), bit-exact.

``fast_depthwise(plan, x)`` returns the same array as ``conv.qdepthwise_conv`` or None when the
case is not covered (then the NumPy path runs).

Exactness contract: one fused Numba pass per output row (kernels/tflite/ref/depthwise_fused.py): integer accumulation
over the cells inside the input (padding adds 0) in an int32 row buffer when every sum is below
2^31 (else int64), then the requantizer of the plan's rounding form (bias, int32 wrap/saturate,
rounding, clamp), identical to kernels/tflite/ref/requant_fast.py's ``fused_runner``.  Not covered (None): grouped
convolutions that are not depthwise, non-NHWC layouts, run-time filters, non-integer inputs or
weights, multipliers >= 2^31 and the rounding forms ``rq_arrays`` declines (mbqm64, pot).
"""
from __future__ import annotations

import numpy as np

from refinterp.settings import kernel_threads
from ...threads import numba_threads

from ...float import conv as float_conv
from ...spatial import ints, resolve_window
from refinterp.quant.fixedpoint_nb import pot_consts
from .depthwise_fused import GEO, dw_fused
from ...prepared import per_shape, prepared
from .requant_fast import bias_array, overflow_mode, rq_arrays

LANES = 512  # target vector-loop length (k * OC) of the 3x3 pass and of the requantizer


def _form(arrs, overflow: int):
    """0: double/upward with 0 <= M < 2^31; 1: float32_half_even with finite scales; 2: general."""
    M, sh, sc32, _, code = arrs
    if (overflow != 2 and np.all((code == 0) | (code == 1)) and np.all((M >= 0) & (M < (1 << 31)))
            and np.all(np.abs(sh) <= 31)):
        return 0
    if overflow != 2 and np.all(code == 3) and np.all(np.isfinite(sc32)):
        return 1
    return 2


def _dw_prep(plan, cin: int, x_dtype: np.dtype):
    """Per (plan, input dtype), computed once: integer weights (int16 when ``narrow``, else the
    buffer dtype; plain and 3x3-tiled), the buffer start values, the packed kernel scalars and the
    requantizer arrays (plain and tiled); None when not covered."""
    return prepared(plan, ("dw", cin, x_dtype.str), _build_dw_prep, cin, x_dtype)


def _build_dw_prep(plan, cin: int, x_dtype: np.dtype):
    fp = plan.fplan
    wk = float_conv.internal_weights(plan.w, fp.weight_layout, cin, 2, fp.name)  # (KH, KW, C, 1, Mg)
    kh, kw, c, cg, mg = wk.shape
    oc = c * mg
    prep = None
    arrs = rq_arrays(plan.requant, oc)
    M = arrs[0] if arrs is not None else None
    if (cg == 1 and c == cin and oc > 0 and arrs is not None and np.all(wk == np.round(wk))
            and np.all(np.abs(M) < (1 << 31))):
        w = wk.reshape(kh, kw, oc)
        ii = np.iinfo(x_dtype)
        xmax = max(abs(int(ii.min) - plan.zx), abs(int(ii.max) - plan.zx))
        wsum = kh * kw * int(np.max(np.abs(w)))
        # int32 buffer when every partial sum of (x - zx) * w is below 2^31 (int8: 9 * 255 * 128)
        idt = np.int32 if xmax * wsum < (1 << 31) else np.int64
        overflow = overflow_mode(plan.acc32, plan.settings)
        bias = bias_array(plan.bias, oc)
        fold = int(overflow == 1 and idt is np.int32)
        # fold: the buffer starts at bias (mod 2^32), so it ends at wrap32(acc + bias)
        init = (bias & 0xFFFFFFFF).astype(np.uint32).view(np.int32) if fold else np.zeros(oc, idt)
        _, sh, sc32, sc64, code = arrs
        form = _form(arrs, overflow)
        cp, cn, total = pot_consts(M, np.clip(sh, -31, 31), code == 1)  # used by form 0 only
        left = np.maximum(sh, 0)
        rq = plan.requant
        # narrow: the 3x3 pass may form x * w and pairs of them in int16 (raw |x| * |w| * 2 <= 32767)
        xraw = max(abs(int(ii.min)), abs(int(ii.max)))
        wmax = int(np.max(np.abs(w)))
        narrow = idt is np.int32 and 2 * xraw * wmax <= 32767
        wdt = np.int16 if narrow else idt
        # k pixels per vector loop in the 3x3 pass (stride 1, mg 1), kq in the requantizer
        kq = max(1, -(-LANES // oc))
        k = kq if ints(fp.strides, 2, 1)[1] == 1 and mg == 1 else 1
        use9 = (kh, kw) == (3, 3) and mg == 1 and int(ii.min) <= plan.zx <= int(ii.max)
        w3 = w.reshape(kh * kw, 1, oc) if use9 else np.zeros((0, 1, oc))
        # 3x3 start value init - zx * sum(w), modulo 2^bits of the buffer like every partial sum
        c9 = init.astype(np.int64) - int(plan.zx) * w.reshape(kh * kw, oc).sum(axis=0).astype(np.int64)
        M32 = M.astype(np.int32)
        tile = lambda v: np.ascontiguousarray(np.tile(v, kq))  # noqa: E731
        head = dict(zx=int(plan.zx), kh=kh, kw=kw, mg=mg, k=k, kq=kq, use9=int(use9), narrow=int(narrow), form=form,
                    fold=fold, overflow=overflow, has_left=int(np.any(left > 0)), zo=int(rq.zo), lo=int(rq.lo),
                    hi=int(rq.hi))
        prep = dict(
            head=head, kh=kh, kw=kw, cin=cin, oc=oc, out_dtype=np.dtype(rq.dtype),
            arrays=(np.ascontiguousarray(w.reshape(-1), dtype=wdt),                       # wf
                    np.ascontiguousarray(np.tile(w3, (1, k, 1)).reshape(-1), dtype=wdt),  # wt
                    np.ascontiguousarray(np.tile(c9, k).astype(idt)),                     # c9t
                    np.ascontiguousarray(w.sum(axis=1), dtype=np.int64),                  # wrow
                    np.ascontiguousarray(init, dtype=idt)),                               # init
            rq=(np.ascontiguousarray(np.stack([bias, cp, cn, total, left, sh, code]).astype(np.int64)),  # P64
                np.ascontiguousarray(np.stack([tile(cp), tile(cn), tile(total)]).astype(np.int64)),   # T64
                M32, tile(M32), np.ascontiguousarray(sc32, np.float32), tile(sc32).astype(np.float32),
                np.ascontiguousarray(sc64, np.float64)))
    return prep


def _call(plan, p, x):
    """(output shape, multiply-adds, kernel arguments after x) for an input shape, kept per plan for
    a few recent shapes; None when not covered (k > 1 needs stride 1: both come from the plan's
    strides, so never)."""
    return per_shape(plan, ("dw", x.dtype.str), x.shape, _build_call, p, x.shape)


def _build_call(plan, p, shape):
    fp = plan.fplan
    win = resolve_window(shape[1:3], (p["kh"], p["kw"]), ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1),
                         fp.pads, fp.auto_pad, where=fp.name)
    oh, ow = int(win.out[0]), int(win.out[1])
    g = dict(p["head"], sh=win.strides[0], sw=win.strides[1], dh=win.dilations[0], dw=win.dilations[1],
             pt=win.pad_begin[0], pl=win.pad_begin[1], oh=oh, ow=ow)
    geo = np.array([int(g[n]) for n in GEO], np.int64)
    out_shape = (shape[0], oh, ow, p["oc"])
    work = int(np.prod(out_shape)) * p["kh"] * p["kw"]
    ok = shape[-1] == p["cin"] and (g["k"] == 1 or g["sw"] == 1)
    return (out_shape, work, (*p["arrays"], geo, *p["rq"])) if ok else None


def fast_depthwise(plan, x) -> np.ndarray | None:
    x = np.ascontiguousarray(x)
    fp = plan.fplan
    if fp.group != 0 or fp.layout != "NHWC" or x.ndim != 4 or plan.w is None or x.dtype.kind not in "iu":
        return None
    p = _dw_prep(plan, x.shape[-1], x.dtype)
    if p is None:
        return None
    if fp.kernel_shape is not None and tuple(fp.kernel_shape) != (p["kh"], p["kw"]):
        return None
    call = _call(plan, p, x)
    if call is None:
        return None
    out_shape, work, args = call
    out = np.empty(out_shape, p["out_dtype"])
    if out.size == 0:
        return out
    threads = kernel_threads(work)
    if threads <= 1:
        dw_fused(1, x, *args, out.reshape(-1))
    else:
        with numba_threads(threads):
            dw_fused(threads, x, *args, out.reshape(-1))
    return out
