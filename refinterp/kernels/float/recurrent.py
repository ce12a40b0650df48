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

import numpy as np

from refinterp.errors import InputError
from ..registry import kernel

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _activation(name: str, alpha, beta):
    n = name.lower()
    if n == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
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


def _prepare(node, ctx) -> dict:
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
    return {"op": node.op, "where": where, "direction": direction, "n_dir": n_dir,
            "acts": [acts[d * per_dir:(d + 1) * per_dir] for d in range(n_dir)],
            "clip": None if a.get("clip") is None else float(a["clip"]),
            "hidden": a.get("hidden_size"), "layout": int(a.get("layout", 0)),
            "input_forget": int(a.get("input_forget", 0)),
            "linear_before_reset": int(a.get("linear_before_reset", 0))}


def _run(plan, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    op, g = plan["op"], _GATES[plan["op"]]
    x = np.asarray(x)
    dt = x.dtype
    if plan["layout"]:
        x = np.swapaxes(x, 0, 1)
    t_len, batch = x.shape[0], x.shape[1]
    hid = w.shape[1] // g
    if plan["hidden"] is not None and int(plan["hidden"]) != hid:
        raise InputError(f"{plan['where']}: hidden_size {plan['hidden']} but W has {w.shape[1]} rows for {g} gates")
    n_dir = plan["n_dir"]
    lens = np.full(batch, t_len, np.int64) if seq_lens is None else np.asarray(seq_lens).astype(np.int64)
    if np.any(lens < 0) or np.any(lens > t_len):
        raise InputError(f"{plan['where']}: sequence_lens {lens.tolist()} outside [0, {t_len}]")
    if plan["layout"]:
        h0 = None if h0 is None else np.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else np.swapaxes(c0, 0, 1)
    y = np.zeros((t_len, n_dir, batch, hid), dt)
    y_h = np.zeros((n_dir, batch, hid), dt)
    y_c = np.zeros((n_dir, batch, hid), dt)
    for d in range(n_dir):
        reverse = plan["direction"] == "reverse" or d == 1
        bias = np.zeros(2 * g * hid, dt) if b is None else np.asarray(b[d], dt)
        h = np.zeros((batch, hid), dt) if h0 is None else np.array(h0[d], dt)
        c = np.zeros((batch, hid), dt) if c0 is None else np.array(c0[d], dt)
        peep = np.zeros(3 * hid, dt) if p is None else np.asarray(p[d], dt)
        acts = plan["acts"][d]
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
    if plan["layout"]:
        y = np.transpose(y, (2, 0, 1, 3))
        y_h, y_c = np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
    return (y, y_h, y_c) if op == "LSTM" else (y, y_h)


def _clip(plan, v):
    c = plan["clip"]
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
        if plan["linear_before_reset"]:
            pre = xw[:, 2 * hid:] + rr * (h @ rh.T + rbh)
        else:
            pre = xw[:, 2 * hid:] + (rr * h) @ rh.T + rbh
        n = acts[1](_clip(plan, pre))
        return ((1 - z) * n + z * h).astype(dt), c
    gates = xw + h @ r.T + rb  # i, o, f, c
    pi, po, pf = peep[:hid], peep[hid:2 * hid], peep[2 * hid:]
    i = acts[0](_clip(plan, gates[:, :hid] + pi * c))
    f = 1 - i if plan["input_forget"] else acts[0](_clip(plan, gates[:, 2 * hid:3 * hid] + pf * c))
    cc = acts[1](_clip(plan, gates[:, 3 * hid:]))
    c_new = f * c + i * cc
    o = acts[0](_clip(plan, gates[:, hid:2 * hid] + po * c_new))
    return (o * acts[2](c_new)).astype(dt), c_new.astype(dt)


for _op in _GATES:
    kernel(_op, "float", prepare=_prepare)(_run)
