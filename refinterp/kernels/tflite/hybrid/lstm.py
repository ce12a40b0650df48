"""LiteRT dynamic-range ("hybrid") UNIDIRECTIONAL_SEQUENCE_LSTM: float input, states and output,
int8 per-tensor weights (``lstm_eval.cc`` LstmStepHybrid / CalculateLstmGateHybrid), variants
``tflite_hybrid_ref`` / ``tflite_hybrid_opt`` (both resolvers run the same code).

Scope: CIFG, peephole, layer normalization and projection.  Per step, in float32 (order as the
C++)::

    q_x, s_x[b], z_x[b] = per-row quantization of x_t (asymmetric iff asymmetric_quantize_inputs,
                          else symmetric, z = 0);  q_h, s_h, z_h likewise of the previous output h
    gate_g = bias_g;  gate_g += f32(acc_x) * f32(s_x[b] * s_Wg);  gate_g += f32(acc_h) * f32(s_h[b] * s_Rg)
             acc = sum_k W[o, k] q[b, k] - z[b] * sum_k W[o, k]  (exact int32); a part whose input
             row block is all zeros is skipped (LiteRT's IsZeroVector shortcut)
    peephole: gate_g += f32(w_int8 * s_P) * c (the previous c for i and f, the new one for o)
    layer norm: the gate starts at 0 instead of the bias; then (v - mean) * 1 / sqrt(var + 1e-8)
                (sequential float32 sums), times the float coefficients, plus the bias
    i, f, o = sigmoid(gate) (CIFG: i = 1 - f);  g = act(gate_c)
    c = f * c + g * i  (clipped to +-cell_clip when > 0);  m = o * act(c)
    projection: h = bias_P (or 0) + the hybrid product of W_P with m (m quantized per row like x,
                skipped when every m is 0), clipped to +-proj_clip when > 0;  else h = m;  y[t] = h

BIDIRECTIONAL_SEQUENCE_LSTM (bidirectional_sequence_lstm.cc, hybrid path): the same step for the
forward LSTM (inputs 1-17, states 35-36) and for the backward one (inputs 18-34, states 37-38) over
the reversed sequence, its output written back at each input step; outputs as the float kernel
(``kernels/float/recurrent.py``).  Merged batch-major outputs are refused: LiteRT 2.3 fills part of
them from memory it did not write (see README, known differences).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from refinterp.errors import UnsupportedOpError
from ...float.recurrent import CELL_ACTS, sigmoid32
from .common import F32
from .matmul import wrap32
from .quantize import quantize_rows
from ...registry import kernel

_W_IN, _W_REC, _BIAS = (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15)


@dataclass(frozen=True)
class HybridLstmPlan:
    where: str
    act: Callable
    cell_clip: float
    time_major: bool
    asymmetric: bool
    cifg: bool
    w_in: tuple  # per gate: int64 [C, I] or None (CIFG input gate)
    w_rec: tuple  # int64 [C, O]
    sums_in: tuple  # row sums
    sums_rec: tuple
    s_in: tuple  # float32 weight scales
    s_rec: tuple
    bias: tuple  # float32 [C] per gate (zeros when absent)
    peephole: tuple = (None, None, None, None)  # per gate float32 f32(int8 * scale) [C] or None
    layer_norm: tuple = (None, None, None, None)  # per gate float32 coefficients [C] or None
    proj: tuple | None = None  # (int64 W [O, C], row sums, float32 scale, float32 bias or None, clip)


def _int8_const(t) -> bool:
    return t is not None and t.const is not None and t.quant is not None and t.quant.scale.size == 1 \
        and t.dtype == "int8"


def _prepare(node, ctx, ins=None, w=None) -> HybridLstmPlan:
    ins = (list(ctx.inputs) if ins is None else list(ins)) + [None] * 24
    w = w or f"node '{node.name}' (UNIDIRECTIONAL_SEQUENCE_LSTM)"
    act = node.attrs.get("cell_activation", "TANH")
    if act not in CELL_ACTS:
        raise UnsupportedOpError(f"{w}: unknown activation {act}")
    cifg = ins[1] is None
    w_in, w_rec, sums_in, sums_rec, s_in, s_rec, bias = [], [], [], [], [], [], []
    for g in range(4):
        if cifg and g == 0:
            for lst in (w_in, w_rec, sums_in, sums_rec, s_in, s_rec, bias):
                lst.append(None)
            continue
        for slot, ws, ss, ls in ((_W_IN[g], w_in, s_in, sums_in), (_W_REC[g], w_rec, s_rec, sums_rec)):
            t = ins[slot]
            if t is None or t.const is None or t.quant is None or t.quant.scale.size != 1 or t.dtype != "int8":
                raise UnsupportedOpError(f"{w}: the hybrid LSTM needs constant int8 weights with one scale")
            m = np.asarray(t.const, np.int64)
            ws.append(m), ls.append(m.sum(axis=1)), ss.append(F32(t.quant.scale.ravel()[0]))
        b = ins[_BIAS[g]]
        bias.append(np.zeros(w_in[-1].shape[0], F32) if b is None or b.const is None else np.asarray(b.const, F32))
    peep = [None] * 4
    if ins[11] is not None:  # the output gate's peephole decides, as in LiteRT
        for g, slot in ((0, 9), (1, 10), (3, 11)):
            if cifg and g == 0:
                continue
            t = ins[slot]
            if not _int8_const(t):
                raise UnsupportedOpError(f"{w}: hybrid LSTM peephole weights must be constant int8 with one scale")
            peep[g] = (np.asarray(t.const, F32).ravel() * F32(t.quant.scale.ravel()[0])).astype(F32)
    norms = [None] * 4
    if ins[21] is not None:
        for g in range(4):
            if cifg and g == 0:
                continue
            t = ins[20 + g]
            if t is None or t.const is None or t.dtype != "float32":
                raise UnsupportedOpError(f"{w}: hybrid LSTM layer-norm coefficients must be constant float32")
            norms[g] = np.asarray(t.const, F32).ravel()
    proj = None
    if ins[16] is not None:
        t, b = ins[16], ins[17]
        if not _int8_const(t) or (b is not None and b.const is None):
            raise UnsupportedOpError(f"{w}: hybrid LSTM projection weights must be constant int8 with one scale")
        m = np.asarray(t.const, np.int64)
        proj = (m, m.sum(axis=1), F32(t.quant.scale.ravel()[0]),
                None if b is None else np.asarray(b.const, F32).ravel(), float(node.attrs.get("proj_clip", 0.0)))
    return HybridLstmPlan(w, CELL_ACTS[act], float(node.attrs.get("cell_clip", 0.0)),
                          bool(node.attrs.get("time_major", False)),
                          bool(node.attrs.get("asymmetric_quantize_inputs", False)), cifg, tuple(w_in), tuple(w_rec),
                          tuple(sums_in), tuple(sums_rec), tuple(s_in), tuple(s_rec), tuple(bias),
                          tuple(peep), tuple(norms), proj)


def _mean_stddev(v: np.ndarray) -> np.ndarray:
    """PortableMeanStddevNormalization per row: sequential float32 sums, 1e-8 added to the variance."""
    n = v.shape[1]
    out = np.empty_like(v)
    for r in range(v.shape[0]):
        row = v[r]
        s = F32(0)
        for x in row:
            s = F32(s + x)
        mean = F32(s / F32(n))
        sq = F32(0)
        for x in row:
            d = F32(x - mean)
            sq = F32(sq + F32(d * d))
        inv = F32(F32(1) / F32(np.sqrt(F32(F32(sq / F32(n)) + F32(1e-8)))))
        out[r] = ((row - mean).astype(F32) * inv).astype(F32)
    return out


def _hybrid_product(q, s, z, w, sums, sw) -> np.ndarray:
    """The float contribution of one hybrid matmul: f32(acc) * f32(s_row * s_w), acc exact in int32."""
    acc = wrap32(q.astype(np.int64) @ w.T - z.astype(np.int64)[:, None] * sums[None, :])
    return (acc.astype(F32) * (s * sw).astype(F32)[:, None]).astype(F32)


@kernel("UnidirectionalSequenceLSTM", ("tflite_hybrid_ref", "tflite_hybrid_opt"), prepare=_prepare)
def hybrid_lstm(plan: HybridLstmPlan, x, *rest):
    h0, c0 = rest[17], rest[18]
    x = np.asarray(x, F32)
    seq = x if plan.time_major else np.swapaxes(x, 0, 1)  # [T, B, I]
    n_t, batch = seq.shape[0], seq.shape[1]
    n_cell, n_out = plan.w_rec[1].shape  # n_out: the projection's width when there is one
    h = np.zeros((batch, n_out), F32) if h0 is None else np.array(h0, F32).reshape(batch, n_out)
    c = np.zeros((batch, n_cell), F32) if c0 is None else np.array(c0, F32).reshape(batch, n_cell)
    outs = []
    for t in range(n_t):
        xt = np.ascontiguousarray(seq[t])
        x_zero, h_zero = not xt.any(), not h.any()
        qx, sx, zx = quantize_rows(xt, plan.asymmetric)
        qh, sh, zh = quantize_rows(h, plan.asymmetric)

        def gate(g: int) -> np.ndarray:  # reads the cell state c of the enclosing step
            ln = plan.layer_norm[g]
            v = (np.zeros((batch, n_cell), F32) if ln is not None else
                 np.broadcast_to(plan.bias[g], (batch, n_cell)).astype(F32))
            for skip, q, s, z, w, sums, sw in ((x_zero, qx, sx, zx, plan.w_in[g], plan.sums_in[g], plan.s_in[g]),
                                               (h_zero, qh, sh, zh, plan.w_rec[g], plan.sums_rec[g], plan.s_rec[g])):
                if skip:
                    continue
                v = (v + _hybrid_product(q, s, z, w, sums, sw)).astype(F32)
            if plan.peephole[g] is not None:
                v = (v + (plan.peephole[g] * c).astype(F32)).astype(F32)
            if ln is not None:
                v = ((_mean_stddev(v) * ln).astype(F32) + plan.bias[g]).astype(F32)
            return v

        i = None if plan.cifg else sigmoid32(gate(0))
        f = sigmoid32(gate(1))
        g = plan.act(gate(2)).astype(F32)
        c = (f * c).astype(F32)
        c = (c + g * ((F32(1) - f).astype(F32) if plan.cifg else i)).astype(F32)
        if plan.cell_clip > 0:
            c = np.clip(c, F32(-plan.cell_clip), F32(plan.cell_clip)).astype(F32)
        o = sigmoid32(gate(3))
        h = (o * plan.act(c).astype(F32)).astype(F32)
        if plan.proj is not None:
            wp, sums_p, swp, bp, clip = plan.proj
            out = np.zeros((batch, wp.shape[0]), F32) if bp is None else np.broadcast_to(bp, (batch, wp.shape[0]))
            out = out.astype(F32)
            if h.any():
                qm, sm, zm = quantize_rows(h, plan.asymmetric)
                out = (out + _hybrid_product(qm, sm, zm, wp, sums_p, swp)).astype(F32)
            h = np.clip(out, F32(-clip), F32(clip)).astype(F32) if clip > 0 else out
        outs.append(h)
    y = np.stack(outs) if outs else np.zeros((0, batch, n_out), F32)
    if not plan.time_major:
        y = np.swapaxes(y, 0, 1)
    return np.ascontiguousarray(y), h, c


@dataclass(frozen=True)
class HybridBiLstmPlan:
    fw: HybridLstmPlan
    bw: HybridLstmPlan
    merge: bool


def _prepare_bi(node, ctx) -> HybridBiLstmPlan:
    ins = list(ctx.inputs) + [None] * (48 - len(ctx.inputs))
    w = f"node '{node.name}' (BIDIRECTIONAL_SEQUENCE_LSTM)"
    if any(ins[k] is not None for k in range(39, 48)):
        raise UnsupportedOpError(f"{w}: the auxiliary input is not supported")
    merge = bool(node.attrs.get("merge_outputs", False))
    if merge and not node.attrs.get("time_major", False):
        raise UnsupportedOpError(f"{w}: merged batch-major outputs are not modelled (LiteRT 2.3 fills part "
                                 f"of them from memory it did not write)")
    fw = _prepare(node, ctx, [ins[0]] + ins[1:18] + [None, None], w)
    bw = _prepare(node, ctx, [ins[0]] + ins[18:35] + [None, None], w)
    return HybridBiLstmPlan(fw, bw, merge)


@kernel("BidirectionalSequenceLSTM", ("tflite_hybrid_ref", "tflite_hybrid_opt"), prepare=_prepare_bi)
def hybrid_bilstm(plan: HybridBiLstmPlan, x, *rest):
    args = list(rest) + [None] * (47 - len(rest))
    t_axis = 0 if plan.fw.time_major else 1
    y_fw, h_fw, c_fw = hybrid_lstm(plan.fw, x, *args[0:17], args[34], args[35])
    y_bw, h_bw, c_bw = hybrid_lstm(plan.bw, np.flip(np.asarray(x), axis=t_axis), *args[17:34], args[36], args[37])
    y_bw = np.ascontiguousarray(np.flip(y_bw, axis=t_axis))
    if plan.merge:
        return (np.concatenate([y_fw, y_bw], axis=-1), h_fw, c_fw, h_bw, c_bw)
    return (y_fw, y_bw, h_fw, c_fw, h_bw, c_bw)
