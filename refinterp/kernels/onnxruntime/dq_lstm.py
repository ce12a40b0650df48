"""``com.microsoft.DynamicQuantizeLSTM`` -- the LSTM ONNX Runtime's ``quantize_dynamic`` writes -- as ORT
1.32's CPU kernel computes it (contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc, the DeepCPU
UniDirectionalLstm with the quantized ComputeGemm of rnn_helpers.cc).

Inputs: X, W (D, I, 4H) and R (D, H, 4H) int8 / uint8 (already transposed, gates i, o, f, c), B, sequence_lens,
initial_h, initial_c, P (float32), W_scale / R_scale (D) or (D, 4H), W_zero_point / R_zero_point the same
shapes (int8: all 0; uint8 per column: all equal -- ORT refuses other zero points, so does this kernel).

Numeric contract, per direction (float32 unless stated):

* every GEMM quantizes its float operand A (M x K) per tensor as DynamicQuantizeLinear does
  (lo = min(0, min A), hi = max(0, max A), s = (hi - lo) / 255, z = RNE(clamp(-lo / s)); q = clamp(RNE(a / s)
  + z), quantize.py), then acc = sum_k (q - z)(w - z_w) exactly (int32; AVX-512 VNNI or the U8U8 kernels:
  no int16 saturation) and scales it: fl(fl(acc) * fl(s * s_w[n]));
* the input GEMM runs once over the first max(sequence_lens) steps of X, rows in processing order
  (a reverse direction reverses each row's own steps; the parameters come from all those values);
* each step's recurrent GEMM quantizes the previous H and adds its scaled product onto the input
  GEMM's value, fl(fl(acc * scale) + x); ORT splits the batch rows into ceil(B / T) chunks (T the
  intra-op threads, the physical cores at ORT's defaults) when B > 4 or (B >= 2 and H <= 256), and
  each chunk quantizes its own rows;
* the previous H of a row past its sequence length is 0 when the node outputs Y (ORT zeroes that
  row's output, which is the next step's H), else its last H; a row of length 0 without Y output
  feeds ORT's never-written Y_h buffer from the second step on (a finding: stale memory moves the
  other rows of its chunk through the shared quantization; measured once, 2 rows of 6 differed in a
  process that had run other sessions before) -- zero here, as in a fresh allocation;
* the gates as the float LSTM (float_lstm.lstm_cell: bias Wb + Rb, clip, peepholes, input_forget,
  MLAS sigmoid / tanh).

Variant ``ort_float`` (onnxruntime-cpu) splits the rows over the machine's physical cores; ``float``
(the contrib op's semantics for the other schemes) takes one chunk.  Non-default activations are
refused.  Verified bit for bit against onnxruntime 1.32.0 on models ORT's quantize_dynamic wrote
(tests/conformance/test_ort_dq_lstm.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, ModelError, UnsupportedOpError
from refinterp.quant import mlas
from .common import MS
from .float_conv import physical_cores
from .float_lstm import direction_inputs, lstm_cell, step_order
from ..registry import kernel

_F = np.float32
_DEFAULT = ("sigmoid", "tanh", "tanh")


@dataclass(frozen=True)
class DqLstmPlan:
    where: str
    n_dir: int
    direction: str
    hidden: int
    clip: float | None
    input_forget: bool
    output_sequence: bool   # Y is an output of the node
    threads: int            # ORT's intra-op threads (1: one chunk)


def _weights_zero_point(zp, signed: bool, where: str, name: str) -> np.ndarray:
    """The one zero point per direction ORT uses (its first element), after ORT's checks."""
    z = np.asarray(zp).astype(np.int64)
    z2 = z.reshape(z.shape[0], -1)
    if signed and np.any(z2 != 0):
        raise ModelError(f"{where}: {name} zero point must be 0 for int8 weights (ONNX Runtime refuses it)")
    if np.any(z2 != z2[:, :1]):
        raise ModelError(f"{where}: {name} zero points must be equal per direction (ONNX Runtime refuses others)")
    return z2[:, 0]


def _prepare(node, ctx, threads: int) -> DqLstmPlan:
    where = f"node '{node.name}' ({node.op})"
    acts = node.attrs.get("activations")
    n_dir = 2 if str(node.attrs.get("direction", "forward")) == "bidirectional" else 1
    if acts is not None and tuple(str(a).lower() for a in acts) != _DEFAULT * n_dir:
        raise UnsupportedOpError(f"{where}: activations {list(acts)} are not modelled (only the defaults)")
    if int(node.attrs.get("layout", 0) or 0):
        raise UnsupportedOpError(f"{where}: layout 1 is not modelled")
    hid = node.attrs.get("hidden_size")
    if hid is None:
        raise ModelError(f"{where}: the hidden_size attribute is missing")
    clip = node.attrs.get("clip")
    return DqLstmPlan(where, n_dir, str(node.attrs.get("direction", "forward")), int(hid),
                      None if clip is None else float(clip), bool(int(node.attrs.get("input_forget", 0) or 0)),
                      bool(node.outputs and node.outputs[0]), threads)


def _qgemm(a, w, zw: int, ws) -> np.ndarray:
    """fl(fl(acc) * fl(s_a * s_w)) of the float32 rows ``a`` against weights ``w`` (K, N)."""
    sa, za = mlas.quantization_parameter(a, 0, 255)
    qa = mlas.quantize_linear(a, sa, za, 0, 255).astype(np.int64) - za
    acc = np.matmul(qa.astype(np.float64), (w.astype(np.int64) - zw).astype(np.float64))  # exact below 2^53
    return (acc.astype(_F) * (_F(sa) * ws).astype(_F)).astype(_F)


def _chunks(plan, batch: int) -> list[tuple[int, int]]:
    if plan.threads > 1 and (batch > 4 or (batch >= 2 and plan.hidden <= 256)):
        n = -(-batch // plan.threads)
        return [(s, min(batch, s + n)) for s in range(0, batch, n)]
    return [(0, batch)]


def _direction(plan, xs, lens, reverse, w, zw, ws, r, zr, rs, bias, h, c, peep):
    """One direction over x (T, B, I); returns (Y (T, B, H), Y_h, Y_c)."""
    t_len, batch, _ = xs.shape
    hid = plan.hidden
    y = np.zeros((t_len, batch, hid), _F)
    y_h = np.zeros((batch, hid), _F)
    y_c = np.zeros((batch, hid), _F)
    steps = int(lens.max()) if batch else 0
    if steps == 0:
        return y, y_h, y_c
    order = step_order(lens, t_len, reverse)[:steps]
    rows = np.arange(batch)
    # ORT quantizes its (reversed) buffer of the first `steps` steps: the same values as xs[:steps]
    sa, za = mlas.quantization_parameter(xs[:steps], 0, 255)
    qx = mlas.quantize_linear(xs[order, rows].reshape(steps * batch, -1), sa, za, 0, 255).astype(np.int64) - za
    acc = np.matmul(qx.astype(np.float64), (w.astype(np.int64) - zw).astype(np.float64))
    gx = (acc.astype(_F) * (_F(sa) * ws).astype(_F)).astype(_F).reshape(steps, batch, 4 * hid)
    chunks = _chunks(plan, batch)
    for s in range(steps):
        g = np.empty((batch, 4 * hid), _F)
        for lo, hi in chunks:
            g[lo:hi] = (_qgemm(h[lo:hi], r, zr, rs) + gx[s, lo:hi]).astype(_F)
        h_new, c_new = lstm_cell(g, hid, bias, c, peep, plan.clip, plan.input_forget)
        active = s < lens
        c = np.where(active[:, None], c_new, c).astype(_F)
        h_last = np.where(active[:, None], h_new, h).astype(_F)
        for b in np.flatnonzero(active):
            y[order[s, b], b] = h_new[b]
        done = active & (s + 1 == lens)
        y_h[done], y_c[done] = h_last[done], c[done]
        # a row of length 0 without Y reads ORT's Y_h buffer, which it never writes: stale memory in ORT
        # (zero in a fresh allocation, assumed here); with Y its zeroed output row
        idle = _F(0) if plan.output_sequence else np.where((lens == 0)[:, None], _F(0), h)
        h = np.where(active[:, None], h_new, idle).astype(_F)
    return y, y_h, y_c


def _run(plan, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None, w_scale=None, w_zp=None,
         r_scale=None, r_zp=None):
    x = np.asarray(x)
    if x.dtype != _F or x.ndim != 3:
        raise InputError(f"{plan.where}: X must be a float32 tensor of rank 3, got {x.dtype} {list(x.shape)}")
    w, r = np.asarray(w), np.asarray(r)
    hid, n_dir = plan.hidden, plan.n_dir
    if w.shape != (n_dir, x.shape[2], 4 * hid) or r.shape != (n_dir, hid, 4 * hid):
        raise InputError(f"{plan.where}: W {list(w.shape)} / R {list(r.shape)} do not fit X {list(x.shape)} "
                         f"and hidden_size {hid}")
    zw = _weights_zero_point(w_zp, w.dtype == np.int8, plan.where, "W")
    zr = _weights_zero_point(r_zp, r.dtype == np.int8, plan.where, "R")
    wsc = np.asarray(w_scale, _F).reshape(n_dir, -1)
    rsc = np.asarray(r_scale, _F).reshape(n_dir, -1)
    t_len, batch = x.shape[0], x.shape[1]
    lens = np.full(batch, t_len, np.int64) if seq_lens is None else np.asarray(seq_lens).astype(np.int64)
    if lens.shape != (batch,) or np.any(lens < 0) or np.any(lens > t_len):
        raise InputError(f"{plan.where}: sequence_lens {lens.tolist()} outside [0, {t_len}] or not one per row")
    y = np.zeros((t_len, n_dir, batch, hid), _F)
    y_h = np.zeros((n_dir, batch, hid), _F)
    y_c = np.zeros((n_dir, batch, hid), _F)
    for k in range(n_dir):
        reverse = plan.direction == "reverse" or k == 1
        bias, h, c, peep = direction_inputs(k, batch, hid, b, h0, c0, p)
        y[:, k], y_h[k], y_c[k] = _direction(plan, x, lens, reverse, w[k], int(zw[k]), wsc[k], r[k], int(zr[k]),
                                             rsc[k], bias, h, c, peep)
    return y, y_h, y_c


@kernel(MS + "DynamicQuantizeLSTM", "ort_float", prepare=lambda node, ctx: _prepare(node, ctx, physical_cores()),
        raw_inputs=True)
def dq_lstm_ort(plan, *inputs):
    return _run(plan, *inputs)


@kernel(MS + "DynamicQuantizeLSTM", "float", prepare=lambda node, ctx: _prepare(node, ctx, 1), raw_inputs=True)
def dq_lstm_one_chunk(plan, *inputs):
    return _run(plan, *inputs)
