"""RNN variant ``ort_float``: ONNX Runtime 1.32's CPU RNN on float32 (onnxruntime/core/providers/cpu/rnn/
rnn.cc and rnn_activation_functors.h) for the default activation (Tanh).

Numeric contract (float32, per direction; ``sgemm`` is MLAS's unpacked SGEMM with B transposed,
float_sgemm.mlas_sgemm, on the session's intra-op threads; ORT does not prepack RNN weights):

* G = sgemm(X, W^T) for all T * batch rows added onto fl(Wb + Rb) (beta 1: each K block fl(acc + G));
  the reverse direction reads the same G rows, step by step from the end;
* per step: Y = sgemm(H_prev, R^T) (beta 0; zeros at the first step without an initial state), then
  fl(Y + G[t]), clipped to +-clip when the attribute is set;
* H = Tanh(Y) as rnn_activation_functors.h spells it: 2 * Sigmoid(2 y) - 1, Sigmoid(v) = 1 / (1 + e^-v)
  for v >= 0 and e^v / (1 + e^v) below, every operation rounded to float32, e^ = libm expf;
* rows past their sequence_lens keep their previous H (zeros in Y afterwards, as ORT clears them).

Bit-exact with onnxruntime 1.32.0 (tests/conformance/test_ort_float_gru_norm.py).  Other activations
and dtypes run the generic kernel (kernels/float/recurrent.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .common import rnn_checked_inputs, rnn_default_float
from .float_conv import physical_cores
from .float_sgemm import mlas_sgemm
from ..registry import Delegate, kernel

VARIANT = "ort_float"
_F = np.float32


@dataclass(frozen=True)
class OrtRnnPlan:
    generic: Any
    where: str
    n_dir: int
    direction: str
    hidden: int
    clip: float | None
    threads: int
    executed_by: str = "ORT RNN (MLAS SGEMMs, its own float32 tanh through expf)"


def _prepare(node, ctx):
    d, found = rnn_default_float(node, ctx, ("tanh",))
    if found is None or int(node.attrs.get("layout", 0)) != 0:
        return d
    x, w, r, n_dir = found
    hid = node.attrs.get("hidden_size")
    if hid is None:
        return d
    clip = node.attrs.get("clip")
    return OrtRnnPlan(d, f"node '{node.name}' (RNN)", n_dir, str(node.attrs.get("direction", "forward")), int(hid),
                      None if clip is None else float(clip), physical_cores())


@numba.njit(cache=True)
def _ort_tanh(v, out):  # pragma: no cover - compiled
    """2 * Sigmoid(2 v) - 1 in float32, Sigmoid through libm expf (module docstring)."""
    for i in range(v.size):
        t = np.float32(np.float32(2.0) * v[i])
        if t >= 0:
            s = np.float32(np.float32(1.0) / np.float32(np.float32(1.0) + np.float32(math.exp(-t))))
        else:
            e = np.float32(math.exp(t))
            s = np.float32(e / np.float32(np.float32(1.0) + e))
        out[i] = np.float32(np.float32(np.float32(2.0) * s) - np.float32(1.0))


def _tanh(v):
    v = np.ascontiguousarray(v, _F)
    out = np.empty_like(v)
    _ort_tanh(v.reshape(-1), out.reshape(-1))
    return out


@kernel("RNN", VARIANT, prepare=_prepare)
def ort_rnn(plan, x, w, r, b=None, seq_lens=None, h0=None):
    if isinstance(plan, Delegate):
        return plan.kernel.run(plan.plan, x, w, r, b, seq_lens, h0)
    checked = rnn_checked_inputs(plan, 1, x, w, r, seq_lens)
    if checked is None:
        return plan.generic.kernel.run(plan.generic.plan, x, w, r, b, seq_lens, h0)
    x, w, r, lens = checked
    hid = plan.hidden
    t_len, batch = x.shape[0], x.shape[1]
    y = np.zeros((t_len, plan.n_dir, batch, hid), _F)
    y_h = np.zeros((plan.n_dir, batch, hid), _F)
    if t_len == 0 or batch == 0:
        return y, y_h
    for k in range(plan.n_dir):
        reverse = plan.direction == "reverse" or k == 1
        if b is None:
            g = np.zeros((t_len * batch, hid), _F)
        else:
            bb = np.asarray(b[k], _F)
            g = np.repeat((bb[:hid] + bb[hid:]).astype(_F)[None, :], t_len * batch, axis=0)
        g = mlas_sgemm(x.reshape(t_len * batch, -1), np.ascontiguousarray(np.asarray(w[k], _F).T), plan.threads,
                       trans_b=True, c=g).reshape(t_len, batch, hid)
        rt = np.ascontiguousarray(np.asarray(r[k], _F).T)
        h = None if h0 is None else np.array(h0[k], _F)
        for step in range(t_len):
            ts = t_len - 1 - step if reverse else step
            hr = np.zeros((batch, hid), _F) if h is None else \
                mlas_sgemm(h, rt, plan.threads, trans_b=True)
            v = (hr + g[ts]).astype(_F)
            if plan.clip is not None and plan.clip >= 0:
                v = np.maximum(np.minimum(v, _F(plan.clip)), _F(-plan.clip)).astype(_F)
            new = _tanh(v)
            valid = (ts < lens)[:, None]
            prev = np.zeros((batch, hid), _F) if h is None else h
            h = np.where(valid, new, prev).astype(_F)
            y[ts, k] = h
        for bi in range(batch):
            last = 0 if reverse else (lens[bi] - 1 if seq_lens is not None else t_len - 1)
            y_h[k, bi] = y[last, k, bi] if last >= 0 else 0
    if seq_lens is not None:
        for bi in range(batch):
            y[lens[bi]:, :, bi] = 0
    return y, y_h
