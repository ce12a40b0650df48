"""ONNX RNN, GRU and LSTM (float), as the operator spec defines them (opset 14 forms: ``layout``).

Shapes (layout 0; layout 1 swaps the sequence and batch axes of X, Y, initial and final states):
X [T, B, I]; W [D, G*H, I]; R [D, G*H, H]; B [D, 2*G*H] (W biases then R biases); sequence_lens [B];
initial_h [D, B, H] (LSTM also initial_c, and P [D, 3*H] peepholes i, o, f); outputs Y [T, D, B, H],
Y_h [D, B, H] (LSTM also Y_c).  D = 2 for ``direction: bidirectional`` (forward, then reverse).
Gate order in W / R / B: RNN i; GRU z, r, h; LSTM i, o, f, c.

Per step (f, g, h = the direction's activations; defaults Sigmoid / Tanh / Tanh)::

    RNN   H = f(x W^T + H R^T + Wb + Rb)
    GRU   z = f(x Wz^T + H Rz^T + Wbz + Rbz)    r likewise
          n = g(x Wh^T + (r * H) Rh^T + Rbh + Wbh)          linear_before_reset = 0
          n = g(x Wh^T + r * (H Rh^T + Rbh) + Wbh)          linear_before_reset = 1
          H = (1 - z) * n + z * H
    LSTM  i = f(x Wi^T + H Ri^T + Pi * C + Wbi + Rbi)       f likewise (input_forget: f = 1 - i)
          c = g(x Wc^T + H Rc^T + Wbc + Rbc);  C = f * C + i * c
          o = f(x Wo^T + H Ro^T + Po * C + Wbo + Rbo);  H = o * h(C)

``clip`` bounds every gate pre-activation to [-clip, clip].  With ``sequence_lens``, batch row b
runs its first ``len[b]`` steps (the reverse direction from step len[b] - 1 down); later steps
output 0 and leave the state as it was.  Arithmetic in the input dtype (float32: each matmul a BLAS
call, so results match a reference to float rounding, not bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from refinterp.errors import InputError
from ..registry import kernel

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _sigmoid(x):
    with np.errstate(over="ignore"):  # exp(-x) -> inf for x < -88 (float32) gives the exact limit 0
        return 1.0 / (1.0 + np.exp(-x))


def _activation(name: str, alpha, beta):
    n = name.lower()
    if n == "sigmoid":
        return _sigmoid
    if n == "tanh":
        return np.tanh
    if n == "relu":
        return lambda x: np.maximum(x, 0)
    if n == "affine":
        return lambda x: alpha * x + beta
    if n == "leakyrelu":
        return lambda x: np.where(x >= 0, x, alpha * x)
    if n == "thresholdedrelu":
        return lambda x: np.where(x > alpha, x, 0)
    if n == "scaledtanh":
        return lambda x: alpha * np.tanh(beta * x)
    if n == "hardsigmoid":
        return lambda x: np.clip(alpha * x + beta, 0, 1)
    if n == "elu":
        return lambda x: np.where(x >= 0, x, alpha * (np.exp(x) - 1))
    if n == "softsign":
        return lambda x: x / (1 + np.abs(x))
    if n == "softplus":
        return lambda x: np.log1p(np.exp(x))
    return None


# alpha / beta defaults of the activations that take them (ONNX RNN spec)
_AB_DEFAULTS = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
                "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}


@dataclass(frozen=True)
class RnnPlan:
    op: str  # RNN | GRU | LSTM
    where: str
    direction: str
    n_dir: int
    acts: tuple  # per direction, the activation functions (f, g, h as the op uses them)
    clip: float | None
    hidden: int | None
    layout: int
    input_forget: int
    linear_before_reset: int


@dataclass(frozen=True)
class TflLstmPlan:
    act: Callable
    cell_clip: float
    proj_clip: float
    time_major: bool
    where: str
    merge: bool = False  # BIDIRECTIONAL_SEQUENCE_LSTM merge_outputs


def _prepare(node, ctx) -> RnnPlan:
    a = node.attrs
    where = f"node '{node.name}' ({node.op})"
    direction = str(a.get("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise InputError(f"{where}: unknown direction '{direction}'")
    n_dir = 2 if direction == "bidirectional" else 1
    names = [str(x) for x in (a.get("activations") or _DEFAULT_ACTS[node.op] * n_dir)]
    per_dir = len(_DEFAULT_ACTS[node.op])
    if len(names) != per_dir * n_dir:
        raise InputError(f"{where}: {len(names)} activations given, {per_dir * n_dir} expected")
    alphas, betas = list(a.get("activation_alpha") or []), list(a.get("activation_beta") or [])
    acts, ai, bi = [], 0, 0
    for name in names:
        da, db = _AB_DEFAULTS.get(name.lower(), (None, None))
        al = be = None
        if da is not None:
            al = float(alphas[ai]) if ai < len(alphas) else da
            ai += 1
        if db is not None:
            be = float(betas[bi]) if bi < len(betas) else db
            bi += 1
        fn = _activation(name, al, be)
        if fn is None:
            raise InputError(f"{where}: unknown activation '{name}'")
        acts.append(fn)
    return RnnPlan(node.op, where, direction, n_dir, tuple(acts[d * per_dir:(d + 1) * per_dir] for d in range(n_dir)),
                   None if a.get("clip") is None else float(a["clip"]), a.get("hidden_size"),
                   int(a.get("layout", 0)), int(a.get("input_forget", 0)), int(a.get("linear_before_reset", 0)))


def _run(plan, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    op, g = plan.op, _GATES[plan.op]
    x = np.asarray(x)
    dt = x.dtype
    if plan.layout:
        x = np.swapaxes(x, 0, 1)
    t_len, batch = x.shape[0], x.shape[1]
    hid = w.shape[1] // g
    if plan.hidden is not None and int(plan.hidden) != hid:
        raise InputError(f"{plan.where}: hidden_size {plan.hidden} but W has {w.shape[1]} rows for {g} gates")
    n_dir = plan.n_dir
    lens = np.full(batch, t_len, np.int64) if seq_lens is None else np.asarray(seq_lens).astype(np.int64)
    if np.any(lens < 0) or np.any(lens > t_len):
        raise InputError(f"{plan.where}: sequence_lens {lens.tolist()} outside [0, {t_len}]")
    if plan.layout:
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    y = np.zeros((t_len, n_dir, batch, hid), dt)
    y_h = np.zeros((n_dir, batch, hid), dt)
    y_c = np.zeros((n_dir, batch, hid), dt)
    for d in range(n_dir):
        reverse = plan.direction == "reverse" or d == 1
        bias = np.zeros(2 * g * hid, dt) if b is None else np.asarray(b[d], dt)
        h = np.zeros((batch, hid), dt) if h0 is None else np.array(h0[d], dt)
        c = np.zeros((batch, hid), dt) if c0 is None else np.array(c0[d], dt)
        peep = np.zeros(3 * hid, dt) if p is None else np.asarray(p[d], dt)
        acts = plan.acts[d]
        for step in range(t_len):
            active = step < lens  # [B]: rows still inside their sequence
            t_idx = np.where(reverse, lens - 1 - step, step)
            t_idx = np.clip(t_idx, 0, t_len - 1)
            xt = x[t_idx, np.arange(batch)]
            h_new, c_new = _cell(op, plan, acts, xt, h, c, w[d], r[d], bias, peep, hid, dt)
            mask = active[:, None]
            h = np.where(mask, h_new, h).astype(dt)
            c = np.where(mask, c_new, c).astype(dt)
            for bb in np.flatnonzero(active):
                y[t_idx[bb], d, bb] = h[bb]
        y_h[d], y_c[d] = h, c
    if plan.layout:
        y = np.transpose(y, (2, 0, 1, 3))
        y_h, y_c = np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
    return (y, y_h, y_c) if op == "LSTM" else (y, y_h)


def _clip(plan, v):
    c = plan.clip
    return v if c is None else np.clip(v, -c, c)


def _cell(op, plan, acts, xt, h, c, w, r, bias, peep, hid, dt):
    g = _GATES[op]
    wb, rb = bias[:g * hid], bias[g * hid:]
    xw = xt @ w.T + wb  # [B, G*H]
    if op == "RNN":
        return acts[0](_clip(plan, xw + h @ r.T + rb)).astype(dt), c
    if op == "GRU":
        z_r = xw[:, :2 * hid] + h @ r[:2 * hid].T + rb[:2 * hid]
        z = acts[0](_clip(plan, z_r[:, :hid]))
        rr = acts[0](_clip(plan, z_r[:, hid:]))
        rh, rbh = r[2 * hid:], rb[2 * hid:]
        if plan.linear_before_reset:
            pre = xw[:, 2 * hid:] + rr * (h @ rh.T + rbh)
        else:
            pre = xw[:, 2 * hid:] + (rr * h) @ rh.T + rbh
        n = acts[1](_clip(plan, pre))
        return ((1 - z) * n + z * h).astype(dt), c
    gates = xw + h @ r.T + rb  # i, o, f, c
    pi, po, pf = peep[:hid], peep[hid:2 * hid], peep[2 * hid:]
    i = acts[0](_clip(plan, gates[:, :hid] + pi * c))
    f = 1 - i if plan.input_forget else acts[0](_clip(plan, gates[:, 2 * hid:3 * hid] + pf * c))
    cc = acts[1](_clip(plan, gates[:, 3 * hid:]))
    c_new = f * c + i * cc
    o = acts[0](_clip(plan, gates[:, hid:2 * hid] + po * c_new))
    return (o * acts[2](c_new)).astype(dt), c_new.astype(dt)


for _op in _GATES:
    kernel(_op, "float", prepare=_prepare)(_run)


# -- TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (float) ----------------------------------------------------
# Inputs (absent optional ones None): 0 x [B, T, I] ([T, B, I] with time_major); 1-4 input weights
# (input, forget, cell, output gates; input absent = CIFG) [C, I]; 5-8 recurrent weights [C, O];
# 9-11 peepholes (input, forget, output) [C]; 12-15 gate biases [C]; 16 projection [O, C] and 17 its
# bias; 18 output state [B, O]; 19 cell state [B, C]; 20-23 layer-norm coefficients [C].
# Per step, LiteRT lstm_eval.cc (LstmStepFloat), in float32:
#   gate = bias + W x + R h (+ peephole * c);  with layer norm: gate = norm(W x + R h + p*c) * ln + bias
#   i = sigmoid(gate_i) (CIFG: i = 1 - f); f = sigmoid(gate_f); g = act(gate_g)
#   c = f * c + i * g, clipped to +-cell_clip when cell_clip > 0
#   o = sigmoid(gate_o + peephole_o * c_new);  m = o * act(c)
#   h = proj_bias + W_proj m, clipped to +-proj_clip when proj_clip > 0 (no projection: h = m)
# Outputs: every step's h [B, T, O], then the final h and c (the variable tensors' new values).

CELL_ACTS = {None: lambda x: x, "NONE": lambda x: x, "TANH": np.tanh, "RELU": lambda x: np.maximum(x, 0),
              "RELU6": lambda x: np.clip(x, 0, 6), "RELU_N1_TO_1": lambda x: np.clip(x, -1, 1),
              "SIGN_BIT": lambda x: np.signbit(x).astype(x.dtype)}


def _prepare_tfl_lstm(node, ctx) -> TflLstmPlan:
    act = node.attrs.get("cell_activation", "TANH")
    if act not in CELL_ACTS:
        raise InputError(f"node '{node.name}' (UNIDIRECTIONAL_SEQUENCE_LSTM): unknown activation {act}")
    return TflLstmPlan(CELL_ACTS[act], float(node.attrs.get("cell_clip", 0.0)),
                       float(node.attrs.get("proj_clip", 0.0)), bool(node.attrs.get("time_major", False)),
                       f"node '{node.name}' (UNIDIRECTIONAL_SEQUENCE_LSTM)")


def sigmoid32(x):
    return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)


def _layer_norm(v, coef, bias):
    """MeanStddevNormalization per batch row (variance + 1e-8), then * coef + bias."""
    mean = v.mean(axis=1, keepdims=True, dtype=np.float32)
    var = ((v - mean) ** 2).mean(axis=1, keepdims=True, dtype=np.float32)
    return ((v - mean) / np.sqrt(var + np.float32(1e-8))) * coef + bias


@kernel("UnidirectionalSequenceLSTM", "float", prepare=_prepare_tfl_lstm)
def tflite_lstm(plan, x, w_i, w_f, w_c, w_o, r_i, r_f, r_c, r_o, p_i, p_f, p_o, b_i, b_f, b_c, b_o,
                proj_w, proj_b, h0, c0, ln_i=None, ln_f=None, ln_c=None, ln_o=None):
    x = np.asarray(x, np.float32)
    seq = x if plan.time_major else np.swapaxes(x, 0, 1)  # [T, B, I]
    n_t, batch = seq.shape[0], seq.shape[1]
    n_cell = w_f.shape[0]
    n_out = proj_w.shape[0] if proj_w is not None else n_cell
    h = np.zeros((batch, n_out), np.float32) if h0 is None else np.array(h0, np.float32).reshape(batch, n_out)
    c = np.zeros((batch, n_cell), np.float32) if c0 is None else np.array(c0, np.float32).reshape(batch, n_cell)
    cifg = w_i is None
    act = plan.act

    def gate(w, r, p, b, ln, cell):
        pre = seq_t @ np.asarray(w, np.float32).T + h @ np.asarray(r, np.float32).T
        if p is not None:
            pre = pre + np.asarray(p, np.float32) * cell
        bias = np.zeros(n_cell, np.float32) if b is None else np.asarray(b, np.float32)
        if ln is not None:
            return _layer_norm(pre.astype(np.float32), np.asarray(ln, np.float32), bias)
        return (pre + bias).astype(np.float32)

    outs = []
    for t in range(n_t):
        seq_t = seq[t]
        f = sigmoid32(gate(w_f, r_f, p_f, b_f, ln_f, c))
        i = (np.float32(1) - f) if cifg else sigmoid32(gate(w_i, r_i, p_i, b_i, ln_i, c))
        g = act(gate(w_c, r_c, None, b_c, ln_c, c)).astype(np.float32)
        c = (f * c + i * g).astype(np.float32)
        if plan.cell_clip > 0:
            c = np.clip(c, -plan.cell_clip, plan.cell_clip).astype(np.float32)
        o = sigmoid32(gate(w_o, r_o, p_o, b_o, ln_o, c))
        m = (o * act(c)).astype(np.float32)
        if proj_w is not None:
            m = m @ np.asarray(proj_w, np.float32).T + (0 if proj_b is None else np.asarray(proj_b, np.float32))
            if plan.proj_clip > 0:
                m = np.clip(m, -plan.proj_clip, plan.proj_clip)
        h = m.astype(np.float32)
        outs.append(h)
    y = np.stack(outs) if outs else np.zeros((0, batch, n_out), np.float32)
    if not plan.time_major:
        y = np.swapaxes(y, 0, 1)
    return np.ascontiguousarray(y), h, c


# -- TFLite BIDIRECTIONAL_SEQUENCE_LSTM (float) -----------------------------------------------------
# Inputs: 0 x; 1-17 the forward LSTM's weights / peepholes / biases / projection (as inputs 1-17 of
# the unidirectional op); 18-34 the backward one's; 35, 36 forward output / cell state; 37, 38
# backward ones (variable tensors); 39-47 the auxiliary input and its weights (refused).  The
# backward LSTM reads the sequence from its end; its output at step t is the one for input step t.
# Outputs: forward [.., O_fw] and backward [.., O_bw], or one [.., O_fw + O_bw] with merge_outputs;
# then the four final states (the variable tensors' new values).

def _prepare_bilstm(node, ctx) -> TflLstmPlan:
    p = _prepare_tfl_lstm(node, ctx)
    ins = node.inputs
    if any(len(ins) > k and ins[k] for k in range(39, 48)):
        raise InputError(f"node '{node.name}' (BIDIRECTIONAL_SEQUENCE_LSTM): the auxiliary input is not supported")
    return replace(p, merge=bool(node.attrs.get("merge_outputs", False)),
                   where=f"node '{node.name}' (BIDIRECTIONAL_SEQUENCE_LSTM)")


@kernel("BidirectionalSequenceLSTM", "float", prepare=_prepare_bilstm)
def tflite_bilstm(plan, x, *rest):
    args = list(rest) + [None] * (47 - len(rest))
    fw_w, bw_w = args[0:17], args[17:34]
    fw_h, fw_c, bw_h, bw_c = args[34], args[35], args[36], args[37]
    tm = plan.time_major
    y_fw, h_fw, c_fw = tflite_lstm(plan, x, *fw_w, fw_h, fw_c)
    t_axis = 0 if tm else 1
    y_bw, h_bw, c_bw = tflite_lstm(plan, np.flip(np.asarray(x), axis=t_axis), *bw_w, bw_h, bw_c)
    y_bw = np.ascontiguousarray(np.flip(y_bw, axis=t_axis))
    if plan.merge:
        return (np.concatenate([y_fw, y_bw], axis=-1), h_fw, c_fw, h_bw, c_bw)
    return (y_fw, y_bw, h_fw, c_fw, h_bw, c_bw)
