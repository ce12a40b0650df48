"""com.microsoft ``Attention`` and ``QAttention`` (ONNX Runtime's transformer optimizer and quantizer
emit them for BERT-style self-attention), float32 as ONNX Runtime's CPU kernels compute them
(``contrib_ops/cpu/bert/attention.cc``, ``attention_cpu_base.h``, ``quantization/attention_quant.cc``).

Inputs: input [B, S, D]; weights [D, 3 H] (Q, K, V blocks; ``qkv_hidden_sizes`` may size them
differently); bias [3 H]; mask_index (optional).  Attributes: num_heads, unidirectional,
mask_filter_value (default -10000), scale (default 1 / sqrt(head size)).  Per batch and head::

    Q, K, V = (input @ W + bias) split and reshaped to [B, N, S, h]
    scores  = scale * Q K^T  (+ mask_filter_value where the key is masked or, unidirectional,
              in the future)
    probs   = softmax over keys (MLAS order, kernels/onnxruntime/float_softmax.py)
    output  = probs V, heads concatenated -> [B, S, H_v]

mask_index: raw [B, S_total] 0/1 (0 masks the key) or [B, S, S_total]; key lengths [B] (keys
at and after the length are masked).  Past / present state, relative position bias and the other
mask forms are refused by name.  QAttention: input and weights are 8-bit with zero points;
QKV = f32((x - zp_x) @ (w - zp_w)) * f32(s_x * s_w) + bias (the int32 product is exact), then the
same attention.  Float results: checked against ONNX Runtime within 1e-5 relative.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from .float_softmax import mlas_softmax
from .common import MS
from ..registry import kernel

F32 = np.float32


@dataclass(frozen=True)
class AttentionPlan:
    where: str
    heads: int
    unidirectional: bool
    mask_filter: np.float32
    scale: float | None  # None: 1 / sqrt(head size)
    qkv_sizes: tuple[int, int, int] | None


def _prepare(node, ctx) -> AttentionPlan:
    w = f"node '{node.name}' ({node.op.replace(MS, '')})"
    q = node.op == MS + "QAttention"
    past_slot = 8 if q else 4
    if len(node.inputs) > past_slot and node.inputs[past_slot]:
        raise UnsupportedOpError(f"{w}: past / present key-value state is not supported")
    if not q and len(node.inputs) > 5 and any(node.inputs[5:]):
        raise UnsupportedOpError(f"{w}: relative position bias / past sequence length are not supported")
    for a in ("do_rotary", "past_present_share_buffer"):
        if int(node.attrs.get(a, 0) or 0):
            raise UnsupportedOpError(f"{w}: attribute {a} is not supported")
    heads = int(node.attrs.get("num_heads", 0) or 0)
    if heads <= 0:
        raise UnsupportedOpError(f"{w}: num_heads must be positive")
    sizes = node.attrs.get("qkv_hidden_sizes")
    scale = node.attrs.get("scale")
    return AttentionPlan(w, heads, bool(int(node.attrs.get("unidirectional", 0) or 0)),
                         F32(node.attrs.get("mask_filter_value", -10000.0)),
                         None if scale in (None, 0.0) else float(scale),
                         None if not sizes else tuple(int(v) for v in sizes))


def _mask(plan: AttentionPlan, mask, b: int, s: int) -> np.ndarray:
    """Additive float32 mask [B, 1, S, S] (0 or mask_filter_value)."""
    add = np.zeros((b, 1, s, s), F32)
    if mask is not None:
        m = np.asarray(mask)
        if m.ndim == 1 and m.shape[0] == b:  # key lengths
            keep = np.arange(s)[None, :] < m.astype(np.int64)[:, None]
            add = np.where(keep[:, None, None, :], add, plan.mask_filter)
        elif m.ndim == 2 and m.shape == (b, s):
            add = np.where((m != 0)[:, None, None, :], add, plan.mask_filter)
        elif m.ndim == 3 and m.shape == (b, s, s):
            add = np.where((m != 0)[:, None, :, :], add, plan.mask_filter)
        else:
            raise UnsupportedOpError(f"{plan.where}: mask_index of shape {list(m.shape)} is not supported")
    if plan.unidirectional:
        future = np.triu(np.ones((s, s), bool), 1)
        add = np.where(future[None, None], plan.mask_filter, add)
    return add.astype(F32)


def _attend(plan: AttentionPlan, qkv: np.ndarray, mask) -> np.ndarray:
    b, s, total = qkv.shape
    hq, hk, hv = plan.qkv_sizes or (total // 3,) * 3
    if hq + hk + hv != total or hq != hk or hq % plan.heads or hv % plan.heads:
        raise UnsupportedOpError(f"{plan.where}: hidden sizes {hq}, {hk}, {hv} do not split into "
                                 f"{plan.heads} heads")
    n = plan.heads

    def heads(block: np.ndarray) -> np.ndarray:
        return block.reshape(b, s, n, -1).transpose(0, 2, 1, 3)  # [B, N, S, h]

    Q, K, V = heads(qkv[..., :hq]), heads(qkv[..., hq:hq + hk]), heads(qkv[..., hq + hk:])
    scale = F32(plan.scale if plan.scale is not None else 1.0 / np.sqrt(hq // n))
    scores = (np.matmul(Q, K.transpose(0, 1, 3, 2)) * scale).astype(F32)
    scores = (scores + _mask(plan, mask, b, s)).astype(F32)
    probs = mlas_softmax(np.ascontiguousarray(scores), -1)
    out = np.matmul(probs, V).astype(F32)  # [B, N, S, hv/N]
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3).reshape(b, s, hv))


@kernel(MS + "Attention", "float", prepare=_prepare)
def attention(plan: AttentionPlan, x, weights, bias=None, mask_index=None, *unused):
    x = np.asarray(x, F32)
    qkv = (x @ np.asarray(weights, F32)).astype(F32)
    if bias is not None:
        qkv = (qkv + np.asarray(bias, F32)).astype(F32)
    return _attend(plan, qkv, mask_index)


@kernel(MS + "QAttention", "float", prepare=_prepare, raw_inputs=True)
def qattention(plan: AttentionPlan, x, weights, bias, x_scale, w_scale, mask_index=None, x_zp=None, w_zp=None,
               *unused):
    xi = np.asarray(x).astype(np.int64) - (0 if x_zp is None else int(np.asarray(x_zp).ravel()[0]))
    wi = np.asarray(weights).astype(np.int64) - (0 if w_zp is None else np.asarray(w_zp).astype(np.int64))
    acc = xi @ wi  # exact: |acc| < 2^31 for D < 2^15
    s = (F32(np.asarray(x_scale).ravel()[0]) * np.asarray(w_scale, F32).ravel()).astype(F32)
    qkv = (acc.astype(F32) * (s if s.size > 1 else s[0])).astype(F32)
    qkv = (qkv + np.asarray(bias, F32)).astype(F32)
    return _attend(plan, qkv, mask_index)
