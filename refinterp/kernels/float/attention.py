"""ONNX Attention (opsets 23-25; what torch's exporter emits for scaled_dot_product_attention) and
RotaryEmbedding (opset 23), float.

Inputs Q, K, V (4-D ``[B, H, S, D]``, or 3-D ``[B, S, H*D]`` with ``q_num_heads`` / ``kv_num_heads``),
optional attn_mask (bool: attend where true; float: added), past_key / past_value (concatenated before
the new keys along the sequence axis: the present outputs) and nonpad_kv_seqlen (keys at or beyond
it per batch are masked).  Computation, in the inputs' float type::

    s = sqrt(scale)  (scale default 1 / sqrt(D); cast to the input type)
    logits = (Q * s) @ (K * s)^T ; softcap > 0: logits = softcap * tanh(logits / softcap)
    bias   = mask (padded with "masked" up to the key length), causal frontier j <= i + offset
             (offset = past length, or nonpad_kv_seqlen - q_len, or 0), sliding window
             (left / right_window_size), key padding: 0 where attended, -inf where masked
    p = softmax(logits + bias) over keys, in softmax_precision if given; rows whose bias is all -inf
        give 0 (not NaN)
    Y = p @ V      (grouped-query attention: each KV head serves q_heads / kv_heads query heads)

qk_matmul_output: mode 0 / 1 the (softcapped) logits, 2 logits + bias, 3 the probabilities.
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..registry import attr_plan, kernel

_DTYPES = {1: np.float32, 10: np.float16, 11: np.float64, 16: None}


def split_heads(x: np.ndarray, n, where: str, what: str) -> np.ndarray:
    """[B, S, H*D] -> [B, H, S, D]."""
    if n is None or int(n) <= 0 or x.shape[2] % int(n):
        raise InputError(f"{where}: 3-D {what} needs q_num_heads / kv_num_heads dividing its hidden size")
    b, s, hd = x.shape
    return x.reshape(b, s, int(n), hd // int(n)).transpose(0, 2, 1, 3)


def _bias(plan, q_len: int, kv_len: int, batch: int, mask, past_len, nonpad, dtype):
    neg = dtype.type(-np.inf)
    bias = np.zeros((q_len, kv_len), dtype)
    if mask is not None:
        mask = np.asarray(mask)
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
        bias = bias + (np.where(mask, dtype.type(0), neg) if mask.dtype == np.bool_ else mask.astype(dtype))
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    if nonpad is not None and past_len is None:
        offset = (np.asarray(nonpad).reshape(-1) - q_len).reshape(-1, 1, 1, 1)  # per batch
    else:
        offset = past_len or 0
    diff = i + offset - j  # >= 0: key at or before the query's position
    allowed = np.ones(np.shape(diff), bool)
    if int(plan.attr("is_causal", 0)):
        allowed &= diff >= 0
    left, right = int(plan.attr("left_window_size", -1)), int(plan.attr("right_window_size", -1))
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    if not allowed.all():
        bias = bias + np.where(allowed, dtype.type(0), neg)
    if nonpad is not None:
        keep = np.arange(kv_len)[None, :] < np.asarray(nonpad).reshape(-1, 1)
        bias = bias + np.where(keep, dtype.type(0), neg).reshape(batch, 1, 1, kv_len)
    return bias


@kernel("Attention", "float", prepare=attr_plan)
def attention(plan, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    if (past_key is None) != (past_value is None):
        raise InputError(f"{plan.where}: past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise InputError(f"{plan.where}: nonpad_kv_seqlen cannot be combined with a past cache")
    dtype = q.dtype
    three_d = q.ndim == 3
    if three_d:
        q = split_heads(q, plan.attr("q_num_heads"), plan.where, "Q")
        k = split_heads(k, plan.attr("kv_num_heads"), plan.where, "K")
        v = split_heads(v, plan.attr("kv_num_heads"), plan.where, "V")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise InputError(f"{plan.where}: Q, K, V must all be 3-D or all 4-D")
    scale = plan.attr("scale")
    scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else float(scale)
    s = dtype.type(np.sqrt(scale))
    past_len = None
    if past_key is not None:
        past_len = past_key.shape[2]
        k = np.concatenate([past_key, k], axis=2)
        v = np.concatenate([past_value, v], axis=2)
    present_k, present_v = k, v
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        if hq % hk or v.shape[1] != hk:
            raise InputError(f"{plan.where}: {hq} query heads cannot share {hk} key/value heads")
        k, v = np.repeat(k, hq // hk, axis=1), np.repeat(v, hq // hk, axis=1)
    logits = np.matmul(q * s, np.swapaxes(k * s, -1, -2))
    cap = float(plan.attr("softcap", 0.0) or 0.0)
    if cap > 0:
        logits = (np.tanh(logits / dtype.type(cap)) * dtype.type(cap)).astype(dtype)
    bias = _bias(plan, q.shape[2], k.shape[2], q.shape[0], attn_mask, past_len, nonpad_kv_seqlen, dtype)
    scores = logits + bias
    mode = int(plan.attr("qk_matmul_output_mode", 0))
    qk_out = scores.copy() if mode == 2 else logits
    prec = plan.attr("softmax_precision")
    sdt = np.dtype(_DTYPES.get(int(prec)) or dtype) if prec is not None else dtype
    x = scores.astype(sdt)
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(top), sdt.type(0), top))
    total = np.sum(e, axis=-1, keepdims=True)
    p = e / np.where(total == 0, sdt.type(1), total)
    dead = np.isneginf(np.max(np.broadcast_to(bias, scores.shape), axis=-1, keepdims=True))
    p = np.where(dead, sdt.type(0), p)
    if mode == 3:
        qk_out = p
    y = np.matmul(p.astype(dtype), v)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    # one value per declared output position (the runtime pairs them with the node's outputs,
    # unnamed ones included)
    return y.astype(dtype), present_k, present_v, np.asarray(qk_out).astype(dtype)


@kernel("RotaryEmbedding", "float", prepare=attr_plan)
def rotary_embedding(plan, x, cos_cache, sin_cache, position_ids=None):
    """ONNX RotaryEmbedding (opset 23): rotate the first ``rotary_embedding_dim`` (default: all) channels
    of each head by the cached angles; pairs are the two halves, or neighbours when ``interleaved``.
    x: [B, H, S, D], or [B, S, H*D] with ``num_heads``; caches [max_pos, R/2] indexed by position_ids
    [B, S], or [B, S, R/2] without them.  In the input's float type:
    (a, b) -> (cos * a - sin * b, sin * a + cos * b)."""
    shape = x.shape
    if x.ndim == 4:
        t = np.swapaxes(x, 1, 2)  # [B, S, H, D]
    elif x.ndim == 3:
        n = int(plan.attr("num_heads", 0) or 0)
        if n <= 0 or shape[2] % n:
            raise InputError(f"{plan.where}: a 3-D input needs num_heads dividing its hidden size")
        t = x.reshape(shape[0], shape[1], n, shape[2] // n)
    else:
        raise InputError(f"{plan.where}: input rank {x.ndim}, expected 3 or 4")
    d = t.shape[3]
    r = int(plan.attr("rotary_embedding_dim", 0) or 0) or d
    if r > d or r % 2:
        raise InputError(f"{plan.where}: rotary_embedding_dim {r} for heads of {d}")
    cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)
    if position_ids is not None:
        ids = np.asarray(position_ids).astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= cos.shape[0]):
            raise InputError(f"{plan.where}: position_ids outside 0..{cos.shape[0] - 1}")
        cos, sin = cos[ids], sin[ids]
    if cos.shape[-1] != r // 2 or sin.shape[-1] != r // 2:
        raise InputError(f"{plan.where}: caches of width {cos.shape[-1]}, expected rotary_embedding_dim / 2 = {r // 2}")
    cos, sin = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    rot = t[..., :r]
    if int(plan.attr("interleaved", 0)):
        a, b = rot[..., 0::2], rot[..., 1::2]
    else:
        a, b = rot[..., :r // 2], rot[..., r // 2:]
    re, im = cos * a - sin * b, sin * a + cos * b
    if int(plan.attr("interleaved", 0)):
        rot = np.stack([re, im], axis=-1).reshape(rot.shape)
    else:
        rot = np.concatenate([re, im], axis=-1)
    out = np.concatenate([rot, t[..., r:]], axis=-1).astype(x.dtype)
    return np.swapaxes(out, 1, 2) if x.ndim == 4 else out.reshape(shape)
