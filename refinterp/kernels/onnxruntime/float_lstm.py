"""LSTM variant ``ort_float``: ONNX Runtime 1.32's CPU LSTM on float32 (DeepCPULstmOp,
onnxruntime/core/providers/cpu/rnn/deep_cpu_lstm.cc, uni_directional_lstm.cc, rnn_helpers.cc), for
constant W / R (which ORT prepacks) and the default activations (Sigmoid, Tanh, Tanh).

Numeric contract (float32, per direction, rows in ORT's processing order):

* gates_x = X @ W^T for every step at once: MLAS's packed-B SGEMM (float_sgemm.mlas_sgemm_packed);
* per step, gates = gates_x[t] + H @ R^T: the same packed kernel with beta 1 -- each K block of 256
  added to the value in place, fl(acc + C) (so Xw enters before the recurrent sum is finished);
* per gate, in the order i, f, c, C, o, H: an optional peephole term p = fl(p + fl(C * P)) (C_{t-1}
  for i and f, the new C for o); then fl(p + (Wb + Rb)) with Wb + Rb summed once in float32, clipped
  to +-clip when the attribute is set (no bias: only the clip); i, f, o = MlasComputeLogistic, the cell
  input and the output's tanh = MlasComputeTanh (float_activation.py); input_forget: f = fl(1 - i);
* C = fl(fl(C_{t-1} * f) + fl(i * g)) (no FMA: ORT's generic C++ build), H = fl(tanh(C) * o);
* rows past their sequence_lens stop (zeros in Y, their last H / C in Y_h / Y_c), as the generic
  kernel does; the reverse direction runs each row's steps backwards.

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_ops.py).  Run-time weights,
other activations and other dtypes run the generic kernel (kernels/float/recurrent.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import InputError
from .common import rnn_default_float
from .float_activation import mlas_sigmoid, mlas_tanh
from .float_sgemm import PACKED_STRIDE_K, _sgemm_segment, mlas_sgemm_packed
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32
_DEFAULT = ("sigmoid", "tanh", "tanh")


@dataclass(frozen=True)
class OrtLstmPlan:
    generic: Any          # the generic float LSTM (Delegate): attributes and every other case
    where: str
    n_dir: int
    direction: str
    hidden: int
    clip: float | None
    input_forget: bool
    layout: int
    wt: tuple             # per direction W^T (I, 4H), float32 contiguous
    rt: tuple             # per direction R^T (H, 4H)
    executed_by: str = "ORT DeepCPU LSTM (packed MLAS GEMMs, MLAS sigmoid / tanh)"


def _prepare(node, ctx):
    d, found = rnn_default_float(node, ctx, _DEFAULT)
    if found is None or found[1].const is None or found[2].const is None:
        return d
    x, w, r, n_dir = found
    wc, rc = np.asarray(w.const, _F), np.asarray(r.const, _F)
    if wc.ndim != 3 or rc.ndim != 3 or wc.shape[0] != n_dir or wc.shape[1] % 4:
        return d
    hid = wc.shape[1] // 4
    clip = node.attrs.get("clip")
    return OrtLstmPlan(d, f"node '{node.name}' (LSTM)", n_dir, str(node.attrs.get("direction", "forward")), hid,
                       None if clip is None else float(clip), bool(int(node.attrs.get("input_forget", 0))),
                       int(node.attrs.get("layout", 0)),
                       tuple(np.ascontiguousarray(wc[k].T) for k in range(n_dir)),
                       tuple(np.ascontiguousarray(rc[k].T) for k in range(n_dir)))


def _bias_clip(p, bias, clip):
    if bias is not None:
        p = (p + bias).astype(_F)
    if clip is not None:
        p = np.maximum(np.minimum(p, _F(clip)), _F(-clip)).astype(_F)
    return p


def lstm_cell(g, hid, bias, c, peep, clip, input_forget):
    """ORT's GateComputations for the rows of ``g`` (rows, 4H: the i, o, f, c pre-activations without
    the bias) and the previous cell state ``c``; returns (h, c) (module docstring)."""
    pi, po, pf, pc = (g[:, j * hid:(j + 1) * hid] for j in range(4))
    bi, bo, bf, bc = (None, None, None, None) if bias is None else (bias[j * hid:(j + 1) * hid] for j in range(4))
    if peep is not None:
        pi = (pi + (c * peep[0]).astype(_F)).astype(_F)
    i = mlas_sigmoid(_bias_clip(pi, bi, clip))
    if input_forget:
        f = (_F(1) - i).astype(_F)
    else:
        if peep is not None:
            pf = (pf + (c * peep[2]).astype(_F)).astype(_F)
        f = mlas_sigmoid(_bias_clip(pf, bf, clip))
    gg = mlas_tanh(_bias_clip(pc, bc, clip))
    c_new = ((c * f).astype(_F) + (i * gg).astype(_F)).astype(_F)
    if peep is not None:
        po = (po + (c_new * peep[1]).astype(_F)).astype(_F)
    o = mlas_sigmoid(_bias_clip(po, bo, clip))
    return (mlas_tanh(c_new) * o).astype(_F), c_new


def direction_inputs(k: int, batch: int, hid: int, b, h0, c0, p):
    """(bias Wb + Rb summed once in float32 or None, initial h, initial c, peepholes (3, H) or None) of
    direction ``k``."""
    bias = None
    if b is not None:
        bb = np.asarray(b[k], _F)
        bias = (bb[:4 * hid] + bb[4 * hid:]).astype(_F)
    h = np.zeros((batch, hid), _F) if h0 is None else np.array(h0[k], _F)
    c = np.zeros((batch, hid), _F) if c0 is None else np.array(c0[k], _F)
    peep = None if p is None else np.asarray(p[k], _F).reshape(3, hid)
    return bias, h, c, peep


def step_order(lens, t_len: int, reverse: bool) -> np.ndarray:
    """(T, B): the input step each row takes at each processing step (a reverse row runs its own
    sequence_lens steps backwards)."""
    order = np.empty((t_len, len(lens)), np.int64)
    for s in range(t_len):
        order[s] = np.clip(np.where(reverse, lens - 1 - s, s), 0, t_len - 1)
    return order


def _direction(plan, k, xs, lens, reverse, bias, h, c, peep):
    """One direction over x (T, B, I); returns (Y (T, B, H), h, c)."""
    t_len, batch, _ = xs.shape
    hid = plan.hidden
    rows = np.arange(batch)
    order = step_order(lens, t_len, reverse)
    gx = mlas_sgemm_packed(xs[order, rows].reshape(t_len * batch, -1), plan.wt[k]).reshape(t_len, batch, 4 * hid)
    y = np.zeros((t_len, batch, hid), _F)
    rt = plan.rt[k]
    for s in range(t_len):
        g = np.ascontiguousarray(gx[s])
        _sgemm_segment(np.ascontiguousarray(h), rt, g, 0, batch, 0, 4 * hid, PACKED_STRIDE_K, True, 1.0)
        h_new, c_new = lstm_cell(g, hid, bias, c, peep, plan.clip, plan.input_forget)
        active = (s < lens)[:, None]
        h = np.where(active, h_new, h).astype(_F)
        c = np.where(active, c_new, c).astype(_F)
        for b in np.flatnonzero(active[:, 0]):
            y[order[s, b], b] = h[b]
    return y, h, c


@kernel("LSTM", VARIANT, prepare=_prepare)
def ort_lstm(plan, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, w, r, b, seq_lens, h0, c0, p)
    x = np.asarray(x)
    if x.dtype != _F or x.ndim != 3:
        return plan.generic.kernel.run(plan.generic.plan, x, w, r, b, seq_lens, h0, c0, p)
    if plan.layout:
        x = np.swapaxes(x, 0, 1)
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    t_len, batch = x.shape[0], x.shape[1]
    hid = plan.hidden
    if x.shape[2] != plan.wt[0].shape[0]:
        raise InputError(f"{plan.where}: X has {x.shape[2]} features, W expects {plan.wt[0].shape[0]}")
    lens = np.full(batch, t_len, np.int64) if seq_lens is None else np.asarray(seq_lens).astype(np.int64)
    if np.any(lens < 0) or np.any(lens > t_len):
        raise InputError(f"{plan.where}: sequence_lens {lens.tolist()} outside [0, {t_len}]")
    y = np.zeros((t_len, plan.n_dir, batch, hid), _F)
    y_h = np.zeros((plan.n_dir, batch, hid), _F)
    y_c = np.zeros((plan.n_dir, batch, hid), _F)
    for k in range(plan.n_dir):
        reverse = plan.direction == "reverse" or k == 1
        bias, h, c, peep = direction_inputs(k, batch, hid, b, h0, c0, p)
        y[:, k], y_h[k], y_c[k] = _direction(plan, k, x, lens, reverse, bias, h, c, peep)
    if plan.layout:
        y = np.transpose(y, (2, 0, 1, 3))
        y_h, y_c = np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
    return y, y_h, y_c
