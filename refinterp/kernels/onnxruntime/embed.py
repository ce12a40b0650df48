"""com.microsoft EmbedLayerNormalization (ONNX Runtime's transformer optimizer output for BERT-style
encoders), float32.

``EmbedLayerNormalization(input_ids, segment_ids?, word_embedding, position_embedding,
segment_embedding?, gamma, beta?, mask?, position_ids?)``::

    e[b, s] = word[input_ids[b, s]] + position[pos[b, s]] (+ segment[segment_ids[b, s]])
    y = (e - mean(e)) / sqrt(var(e) + epsilon) * gamma (+ beta)          over the hidden axis
    pos = position_ids (broadcast over the batch) or 0 .. S-1
    mask_index[b] = sum_s mask[b, s]  (int32; 0 without a mask)

Outputs (y, mask_index, embedding_sum e).  An index outside its table is an InputError naming the
node (ORT fails the run).  Statistics in float64, rounded once: within float32 summation-order error
of ORT's sequential sums.
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from .common import MS
from ..registry import attr_plan, kernel

F32 = np.float32


def _take(plan, table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    ids = np.asarray(ids).astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise InputError(f"{plan.where}: {what} outside 0..{table.shape[0] - 1}")
    return np.asarray(table, F32)[ids]


@kernel(MS + "EmbedLayerNormalization", "float", prepare=attr_plan)
def embed_layer_norm(plan, input_ids, segment_ids, word, position, segment, gamma, beta=None, mask=None,
                     position_ids=None):
    ids = np.asarray(input_ids)
    if ids.ndim != 2:
        raise InputError(f"{plan.where}: input_ids must be [batch, sequence], got shape {list(ids.shape)}")
    b, s = ids.shape
    pos = np.broadcast_to(np.arange(s), (b, s)) if position_ids is None else \
        np.broadcast_to(np.asarray(position_ids).reshape(-1, s), (b, s))
    e = (_take(plan, word, ids, "input_ids") + _take(plan, position, pos, "position ids")).astype(F32)
    if segment is not None and segment_ids is not None:
        e = (e + _take(plan, segment, segment_ids, "segment_ids")).astype(F32)
    e64 = e.astype(np.float64)
    mean = e64.mean(axis=-1, keepdims=True)
    var = ((e64 - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (e64 - mean) / np.sqrt(var + float(plan.attr("epsilon", 1e-12))) * np.asarray(gamma, np.float64)
    if beta is not None:
        y = y + np.asarray(beta, np.float64)
    mask_index = (np.asarray(mask).astype(np.int64).sum(axis=1) if mask is not None
                  else np.zeros(b, np.int64)).astype(np.int32)
    return y.astype(F32), mask_index, e  # by output position (unnamed outputs included)
