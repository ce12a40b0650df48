"""GRU variant ``ort_float``: ONNX Runtime 1.32's CPU GRU on float32 (DeepCpuGruOp,
onnxruntime/core/providers/cpu/rnn/deep_cpu_gru.cc and the deepcpu helpers of rnn_helpers.cc), for the
default activations (Sigmoid, Tanh), both values of ``linear_before_reset`` and constant or run-time
weights (ORT does not prepack GRU weights).

Numeric contract (float32, per direction, rows in ORT's processing order; ``sgemm`` is MLAS's unpacked
SGEMM with B transposed, float_sgemm.mlas_sgemm, on the session's intra-op threads):

* G = sgemm(X, W^T) once for all max(sequence_lens) * batch rows (the row count sets MLAS's thread
  split; the reverse direction first reverses each row's first sequence_lens steps);
* per step: G[:, :2H] += sgemm(H_prev, R_zr^T) (beta 1: each K block fl(acc + G); one row: the M1
  transposed-B kernel adding its reduced sum once);
* linear_before_reset: L = sgemm(H_prev, R_h^T) added onto Rb_h (beta 1; beta 0 without a bias);
* reset gate: v = clip(fl(G_r + (Wb_r + Rb_r))) (bias summed once in float32; clip = the attribute
  or FLT_MAX, min then max, so a NaN becomes +FLT_MAX when there is a bias), clamped to +-20, then
  rnn_helpers' rational polynomial on x = 0.5 v (no FMA: ORT's generic C++ build):
  x2 = x * x, p = fl(x2 * a13 + a11) ... fl(x2 * p + a1), p = x * p, q likewise with b6..b0,
  S = fl(fl(H_prev * 0.5) * fl(1 + fl(p / q))) (L instead of H_prev with linear_before_reset);
* G_h += sgemm(S, R_h^T) (beta 1), or G_h = fl(G_h + S) with linear_before_reset;
* update gate: z = MlasComputeLogistic(clip(fl(G_z + (Wb_z + Rb_z)))) (float_activation.mlas_sigmoid);
* output: v = clip(fl(G_h + b_h)) (b_h = Wb_h + Rb_h, or Wb_h alone with linear_before_reset),
  clamped to +-10, the same polynomial on x = v giving t = fl(p / q);
  H = fl(fl(fl(1 - z) * t) + fl(z * H_prev));
* rows past their sequence_lens stop (zeros in Y, their last H in Y_h).

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_gru_norm.py).  Other activations,
``layout`` 1 (which ORT's GRU refuses) and other dtypes run the generic kernel
(kernels/float/recurrent.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import rnn_checked_inputs, rnn_default_float
from .float_activation import mlas_sigmoid
from .float_conv import physical_cores
from .float_sgemm import mlas_sgemm, mlas_sgemm_packed
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
_FLT_MAX = float(np.finfo(np.float32).max)
_DEFAULT = ("sigmoid", "tanh")
# rnn_helpers.cc's tanh coefficients: p = x * (a1 + a3 x^2 + ... + a13 x^12), q = b0 + ... + b6 x^6.
_P = np.array([-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
               1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03], _F)
_Q = np.array([1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03], _F)


@dataclass(frozen=True)
class OrtGruPlan:
    generic: Any          # the generic float GRU (Delegate): attributes and every other case
    where: str
    n_dir: int
    direction: str
    hidden: int
    clip: float           # the attribute, or FLT_MAX (ORT's default)
    lbr: bool             # linear_before_reset
    threads: int
    packed_w: bool        # W / R constant: ORT prepacks them (MlasGemmPackB) and runs the packed SGEMM
    packed_r: bool
    executed_by: str = "ORT DeepCPU GRU (MLAS SGEMMs, rnn_helpers polynomial gates, MLAS sigmoid)"


def _prepare(node, ctx):
    d, found = rnn_default_float(node, ctx, _DEFAULT)
    if found is None or int(node.attrs.get("layout", 0)) != 0:  # ORT's GRU refuses layout 1
        return d
    x, w, r, n_dir = found
    hid = node.attrs.get("hidden_size")
    if hid is None and w.shape is not None and len(w.shape) == 3 and isinstance(w.shape[1], int):
        hid = w.shape[1] // 3
    if hid is None:
        return d
    clip = node.attrs.get("clip")
    return OrtGruPlan(d, f"node '{node.name}' (GRU)", n_dir, str(node.attrs.get("direction", "forward")),
                      int(hid), _FLT_MAX if clip is None else float(clip),
                      bool(int(node.attrs.get("linear_before_reset", 0))), physical_cores(),
                      w.const is not None, r.const is not None)


@numba.njit(cache=True)
def _poly(v, bound, half):  # pragma: no cover - compiled
    """rnn_helpers' rational tanh on v clamped to +-bound (x = 0.5 v when ``half``); every step one
    float32 rounding (no FMA).  Returns p / q rounded to float32."""
    out = np.empty_like(v)
    for i in range(v.size):
        x = v[i]
        if x < -bound:
            x = np.float32(-bound)
        elif x > bound:
            x = np.float32(bound)
        if half:
            x = np.float32(np.float32(0.5) * x)
        x2 = np.float32(x * x)
        p = np.float32(np.float32(x2 * _P[0]) + _P[1])
        for k in range(2, _P.size):
            p = np.float32(np.float32(x2 * p) + _P[k])
        p = np.float32(x * p)
        q = np.float32(np.float32(x2 * _Q[0]) + _Q[1])
        for k in range(2, _Q.size):
            q = np.float32(np.float32(x2 * q) + _Q[k])
        out[i] = np.float32(p / q)
    return out


def _gate_in(p, bias, clip):
    """clip_add_bias (min then max: a NaN sum becomes +clip) or clip_ignore_bias (NaN kept)."""
    p = np.asarray(p, _F)
    c = _F(clip)
    if bias is None:
        return np.where(p > c, c, np.where(p < -c, -c, p)).astype(_F)
    x = (p + bias).astype(_F)
    x = np.where(x < c, x, c)
    return np.where(-c < x, x, -c).astype(_F)


def _poly2(v, bound, half):
    v = np.ascontiguousarray(v, _F)
    return _poly(v.reshape(-1), np.float32(bound), half).reshape(v.shape)


def _reverse_rows(x, lens):
    """ORT's ReverseSequence: each row's first lens steps reversed, later steps kept."""
    out = x.copy()
    for b, n in enumerate(lens):
        out[:n, b] = x[:n, b][::-1]
    return out


def _direction(plan, xs, wt, rzr_t, rh_t, lens, reverse, bias, h):
    """One direction over x (T, B, I); returns (Y (T, B, H) in input order, final H)."""
    t_len, batch, _ = xs.shape
    hid, thr = plan.hidden, plan.threads
    max_len = int(lens.max())
    if reverse:
        xs = _reverse_rows(xs, lens)
    xr = xs[:max_len].reshape(max_len * batch, -1)
    g = mlas_sgemm_packed(xr, wt) if plan.packed_w else mlas_sgemm(xr, wt, thr, trans_b=True)
    g = g.reshape(max_len, batch, 3 * hid) if g is not None else np.zeros((max_len, batch, 3 * hid), _F)
    b_z = b_r = b_h = b_rh = None
    if bias is not None:
        wb, rb = bias[:3 * hid], bias[3 * hid:]
        b_z = (wb[:hid] + rb[:hid]).astype(_F)
        b_r = (wb[hid:2 * hid] + rb[hid:2 * hid]).astype(_F)
        b_h = wb[2 * hid:] if plan.lbr else (wb[2 * hid:] + rb[2 * hid:]).astype(_F)
        b_rh = rb[2 * hid:]
    y = np.zeros((t_len, batch, hid), _F)
    min_len = min(t_len, int(lens.min()))
    col = hid == 1

    def rgemm(a, bt, c, column_ok):  # H_prev / S times R^T: packed when R is constant
        if plan.packed_r:
            return mlas_sgemm_packed(a, bt, c=c)
        return mlas_sgemm(a, bt, thr, trans_b=True, c=c, column_ok=column_ok)
    for s in range(max_len):
        zr = rgemm(h, rzr_t, g[s, :, :2 * hid].copy(), False)
        if zr is None:
            zr = g[s, :, :2 * hid].copy()
        if plan.lbr:
            lin = None if b_rh is None else np.repeat(b_rh[None, :], batch, axis=0).astype(_F)
            lin = rgemm(h, rh_t, lin, col)
            if lin is None:
                lin = np.zeros((batch, hid), _F)
            src = lin
        else:
            src = h
        t_r = _poly2(_gate_in(zr[:, hid:], b_r, plan.clip), 20.0, True)
        cur = ((src * _F(0.5)).astype(_F) * (_F(1) + t_r).astype(_F)).astype(_F)
        gh = g[s, :, 2 * hid:].copy()
        if plan.lbr:
            gh = (gh + cur).astype(_F)
        else:
            gh = rgemm(cur, rh_t, gh, False)
        z = mlas_sigmoid(_gate_in(zr[:, :hid], b_z, plan.clip))
        t_h = _poly2(_gate_in(gh, b_h, plan.clip), 10.0, False)
        h_new = (((_F(1) - z).astype(_F) * t_h).astype(_F) + (z * h).astype(_F)).astype(_F)
        active = (s < min_len) | (s < lens)
        h = np.where(active[:, None], h_new, h).astype(_F)
        for b in np.flatnonzero(active):
            y[lens[b] - 1 - s if reverse else s, b] = h[b]
    return y, h


@kernel("GRU", VARIANT, prepare=_prepare)
def ort_gru(plan, x, w, r, b=None, seq_lens=None, h0=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, w, r, b, seq_lens, h0)
    checked = rnn_checked_inputs(plan, 3, x, w, r, seq_lens)
    if checked is None:
        return plan.generic.kernel.run(plan.generic.plan, x, w, r, b, seq_lens, h0)
    x, w, r, lens = checked
    hid = plan.hidden
    t_len, batch = x.shape[0], x.shape[1]
    y = np.zeros((t_len, plan.n_dir, batch, hid), _F)
    y_h = np.zeros((plan.n_dir, batch, hid), _F)
    if t_len == 0 or batch == 0 or lens.max() == 0:
        return y, y_h
    for k in range(plan.n_dir):
        reverse = plan.direction == "reverse" or k == 1
        bias = None if b is None else np.asarray(b[k], _F)
        h = np.zeros((batch, hid), _F) if h0 is None else np.array(h0[k], _F)
        rk = np.asarray(r[k], _F)
        y[:, k], last = _direction(plan, x, np.ascontiguousarray(w[k].T), np.ascontiguousarray(rk[:2 * hid].T),
                                   np.ascontiguousarray(rk[2 * hid:].T), lens, reverse, bias, h)
        y_h[k] = np.where((lens > 0)[:, None], last, _F(0))
    return y, y_h
