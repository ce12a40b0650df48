"""ONNX opset-27 state-carrying sequence ops (Gated DeltaNet / Mamba-style blocks), float.

CausalConvWithState(input [B, C, L], weight [C, 1, k], bias? [C], past_state? [B, C, k-1]):
depthwise causal 1-D convolution over ``past_state ++ input`` (zeros without a past), optional fused
SiLU (``activation`` silu / swish, evaluated in float32); present_state = the last k-1 positions of
that concatenation.

LinearAttention(query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv], past_state?
[B, Hkv, dk, dv], decay?, beta?): the recurrent form, per step t in float32::

    gated rules:  S = S * exp(decay_t)                (decay per head, or per key dimension)
    delta rules:  v_t = beta_t * (v_t - S^T k_t)
    S = S + k_t v_t^T ;  o_t = scale * q_t^T S       (each KV head serves Hq / Hkv query heads)

update_rule: linear | gated | delta | gated_delta; scale 0 means 1 / sqrt(dk).  Outputs
[B, T, Hq*dv] in the query's type and the final state in past_state's type (the query's without one).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..registry import attr_plan, kernel
from .attention import split_heads

_F32 = np.float32


@kernel("CausalConvWithState", "float", prepare=attr_plan)
def causal_conv_with_state(plan, x, w, bias=None, past_state=None):
    if x.ndim != 3 or w.ndim != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise InputError(f"{plan.where}: input {list(x.shape)} and weight {list(w.shape)} are not "
                         f"[B, C, L] and [C, 1, k]")
    act = str(plan.attr("conv_activation", "none") or "none")  # the loader renames ONNX's ``activation``
    if act not in ("none", "silu", "swish"):
        raise InputError(f"{plan.where}: activation '{act}' is not one of none, silu, swish")
    b, c, n = x.shape
    k = w.shape[2]
    past = np.zeros((b, c, k - 1), x.dtype) if past_state is None else np.asarray(past_state, x.dtype)
    padded = np.concatenate([past, x], axis=2)
    acc = np.zeros((b, c, n), np.float64)
    for j in range(k):
        acc += padded[:, :, j:j + n].astype(np.float64) * w[None, :, 0, j, None].astype(np.float64)
    if bias is not None:
        acc += np.asarray(bias, np.float64)[None, :, None]
    y = acc.astype(x.dtype)
    if act != "none":
        y32 = y.astype(_F32)
        y = (y32 / (_F32(1) + np.exp(-y32))).astype(x.dtype)
    return y, padded[:, :, padded.shape[2] - (k - 1):]


@kernel("LinearAttention", "float", prepare=attr_plan)
def linear_attention(plan, q, k, v, past_state=None, decay=None, beta=None):
    rule = str(plan.attr("update_rule", "gated_delta") or "gated_delta")
    hq, hk = plan.attr("q_num_heads"), plan.attr("kv_num_heads")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise InputError(f"{plan.where}: update_rule '{rule}' is not one of linear, gated, delta, gated_delta")
    if hq is None or hk is None or int(hq) <= 0 or int(hk) <= 0 or int(hq) % int(hk):
        raise InputError(f"{plan.where}: q_num_heads must be a positive multiple of kv_num_heads")
    hq, hk = int(hq), int(hk)
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise InputError(f"{plan.where}: update_rule '{rule}' takes decay: {gated}, beta: {delta}")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3 or q.shape[2] % hq or k.shape[2] % hk or v.shape[2] % hk:
        raise InputError(f"{plan.where}: query / key / value must be [B, T, heads * dim]")
    b, t, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hk
    q4, k4, v4 = (split_heads(a, n, plan.where, what).astype(_F32)
                  for a, n, what in ((q, hq, "query"), (k, hk, "key"), (v, hk, "value")))
    g4 = None
    if gated:
        if decay.shape[-1] == hk:
            g4 = decay.reshape(b, t, hk, 1).transpose(0, 2, 1, 3).astype(_F32)
        elif decay.shape[-1] == hk * dk:
            g4 = split_heads(decay, hk, plan.where, "decay").astype(_F32)
        else:
            raise InputError(f"{plan.where}: decay's last dimension {decay.shape[-1]} is neither {hk} nor {hk * dk}")
    if delta:
        if beta.shape[-1] not in (hk, 1):
            raise InputError(f"{plan.where}: beta's last dimension {beta.shape[-1]} is neither {hk} nor 1")
        beta4 = beta.reshape(b, t, beta.shape[-1], 1).transpose(0, 2, 1, 3).astype(_F32)
    if past_state is not None:
        if past_state.shape != (b, hk, dk, dv):
            raise InputError(f"{plan.where}: past_state {list(past_state.shape)} is not {[b, hk, dk, dv]}")
        state, state_dtype = past_state.astype(_F32), past_state.dtype
    else:
        state, state_dtype = np.zeros((b, hk, dk, dv), _F32), q.dtype
    scale = float(plan.attr("scale", 0.0) or 0.0) or 1.0 / np.sqrt(dk)
    out = np.zeros((b, hq, t, dv), _F32)
    group = hq // hk
    for i in range(t):
        kt, vt = k4[:, :, i], v4[:, :, i]
        if gated:
            state = state * np.exp(g4[:, :, i])[..., None]
        if delta:
            vt = beta4[:, :, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
        state = state + kt[..., :, None] * vt[..., None, :]
        read = state if group == 1 else np.repeat(state, group, axis=1)
        out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q4[:, :, i], read)
    y = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv).astype(q.dtype)
    return y, state.astype(state_dtype)
